"""Constexpr values a Rust const generic cannot hold (floats, bools, None, strings), through the Triton frontend,
the launcher and the generic arguments the cutile JIT is given.

The cutile JIT instantiates an entry's const generics from text: `const X: i32` takes an i32, `const X: bool`
a bool, nothing else (cutile-compiler generics.rs, `GenericVars::from_flat`); Rust has no float const generics.
`jit_accepts` applies that rule to the emitted entry, so these tests need no cargo build."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from tileport.capture import generic_arguments
from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.base import KernelConfig
from tileport.frontends.triton import translate_file
from tileport.ops.spec import Capture
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path


def port(path: Path, configs: list[dict] | None = None):
    cfg = {"k": KernelConfig(tuple(configs))} if configs else None
    return translate([str(path)], None, configs={str(path): cfg} if cfg else None, faithful=True)


def entry_text(files: dict, name: str) -> str:
    text = files["src/kern.rs"]
    start = text.index(f"pub unsafe fn {name}")
    return text[start:text.index("\n    }\n", start)]


def jit_accepts(files: dict, entry: str, generics: list[str]) -> list[str]:
    """Why the cutile JIT would refuse these generic arguments for `entry` (empty: it accepts them)."""
    head = entry_text(files, entry)
    declared = re.findall(r"(?:const (\w+): (\w+)|(\w+): ElementType)", head[:head.index(">(")])
    problems = []
    for (name, ty, dvar), arg in zip(declared, generics):
        if dvar:
            continue
        ok = re.fullmatch(r"-?\d+", arg) and -2**31 <= int(arg) < 2**31 if ty == "i32" else arg in ("true", "false")
        if not ok:
            problems.append(f"`{arg}` for const {name}: {ty}")
    if len(declared) != len(generics):
        problems.append(f"{len(generics)} generic arguments for {len(declared)} parameters")
    return problems


def generics_for(files: dict, constants: dict, arrays: dict) -> tuple[str, list[str]]:
    manifest = json.loads(files["kernels.json"])
    entry = next(e for e in manifest["entries"] if e["kernel"] == "k")
    return generic_arguments(entry, Capture("k", arrays, {}, constants))


def test_not_of_a_constexpr_without_value_is_specialized_not_folded(tmp_path):
    """Regression: `not FLAG` folded to False (the truth of the symbol, not of its value), so only the
    `else` branch was ported, for every value of FLAG."""
    path = write(tmp_path, """
        @triton.jit
        def k(y_ptr, FLAG: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            if not FLAG:
                tl.store(y_ptr + offs, tl.full((BLOCK,), 1.0, tl.float32))
            else:
                tl.store(y_ptr + offs, tl.full((BLOCK,), 2.0, tl.float32))
    """)
    r = port(path)
    assert r.ok, [str(x.diagnostic) for x in r.results]
    assert "1.0" in entry_text(r.files, "k_flag0") and "2.0" not in entry_text(r.files, "k_flag0")
    assert "2.0" in entry_text(r.files, "k_flag1") and "1.0" not in entry_text(r.files, "k_flag1")


FLOAT_BOOL = """
    @triton.jit
    def k(x_ptr, y_ptr, n, eps: tl.constexpr, fill: tl.constexpr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=fill)
        tl.store(y_ptr + offs, x * SCALE + eps, mask=offs < n)
"""


def test_float_and_bool_constexpr_values_are_specialized(tmp_path):
    """Regression: float and bool constexpr values became `const NAME: i32` generics, and the cutile JIT refused
    the arguments (`1e-06`, `false`). Now they are specialized: each entry holds its values as literals."""
    path = write(tmp_path, FLOAT_BOOL)
    configs = [{"x_ptr": "f32", "y_ptr": "f32", "n": "i32", "eps": 1e-06, "fill": -1e9, "SCALE": True, "BLOCK": 64},
               {"x_ptr": "f32", "y_ptr": "f32", "n": "i32", "eps": 1e-05, "fill": 0.0, "SCALE": False, "BLOCK": 128}]
    r = port(path, configs)
    assert r.ok, [str(x.diagnostic) for x in r.results]
    arrays = {"x_ptr": ("float32", 1), "y_ptr": ("float32", 1)}
    for c in configs:
        consts = {k: v for k, v in c.items() if k in ("eps", "fill", "SCALE", "BLOCK")}
        name, generics = generics_for(r.files, consts, arrays)
        assert not jit_accepts(r.files, name, generics), (name, generics)
        assert str(c["BLOCK"]) in generics  # the integer constexpr stays a const generic
    first = entry_text(r.files, generics_for(r.files, {"eps": 1e-06, "fill": -1e9, "SCALE": True, "BLOCK": 64},
                                             arrays)[0])
    assert "1.0e-6f32" in first and "-1000000000.0f32" in first  # the values, as literals
    launcher = r.files["src/kern.rs"][r.files["src/kern.rs"].index('extern "C" fn'):]
    assert "eps: f64" in launcher and "SCALE: bool".lower() in launcher.lower()
    assert "eps == 1e-06" in launcher and "fill == -1000000000.0" in launcher


def test_integer_constexprs_stay_generic(tmp_path):
    path = write(tmp_path, FLOAT_BOOL)
    r = port(path, [{"x_ptr": "f32", "y_ptr": "f32", "n": "i32", "eps": 1, "fill": 0, "SCALE": 2, "BLOCK": 64}])
    assert r.ok, [str(x.diagnostic) for x in r.results]
    manifest = json.loads(r.files["kernels.json"])
    [variant] = manifest["entries"][0]["variants"]
    assert variant["entry"] == "k" and variant["pinned"] == {}
    assert variant["generics"][-4:] == ["eps", "fill", "SCALE", "BLOCK"]


NONE_POINTER = """
    @triton.jit
    def k(x_ptr, w_ptr, y_ptr, n, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        if HAS_W:
            x = x * tl.load(w_ptr + offs, mask=offs < n, other=0.0)
        if w_ptr is not None:
            x = x + 1.0
        tl.store(y_ptr + offs, x, mask=offs < n)
"""


def test_none_pointer_guarded_by_a_constexpr_is_specialized(tmp_path):
    """Regression: a pointer passed as None (Triton specializes it) crashed the translator ("internal translator
    error: ... NoneType"). It is now a None specialization: the entry has no such array, the launcher takes a null
    pointer for it."""
    path = write(tmp_path, NONE_POINTER)
    r = port(path, [{"x_ptr": "f32", "w_ptr": None, "y_ptr": "f32", "n": "i32", "HAS_W": False, "BLOCK": 64}])
    assert r.ok, [str(x.diagnostic) for x in r.results]
    manifest = json.loads(r.files["kernels.json"])
    params = {p["name"]: p for p in manifest["entries"][0]["params"]}
    assert params["w_ptr"]["kind"] == "const" and params["w_ptr"]["type"] == "none"
    [variant] = manifest["entries"][0]["variants"]
    assert variant["pinned"]["w_ptr"] is None and "w_ptr" not in variant["array_dtypes"]
    body = entry_text(r.files, variant["entry"])
    assert "w_ptr" not in body and "1.0" not in body  # neither guarded use is ported
    launcher = r.files["src/kern.rs"][r.files["src/kern.rs"].index('extern "C" fn'):]
    assert "w_ptr: *const TensorDesc" in launcher and "w_ptr.is_null()" in launcher
    name, generics = generics_for(r.files, {"w_ptr": None, "HAS_W": False, "BLOCK": 64},
                                  {"x_ptr": ("float32", 1), "y_ptr": ("float32", 1)})
    assert name == variant["entry"] and not jit_accepts(r.files, name, generics)


def test_the_idiomatic_launcher_names_a_none_array_in_its_unspecialized_error(tmp_path):
    """An array pinned to None crosses the idiomatic ABI as an optional descriptor, which has no Debug form: the
    unspecialized error says whether one was given (formatting it with `{:?}` did not compile)."""
    path = write(tmp_path, NONE_POINTER)
    cfg = {"k": KernelConfig(({"x_ptr": "f32", "w_ptr": None, "y_ptr": "f32", "n": "i32", "HAS_W": False,
                               "BLOCK": 64},))}
    r = translate([str(path)], None, configs={str(path): cfg})
    assert r.ok, [str(x.diagnostic) for x in r.results]
    text = r.files["src/kern.rs"]
    launcher = text[text.index('extern "C" fn'):]
    assert "w_ptr:?" not in launcher
    assert re.search(r'unspecialized\(format!\("[^"]*w_ptr=\{\}[^"]*", if w_ptr\.is_none\(\) \{ "None" \} '
                     r'else \{ "an array" \}\)\)', launcher), launcher


def test_none_in_some_configurations_only_is_a_located_diagnostic(tmp_path):
    path = write(tmp_path, NONE_POINTER)
    base = {"x_ptr": "f32", "y_ptr": "f32", "n": "i32", "HAS_W": False, "BLOCK": 64}
    cfg = KernelConfig(({**base, "w_ptr": None}, {**base, "w_ptr": "f32", "HAS_W": True}))
    tr = translate_file(str(path), {"k": cfg}, naming=RUST_NAMING)
    [d] = tr.diagnostics
    assert d.construct == "specialization" and "`w_ptr` is None in some configurations" in d.message
    assert (d.loc.line, d.loc.col) == (5, 14)


def test_unguarded_use_of_a_none_pointer_is_a_located_diagnostic(tmp_path):
    path = write(tmp_path, """
        @triton.jit
        def k(x_ptr, w_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(w_ptr + offs))
    """)
    cfg = KernelConfig(({"x_ptr": "f32", "w_ptr": None, "BLOCK": 64},))
    tr = translate_file(str(path), {"k": cfg}, naming=RUST_NAMING)
    [d] = tr.diagnostics
    assert d.construct != "internal" and d.loc.line == 7, str(d)


DSL_NAMED = """
    @triton.jit
    def k(x_ptr, E: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.zeros([BLOCK], tl.int32), mask=offs < E)
"""


def test_a_constexpr_named_like_a_dsl_type_is_no_const_generic(tmp_path):
    """Regression: `E: tl.constexpr` became `const E: i32`, a name the cutile compiler resolves as the element
    type generic of its own items (a JIT panic, "Unexpected primitives"). With values it is specialized, without
    it is a runtime value under a safe identifier."""
    path = write(tmp_path, DSL_NAMED)
    r = port(path, [{"x_ptr": "i32", "E": 8, "BLOCK": 64}])
    assert r.ok, [str(x.diagnostic) for x in r.results]
    manifest = json.loads(r.files["kernels.json"])
    [variant] = manifest["entries"][0]["variants"]
    assert variant["pinned"] == {"E": 8} and "E" not in variant["generics"]
    assert "const E:" not in entry_text(r.files, variant["entry"])
    r = port(path, [{"x_ptr": "f32", "E": 8, "BLOCK": 64}, {"x_ptr": "bf16", "E": 8, "BLOCK": 64}])
    assert r.ok, [str(x.diagnostic) for x in r.results]
    for torch_dtype, dtype in (("float32", "f32"), ("bfloat16", "bf16")):  # the dtype generic E, not the constant
        name, generics = generics_for(r.files, {"E": 8, "BLOCK": 64}, {"x_ptr": (torch_dtype, 1)})
        assert generics == [dtype, "64"] and not jit_accepts(r.files, name, generics), generics
    r = port(path)
    assert r.ok, [str(x.diagnostic) for x in r.results]
    assert not re.search(r"\bE\b", entry_text(r.files, "k").split(">(")[0].replace("E: ElementType", ""))


def test_the_runtime_passes_a_none_argument_as_a_null_pointer():
    """The launcher's C argument for an argument every entry takes as None is a pointer the caller passes null."""
    import ctypes
    from types import SimpleNamespace

    from tileport.runtime.library import Entry

    class Dll:  # a library exporting the symbol `s` (no call is made)
        s = SimpleNamespace()

        def __getitem__(self, name):
            return SimpleNamespace()

    spec = {"symbol": "s", "kernel": "k", "params": [
        {"name": "x", "kind": "scalar", "dtype": "i32"},
        {"name": "w_ptr", "kind": "const", "type": "none", "selects_entry": True}]}
    entry = Entry(SimpleNamespace(dll=Dll(), path=Path("lib.so")), spec)
    assert entry.fn.argtypes[:2] == [ctypes.c_int32, ctypes.c_void_p]
    launch = entry.prepare((1,), 0, {}, {"x": 3, "w_ptr": None})
    assert [type(v) for v in launch.values] == [ctypes.c_int32, ctypes.c_void_p] and launch.values[1].value is None
