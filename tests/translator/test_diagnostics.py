"""Unsupported and malformed kernels: every one is a Diagnostic, never an exception.

For each case: `translate()` reports a Diagnostic naming the construct, with `file:line:col` of the
offending node (line and column asserted exactly: the column is 1-based, as cuTile Python reports
it), a hint where the translator has one; the other kernels of the same file still translate; and
the output directory holds only complete files (or nothing, when no kernel translated). The CLI
prints the diagnostics and exits 1 without a traceback.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from rich.console import Console
from tp_helpers import HEADER, kernel_configs, launcher_text, lines, module_text, run, write_kernels
from typer.testing import CliRunner

from tileport import cli
from tileport.diagnostics import Diagnostic
from tileport.translate import translate

GOOD = """

@ct.kernel
def good_kernel(x, y, TILE: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(TILE,)))
"""


class Case:
    def __init__(self, name, source, construct, marker, needle, message, hint=None, kernel="bad_kernel"):
        self.name, self.source, self.construct = name, textwrap.dedent(source).lstrip("\n"), construct
        self.marker, self.needle, self.message, self.hint, self.kernel = marker, needle, message, hint, kernel

    def text(self) -> str:
        return HEADER + self.source + GOOD

    def where(self) -> tuple[int, int]:
        """(line, col) of the offending node: the line holding `marker`, the column of `needle` (1-based)."""
        for n, line in enumerate(self.text().splitlines(), 1):
            if self.marker in line:
                return n, line.index(self.needle) + 1
        raise AssertionError(f"marker {self.marker!r} not in the source")


CASES = [
    Case("unknown_ct_call", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=ct.frobnicate(t))
    """, "ct.frobnicate", "ct.frobnicate(t)", "ct.frobnicate", "`ct.frobnicate` is not supported by the translator",
         hint="docs/translator.md"),
    Case("shape_mismatch", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            a = ct.load(x, index=(0,), shape=(64,))
            b = ct.load(x, index=(0,), shape=(32,))
            ct.store(y, index=(0,), tile=a + b)
    """, "shape", "tile=a + b", "a + b", "broadcast: shape mismatch, 64 vs 32"),
    Case("runtime_value_in_shape", """
        @ct.kernel
        def bad_kernel(x, y, n):
            t = ct.load(x, index=(0,), shape=(n,))
            ct.store(y, index=(0,), tile=t)
    """, "tile shape", "shape=(n,)", "ct.load", "tile shapes must be tuples of compile-time integers",
         hint="ct.Constant[int]"),
    Case("recursion", """
        def helper(t):
            return helper(t)


        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            ct.store(y, index=(0,), tile=helper(t))
    """, "recursion", "return helper(t)", "helper(t)", "helper `helper` is recursive", hint="cannot recurse"),
    Case("while_else", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            i = 0
            while i < 4:
                i += 1
            else:
                i = 0
            ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(TILE,)))
    """, "while-else", "while i < 4", "while", "`while ... else` is not supported"),
    Case("for_over_non_range", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            for i in [0, 1, 2]:
                ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(TILE,)))
    """, "for", "for i in [0, 1, 2]", "[0, 1, 2]", "only `for ... in range(...)` loops are supported",
         hint="range(start, stop, step)"),
    Case("kernel_returns_value", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            ct.store(y, index=(0,), tile=t)
            return t
    """, "return", "return t", "return t", "kernels cannot return a value"),
    Case("undefined_name", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            ct.store(y, index=(0,), tile=t * bogus)
    """, "name", "t * bogus", "bogus", "undefined name `bogus`"),
    Case("load_index_rank", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0, 0), shape=(TILE, TILE))
            ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(TILE,)))
    """, "ct.load", "tile=ct.load(x, index=(0,)", "ct.load(x, index=(0,)",
         "ct.load: index has 1 entries, the array has rank 2"),
    Case("mixed_dtype_promotion", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            a = ct.astype(ct.load(x, index=(0,), shape=(TILE,)), ct.float16)
            b = ct.astype(ct.load(x, index=(0,), shape=(TILE,)), ct.bfloat16)
            ct.store(y, index=(0,), tile=ct.astype(a + b, ct.float32))
    """, "dtype", "ct.astype(a + b", "a + b", "no implicit conversion between f16, bf16", hint="ct.astype"),
    Case("store_needs_narrowing_cast", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.astype(ct.load(x, index=(0,), shape=(TILE,)), ct.float32)
            ct.store(y, index=(0,), tile=t)
    """, "dtype", "ct.store(y, index=(0,), tile=t)", "ct.store", "cannot implicitly cast to the array's dtype",
         hint="ct.astype"),
    Case("chained_comparison", """
        @ct.kernel
        def bad_kernel(x, y, n, TILE: ConstInt):
            i = ct.bid(0)
            if 0 < i < n:
                ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(TILE,)))
    """, "comparison", "if 0 < i < n", "0 < i < n", "chained comparisons are not supported", hint="split"),
    Case("unsupported_statement", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            assert TILE > 0
            ct.store(y, index=(0,), tile=t)
    """, "Assert", "assert TILE", "assert", "`Assert` statements are not supported in kernels"),
    Case("min_of_constant_without_values", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))  # TILE is a tile dimension: it needs values
            ct.store(y, index=(0,), tile=t * min(TILE, 2.5))
    """, "specialization", "min(TILE, 2.5)", "min(", "min of constants; constant(s) TILE must be specialized",
         hint="give the constant values in use"),
    Case("max_of_constant_without_values", """
        @ct.kernel
        def bad_kernel(x, y, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))  # TILE is a tile dimension: it needs values
            ct.store(y, index=(0,), tile=t * max(2.5, TILE))
    """, "specialization", "max(2.5, TILE)", "max(", "max of constants; constant(s) TILE must be specialized",
         hint="give the constant values in use"),
    Case("int_literal_on_generic_scalar", """
        @ct.kernel
        def bad_kernel(x, y, n: int, TILE: ConstInt):
            s = ct.astype(n, x.dtype) + 1
            t = ct.load(x, index=(0,), shape=(TILE,))
            ct.store(y, index=(0,), tile=t * s)
    """, "literal", "def bad_kernel", "def", "literal 1.0 needs a concrete scalar type"),
    Case("unknown_kernel_option", """
        @ct.kernel(occupancy=2, frobs=3)
        def bad_kernel(x, y, TILE: ConstInt):
            ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(TILE,)))
    """, "ct.kernel", "frobs=3", "frobs", "kernel option `frobs` is not supported"),
]

