"""The Triton wild set on the CPU: discovery of every @triton.jit function with ast (stacked
decorators, factories, `from triton import jit`), kernel / helper roles, the local wheel, and the table
(rate over kernels, located failures, one row per function)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from eval import wild_triton as wt
from eval.wild import Row

KERNELS = '''
import triton
import triton.language as tl
from .helpers import scale_helper


@triton.jit
def square(x):
    return x * x


@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def launched_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, scale_helper(square(tl.load(x_ptr + offs))), mask=offs < n)


def make(flag):
    @triton.jit(do_not_specialize=["n"])
    def inner_kernel(x_ptr, n):
        pass
    return inner_kernel


def host(x):
    launched_kernel[(1,)](x, 4)
'''

HELPERS = '''
from triton import jit as tjit


@tjit
def scale_helper(x):
    return x * 2


@tjit
def never_called(x):
    return x


@tjit
def combine(a, b):
    return a + b


@tjit
def reducing(x_ptr):
    tl.store(x_ptr, tl.reduce(tl.load(x_ptr), 0, combine))
'''


def _package(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "kernels.py").write_text(KERNELS)
    (pkg / "helpers.py").write_text(HELPERS)
    (pkg / "plain.py").write_text("def jit(f):\n    return f\n\n@jit\ndef not_triton():\n    pass\n")
    (pkg / "broken.py").write_text("import triton\n@triton.jit\ndef k(:\n")
    return root


def test_discovery_finds_every_jit_function_and_roles(tmp_path):
    root = _package(tmp_path)
    sites = wt.discover([("pkg", "1.0", root)])
    found = {(s.file, s.kernel, s.factory) for s in sites}
    assert found == {("pkg/kernels.py", "square", None), ("pkg/kernels.py", "launched_kernel", None),
                     ("pkg/kernels.py", "inner_kernel", "make"), ("pkg/helpers.py", "scale_helper", None),
                     ("pkg/helpers.py", "never_called", None), ("pkg/helpers.py", "combine", None),
                     ("pkg/helpers.py", "reducing", None)}
    role = wt.roles(sites, {"pkg": root})
    assert role[("pkg", "pkg/kernels.py", "square")] == "helper"
    assert role[("pkg", "pkg/helpers.py", "scale_helper")] == "helper"  # called from another file
    assert role[("pkg", "pkg/kernels.py", "launched_kernel")] == "kernel"
    assert role[("pkg", "pkg/helpers.py", "never_called")] == "kernel"
    assert role[("pkg", "pkg/kernels.py", "inner_kernel")] == "kernel"
    assert role[("pkg", "pkg/helpers.py", "combine")] == "helper"  # passed as a combine function


def test_fetch_takes_the_pinned_wheel_from_a_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(wt, "PACKAGES", (("demo-pkg", "1.2.3"),))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "demo_pkg-1.2.3-py3-none-any.whl", "w") as z:
        z.writestr("demo_pkg/k.py", KERNELS)
        z.writestr("demo_pkg/data.bin", b"\0")
    monkeypatch.setattr(wt, "download", lambda *a: (_ for _ in ()).throw(AssertionError("no download")))
    [(pkg, ver, root)] = wt.fetch(tmp_path / "work", wheels)
    assert (pkg, ver) == ("demo-pkg", "1.2.3") and (root / "demo_pkg" / "k.py").is_file()
    assert not (root / "demo_pkg" / "data.bin").exists()


def test_table_rate_is_over_kernels_and_failures_are_located(tmp_path):
    rows = [Row("p", "a.py", "k_ok", 3, None, translate_ok=True),
            Row("p", "a.py", "k_bad", 9, None, translate_diagnostic={
                "message": "tl.atomic_cas is not supported", "construct": "tl.atomic_cas",
                "file": str(tmp_path / "a.py"), "line": 12, "col": 5}),
            Row("p", "a.py", "k_unlocated", 20, None, translate_diagnostic={"message": "?", "construct": ""}),
            Row("p", "a.py", "h", 30, None, translate_diagnostic={"message": wt.NOT_REPORTED, "construct": "kernel",
                                                                  "file": "a.py", "line": 30, "col": 1}),
            Row("p", "a.py", "h_bad", 40, None, translate_diagnostic={"message": "two pointers", "construct": "ptr",
                                                                      "file": "a.py", "line": 41, "col": 3})]
    role = {("p", "a.py", n): "helper" if n.startswith("h") else "kernel"
            for n in ("k_ok", "k_bad", "k_unlocated", "h", "h_bad")}
    table = wt.make_table(rows, [("p", "1", tmp_path)], role)
    s = table["summary"]
    assert s["kernels"] == {"functions": 3, "translate_ok": 1, "translate_rate": 0.3333, "failures": 2,
                            "failures_located": 1}
    assert s["helpers"] == {"functions": 2, "inlined": 1, "diagnosed": 1}
    md = wt.render_markdown(table)
    assert "**1/3** (33 %)" in md and "located diagnostic naming the construct: 1/2" in md
    # the diagnostic's path is relative to the package root
    assert "| p | a.py | `k_bad` | kernel | FAIL | a.py:12:5 [tl.atomic_cas] tl.atomic_cas is not supported |" in md
    assert "| p | a.py | `h` | helper | inlined |  |" in md
    assert "- 1 × [tl.atomic_cas] tl.atomic_cas is not supported" in md and "did not report" not in md
