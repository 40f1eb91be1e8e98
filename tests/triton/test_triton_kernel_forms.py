"""How libraries define kernels: `triton.jit` / `triton.autotune` / `triton.heuristics` applied as functions,
module-level aliases, and decorators Triton does not know stacked on the jit one (no GPU, no cargo)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file

HEADER = "import triton\nimport triton.language as tl\n\n"


def translated(tmp_path: Path, body: str, configs=None):
    path = tmp_path / "forms.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return translate_file(str(path), configs, naming=RUST_NAMING)


FUNCTION_FORMS = """
    def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, double(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


    def _double(x):
        return x * 2


    def _even(x_ptr, y_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if EVEN:
            tl.store(y_ptr + offs, tl.load(x_ptr + offs))
        else:
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    def _plain(x_ptr, n):
        pass


    double = triton.jit(_double)
    copy = triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 512})], key=["n"])(
        triton.jit(_copy, do_not_specialize=["n"]))
    even = triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(triton.jit(_even))
    same_even = even
    not_jitted = _plain


    def launch(x, y, n):
        copy[(1,)](x, y, n)
        same_even[(1,)](x, y, n, BLOCK=128)
"""


def test_kernels_defined_by_calling_triton_decorators(tmp_path):
    tr = translated(tmp_path, FUNCTION_FORMS)
    assert not tr.diagnostics, tr.diagnostics
    entries = {k.base_name: k.name for k in tr.module.kernels} | {k.name: k.base_name for k in tr.module.kernels}
    # named as the function (Triton's launches report fn.__name__); `double` is a helper, inlined
    assert sorted({k.base_name for k in tr.module.kernels}) == ["_copy", "_even"]
    assert "_even_even0" in entries and "_even_even1" in entries  # the heuristic's flag takes both values
    copy = next(k for k in tr.module.kernels if k.base_name == "_copy")
    assert [p.name for p in copy.const_params] == ["BLOCK"]  # the autotune configs reach the kernel (occupancy)
    assert any("occupancy hint" in n for n in copy.notes)


def test_a_jit_function_called_through_an_alias_is_a_helper(tmp_path):
    tr = translated(tmp_path, """
        @triton.jit
        def tile_of_v1(pid, n):
            return pid % n

        tile_of = tile_of_v1

        @triton.jit
        def kern(x_ptr, n, BLOCK: tl.constexpr):
            t = tile_of(tl.program_id(0), n)
            offs = t * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert [k.base_name for k in tr.module.kernels] == ["kern"]


def test_decorators_triton_does_not_know_are_noted(tmp_path):
    tr = translated(tmp_path, """
        import functools

        def libentry():
            return lambda f: f

        def checked(f):
            return f

        @libentry()
        @triton.jit
        @checked
        def kern(x_ptr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    notes = [n for n in k.notes if "is not Triton's" in n]
    assert notes == ["decorator `@libentry()` is not Triton's: the port is the jit function it wraps",
                     "decorator `@checked` is not Triton's: the port is the jit function it wraps"]