# f16 + bf16 is refused by cuTile Python too ("Implicit promotion of float16 and bfloat16 is not
# supported"), at the same line and column (checked once with cuda.tile's export on the CPU).
CONFIGS = {"mixed_dtype_promotion": {"bad_kernel": [{"x": "f32", "y": "f32"}]},
           "store_needs_narrowing_cast": {"bad_kernel": [{"x": "f16", "y": "f16"}]}}


def _only_complete_files(out: Path, report) -> None:
    """The crate directory holds exactly the generated files, each complete (formatted), and no temp dirs."""
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted(report.files)
    for rel, text in report.files.items():
        if not rel.endswith(".rs"):
            assert (out / rel).read_text() == text, rel
    rs = [str(out / rel) for rel in report.files if rel.endswith(".rs")]
    proc = subprocess.run(["rustfmt", "--check", "--edition", "2024", *rs], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}-")], "temporary left"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_diagnostic(tmp_path, case):
    path = tmp_path / "bad.py"
    path.write_text(case.text())
    out = tmp_path / "crate"
    report = run(path, CONFIGS.get(case.name), out_dir=out)  # no exception escapes
    by_kernel = {r.kernel: r for r in report.results}
    assert set(by_kernel) == {case.kernel, "good_kernel"}
    d = by_kernel[case.kernel].diagnostic
    assert isinstance(d, Diagnostic), f"{case.kernel} translated without a diagnostic"
    line, col = case.where()
    assert (d.loc.file, d.loc.line, d.loc.col) == (str(path), line, col), str(d)
    assert d.construct == case.construct
    assert case.message in d.message
    assert d.kernel == case.kernel
    if case.hint:
        assert case.hint in d.hint
    else:
        assert d.hint == ""
    assert str(d).startswith(f"{path}:{line}:{col}: error [{case.construct}]: ")
    assert d.to_dict()["line"] == line and d.to_dict()["col"] == col
    # the other kernel of the file still translates, and only it is emitted
    assert by_kernel["good_kernel"].ok and by_kernel["good_kernel"].entries == ["good_kernel"]
    assert not report.ok
    mod = module_text(report, path)
    assert "pub unsafe fn good_kernel" in mod and case.kernel not in mod
    _only_complete_files(out, report)


def test_all_diagnostics_of_one_file_at_once(tmp_path):
    """Every bad kernel in one file: one diagnostic each, the good kernel still translated."""
    body = "\n\n".join(c.source.replace("def bad_kernel", f"def bad_{c.name}")
                       .replace("def helper", f"def helper_{c.name}").replace("helper(t)", f"helper_{c.name}(t)")
                       for c in CASES if c.name not in CONFIGS)
    path = tmp_path / "many.py"
    path.write_text(HEADER + body + GOOD)
    report = run(path)
    bad = {r.kernel for r in report.results if not r.ok}
    assert bad == {f"bad_{c.name}" for c in CASES if c.name not in CONFIGS}
    assert [r.entries for r in report.results if r.ok] == [["good_kernel"]]


def test_module_without_kernels(tmp_path):
    path = tmp_path / "helpers_only.py"
    path.write_text("import cuda.tile as ct\n\n\ndef not_a_kernel(x):\n    return x\n")
    out = tmp_path / "crate"
    report = run(path, out_dir=out)
    (res,) = report.results
    d = res.diagnostic
    assert res.kernel == "<file>" and d.construct == "kernel"
    assert (d.loc.line, d.loc.col) == (1, 1)
    assert "no `@ct.kernel` functions found" in d.message and "@ct.kernel" in d.hint
    assert report.files == {} and report.written == []
    assert not out.exists(), "nothing is written when no kernel translated"


def test_unknown_kernel_in_only_list(tmp_path):
    from tileport.translate import lower
    path = write_kernels(tmp_path, GOOD)
    kernels, results = lower(str(path), None, only=["good_kernel", "missing_kernel"])
    assert [k.name for k in kernels] == ["good_kernel"]
    (missing,) = [r for r in results if not r.ok]
    assert "no `@ct.kernel` function named `missing_kernel`" in missing.diagnostic.message


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    """The crate is written to a temporary sibling and moved into place only when complete."""
    import tileport.emit.rust.crate as crate_mod

    def broken_rustfmt(paths):
        raise RuntimeError("rustfmt rejected the generated code")
    monkeypatch.setattr(crate_mod, "rustfmt", broken_rustfmt)
    path = write_kernels(tmp_path, GOOD)
    out = tmp_path / "crate"
    try:
        run(path, out_dir=out)
    except RuntimeError:
        pass
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_rewrite_keeps_unrelated_files(tmp_path):
    """A rewrite replaces the files the previous translation recorded (its kernels.json) and nothing else."""
    out = tmp_path / "crate"
    run(write_kernels(tmp_path, GOOD, name="earlier.py"), out_dir=out)
    (out / "target").mkdir()
    (out / "target" / "keep.txt").write_text("build cache")
    (out / "src" / "mine.rs").write_text("// not generated by tileport")
    path = write_kernels(tmp_path, GOOD)
    report = run(path, out_dir=out)
    assert (out / "target" / "keep.txt").read_text() == "build cache"
    assert not (out / "src" / "earlier.rs").exists()  # a module of the earlier translation
    assert (out / "src" / "mine.rs").read_text() == "// not generated by tileport"
    assert sorted(str(p.relative_to(out)) for p in (out / "src").iterdir()) == sorted(
        [rel for rel in report.files if rel.startswith("src/")] + ["src/mine.rs"])


# ---------------------------------------------------------------- translator bugs found by this suite (fixed)


def test_syntax_error_is_a_diagnostic(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(HEADER + "@ct.kernel\ndef k(x, y, TILE: ConstInt):\n"
                    "    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,)\n"
                    "    ct.store(y, index=(ct.bid(0),), tile=t)\n")
    out = tmp_path / "crate"
    report = run(path, out_dir=out)
    (res,) = report.results
    d = res.diagnostic
    assert d.construct == "syntax" and "was never closed" in d.message
    assert (d.loc.line, d.loc.col) == (8, 16)  # the unclosed `(` of ct.load (1-based, as Python reports it)
    assert not out.exists()


def test_emit_failure_in_specialized_entry_is_a_diagnostic(tmp_path):
    path = write_kernels(tmp_path, textwrap.dedent("""
        @ct.kernel
        def spec_kernel(x, y, TILE: ConstInt, FAST: ConstBool):
            i = ct.bid(0)
            if FAST:
                t = ct.load(x, index=(i,), shape=(TILE,), check_bounds=False)
            else:
                t = ct.load(x, index=(i,), shape=(TILE,))
            ct.store(y, index=(i,), tile=t)
    """) + GOOD)
    report = run(path, {"spec_kernel": [{"x": "f32", "y": "f32", "FAST": True},
                                        {"x": "f32", "y": "f32", "FAST": False}]})
    by_kernel = {r.kernel: r for r in report.results}
    d = by_kernel["spec_kernel"].diagnostic
    assert d is not None and "check_bounds=False" in d.message
    assert (d.loc.line, d.loc.col) == (10, 13)
    assert by_kernel["good_kernel"].ok


def test_emit_failure_is_reported_for_its_own_file(tmp_path):
    """Two files with a kernel of the same name: the emit failure of one does not land on the other."""
    good, bad = tmp_path / "first" / "kern_a.py", tmp_path / "second" / "kern_b.py"
    for path, check in ((good, ""), (bad, ", check_bounds=False")):
        path.parent.mkdir()
        path.write_text(HEADER + textwrap.dedent(f"""
            @ct.kernel
            def same_name(x, y, TILE: ConstInt, FAST: ConstBool):
                i = ct.bid(0)
                if FAST:
                    t = ct.load(x, index=(i,), shape=(TILE,){check})
                else:
                    t = ct.load(x, index=(i,), shape=(TILE,))
                ct.store(y, index=(i,), tile=t)
        """))
    cfg = [{"x": "f32", "y": "f32", "FAST": True}, {"x": "f32", "y": "f32", "FAST": False}]
    report = translate([str(good), str(bad)], None, {str(p): kernel_configs({"same_name": cfg}) for p in (good, bad)})
    by_file = {r.file: r for r in report.results}
    assert by_file[str(good)].ok and by_file[str(good)].entries == ["same_name_fast1", "same_name_fast0"]
    d = by_file[str(bad)].diagnostic
    assert d is not None and "check_bounds=False" in d.message and by_file[str(bad)].entries == []
    assert "src/kern_a.rs" in report.files and "src/kern_b.rs" not in report.files


@pytest.mark.parametrize("file_name,kernel,params", [
    ("my-kernels.py", "add_kernel", "x, y"),
    ("kw.py", "move", "x, y"),
    ("kw.py", "add_kernel", "x, type"),
])
def test_names_that_are_not_rust_identifiers(tmp_path, file_name, kernel, params):
    out_param = params.split(", ")[1]
    path = tmp_path / file_name
    path.write_text(HEADER + f"@ct.kernel\ndef {kernel}({params}, TILE: ConstInt):\n"
                    f"    ct.store({out_param}, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), "
                    "shape=(TILE,)))\n" + GOOD.replace("good_kernel", "good_kernel_2"))
    out = tmp_path / "crate"
    report = run(path, out_dir=out)
    by_kernel = {r.kernel: r for r in report.results}
    assert by_kernel["good_kernel_2"].ok
    assert by_kernel[kernel].ok or by_kernel[kernel].diagnostic.loc.line == 6
    _only_complete_files(out, report)


def _launcher_rebinds(launcher: str) -> list[str]:
    """C parameters that the launcher body rebinds to something else than their checked descriptor."""
    sig = launcher[:launcher.index(") -> i32 {")]
    params = re.findall(r"(\w+): [^,]+", sig[sig.index("(") + 1:])
    dup = sorted({p for p in params if params.count(p) > 1})
    bad = [f"duplicate parameter {p}" for p in dup]
    for line in lines(launcher):
        m = re.match(r"let (\w+)\b", line)
        # `let x = check_desc("<source name>", x, rank)?` re-binds the descriptor pointer to the checked
        # descriptor on purpose; anything else re-binding a C parameter is a collision.
        if m and m.group(1) in params and not (line.startswith(f"let {m.group(1)} = check_desc(")
                                               and f", {m.group(1)}, " in line):
            bad.append(line)
    return bad


@pytest.mark.parametrize("name", ["grid", "target", "stream"])
def test_kernel_parameter_names_do_not_collide_with_launcher_names(tmp_path, name):
    path = write_kernels(tmp_path, f"""
        @ct.kernel
        def collide(x, {name}, TILE: ConstInt):
            ct.store({name}, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))
    """)
    report = run(path, {"collide": [{"x": "f32", name: "f32"}]})
    if report.results[0].ok:
        assert _launcher_rebinds(launcher_text(module_text(report, path), "tileport_collide")) == []


# ---------------------------------------------------------------- the CLI


@pytest.fixture
def wide_console(monkeypatch):
    """The CLI's rich console, wide enough that no diagnostic wraps."""
    monkeypatch.setattr(cli, "console", Console(width=400, color_system=None))


def _cli_file(tmp_path) -> Path:
    body = "\n\n".join(c.source.replace("def bad_kernel", f"def bad_{c.name}")
                       for c in CASES if c.name in ("unknown_ct_call", "shape_mismatch", "runtime_value_in_shape"))
    path = tmp_path / "bad.py"
    path.write_text(HEADER + body + GOOD)
    return path


def test_cli_translate_reports_diagnostics(tmp_path, monkeypatch, wide_console):
    monkeypatch.chdir(tmp_path)
    path = _cli_file(tmp_path)
    result = CliRunner().invoke(cli.app, ["translate", "bad.py", "-o", "crate"])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), result.exception  # a clean exit, no traceback
    assert "Traceback" not in result.output
    text = path.read_text().splitlines()
    for needle in ("ct.frobnicate(t)", "a + b", "ct.load(x, index=(0,), shape=(n,))"):
        n = next(i for i, line in enumerate(text, 1) if needle in line)
        col = text[n - 1].index(needle) + 1
        assert f"bad.py:{n}:{col}: error" in result.output, (needle, result.output)
    assert "`ct.frobnicate` is not supported by the translator" in result.output
    assert "1/4 kernels translated" in result.output
    assert (tmp_path / "crate" / "src" / "bad.rs").is_file()  # the good kernel is written


def test_cli_missing_file(tmp_path, monkeypatch, wide_console):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.app, ["translate", "nope.py", "-o", "crate"])
    assert result.exit_code == 2 and "no such file" in result.output
    assert not (tmp_path / "crate").exists()


def test_cli_prints_construct_and_hint_verbatim(tmp_path, monkeypatch, wide_console):
    monkeypatch.chdir(tmp_path)
    _cli_file(tmp_path)
    result = CliRunner().invoke(cli.app, ["translate", "bad.py", "-o", "crate"])
    assert "error [ct.frobnicate]:" in result.output
    assert "error [shape]:" in result.output
    assert "hint: use literals or ct.Constant[int] parameters" in result.output


def test_cli_syntax_error(tmp_path, monkeypatch, wide_console):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text("import cuda.tile as ct\n\n@ct.kernel\ndef k(x:\n")
    result = CliRunner().invoke(cli.app, ["translate", "broken.py", "-o", "crate"])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "broken.py:4:" in result.output and "syntax" in result.output
