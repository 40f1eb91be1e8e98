"""Hostile and degenerate inputs: each is a located Diagnostic for its kernel (or file), never a traceback,
a hang or silently wrong Rust; the valid kernel of the same file still translates.

Every case here failed before its fix: a Python exception escaped `translate()` (SyntaxError,
OverflowError, MemoryError, RecursionError, UnicodeDecodeError, KeyError, StopIteration), the kernel got
an "internal translator error", translation took minutes, rustfmt rejected the crate (failing every
kernel of the run without a location), or invalid Rust was emitted with exit 0.
"""

from __future__ import annotations

import re
import shutil
import signal
import textwrap
import time
from pathlib import Path

import pytest
from tp_helpers import run

from tileport.diagnostics import Diagnostic
from tileport.frontends.source import MAX_SOURCE_BYTES

HEAD = "import math\n\nimport cuda.tile as ct\n\nConstInt = ct.Constant[int]\n"
GOOD = """

@ct.kernel
def good_kernel(x, y, TILE: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(TILE,)))
"""
CONFIG = {"bad_kernel": [{"x": "f32", "y": "f32", "fn": "f32", "TILE": 16, "_": 16}],
          "good_kernel": [{"x": "f32", "y": "f32", "TILE": 16}]}


def kernel(*body: str, params: str = "x, y, TILE: ConstInt", prefix: str = "") -> str:
    lines = "".join(f"    {line}\n" for line in body)
    return f"{HEAD}{prefix}\n\n@ct.kernel\ndef bad_kernel({params}):\n{lines}"


LOAD = "t = ct.load(x, index=(ct.bid(0),), shape=(16,))"
STORE = "ct.store(y, index=(ct.bid(0),), tile=t)"

# name -> (source without GOOD, marker on the offending line, construct, message fragment)
CASES = {
    "module_string_constant": (kernel(LOAD, "t = t * SCALE", STORE, prefix='NAME = "hello world"\nSCALE = 2.0'),
                               None, None, None),
    "module_exp_overflow": (kernel(LOAD, "t = t * C", STORE, prefix="C = math.exp(1000)"),
                            "C = math", "constant", "overflows"),
    "module_float_pow_overflow": (kernel(LOAD, "t = t * C", STORE, prefix="C = 2.0**10000"),
                                  "C = 2.0", "constant", "overflows a float"),
    "module_huge_shift": (kernel(LOAD, "t = t * C", STORE, prefix="C = 1 << 2**40"),
                          "C = 1 <<", "constant", "exceeds 256 bits"),
    "module_div_zero": (kernel(LOAD, "t = t * C", STORE, prefix="C = 1 // 0"), "C = 1 //", "constant",
                        "divides by zero"),
    "module_tower_of_powers": (kernel(LOAD, "t = t * C", STORE, prefix="C = 10 ** 10 ** 10"),
                               "C = 10", "constant", "exceeds 256 bits"),
    "module_1000_terms": (kernel(LOAD, "t = t * C", STORE, prefix="C = " + " + ".join(["1"] * 1000)),
                          "C = 1 + 1", "constant", "nests too deeply"),
    "kernel_div_zero": (kernel(LOAD, "c = 1 // 0", STORE), "c = 1 // 0", "constant", "divides by zero"),
    "kernel_float_pow": (kernel(LOAD, "c = 2.0 ** 10000", STORE), "c = 2.0", "constant", "overflows a float"),
    "kernel_huge_shift": (kernel(LOAD, "c = 1 << 2**40", STORE), "c = 1 <<", "constant", "exceeds 256 bits"),
    "kernel_tower_of_powers": (kernel(LOAD, "c = 10 ** 10 ** 10", STORE), "c = 10", "constant", "exceeds"),
    "kernel_string_times_huge": (kernel(LOAD, 'c = "ab" * 10 ** 9', STORE), 'c = "ab"', "constant", "numeric"),
    "kernel_900_terms": (kernel(LOAD, "c = " + " + ".join(["1"] * 900), STORE), "c = 1 + 1", "nesting",
                         "nests too deeply"),
    "float8_dtype": (kernel(LOAD, "u = ct.astype(t, ct.float8_e4m3fn)", STORE), "ct.float8", "dtype",
                     "ct.float8_e4m3fn is not supported"),
    "bogus_padding_mode": (kernel("t = ct.load(x, index=(ct.bid(0),), shape=(16,), padding_mode=ct.PaddingMode.BOGUS)",
                                  STORE), "BOGUS", "ct.PaddingMode", "no member `BOGUS`"),
    "array_named_fn_in_gather": (kernel("t = ct.gather(fn, ct.arange(16, dtype=ct.int32))", STORE,
                                        params="fn, y, TILE: ConstInt"), None, None, None),
    # cuTile converts an `if` expression's condition with bool() (a != 0): an if with a result
    "ifexp_on_int_scalar": (kernel("a = ct.bid(0)", "b = a if a else a", LOAD, STORE), None, None, None),
    "ifexp_on_array": (kernel(LOAD, "a = x if x else x", STORE), "a = x if", "condition", "must be a bool"),
    "scalar_dot_T": (kernel("b = ct.bid(0).T", LOAD, STORE), "ct.bid(0).T", ".T", "`.T` is not supported"),
    "scalar_shape_index": (kernel("b = ct.bid(0).shape[0]", LOAD, STORE), ".shape[0]", "tuple index",
                           "out of range"),
    "abs_without_argument": (kernel(LOAD, "t = ct.abs()", STORE), "ct.abs()", "ct.abs", "missing x"),
    "malformed_string_annotation": (kernel(LOAD, STORE, params="x, y, TILE: 'ct.Constant[int'"),
                                    "def bad_kernel", "annotation", "malformed string annotation"),
    "bid_true": (kernel("b = ct.bid(True)", LOAD, STORE), "ct.bid(True)", "axis", "axis must be"),
    "bid_negative_zero": (kernel("b = ct.bid(-0.0)", LOAD, STORE), "ct.bid(-0.0)", "axis", "axis must be"),
    "reshape_16_to_15": (kernel(LOAD, "t = ct.reshape(t, (15,))", STORE), "(15,)", "tile shape", "is 15"),
    "reshape_16_to_32": (kernel(LOAD, "t = ct.reshape(t, (32,))", STORE), "(32,)", "ct.reshape",
                         "number of elements differs"),
    "reshape_symbolic_count": (kernel("t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))",
                                      "t = ct.reshape(t, (2 * TILE,))", STORE), "2 * TILE", "ct.reshape",
                               "number of elements differs"),
    "tile_dim_negative": (kernel("t = ct.load(x, index=(ct.bid(0),), shape=(-8,))", STORE), "-8", "tile shape",
                          "is -8"),
    "tile_dim_three": (kernel("t = ct.load(x, index=(ct.bid(0),), shape=(3,))", STORE), "(3,)", "tile shape",
                       "is 3"),
    "tile_dim_2_62": (kernel("t = ct.load(x, index=(ct.bid(0),), shape=(2**62,))", STORE), "2**62", "tile shape",
                      "is 4611686018427387904"),
    "float_index": (kernel("t = ct.load(x, index=(1.5,), shape=(16,))", STORE), "1.5", "index",
                    "must be an integer"),
    "float_range_bound": (kernel(LOAD, "for k in range(2.5):", "    t = t + 1.0", STORE), "range(2.5)", "index",
                          "must be an integer"),
    "int_literal_overflows_i32": (kernel("t = ct.load(x, index=(1000000000000000000000000000000,), shape=(16,))",
                                         STORE), "100000", "literal", "does not fit in i32"),
    "int_literal_beyond_u64": (kernel(LOAD, "t = t + 1000000000000000000000000000000", STORE), "t = t + 1",
                               "literal", "out of range of any supported integer type"),
    "negate_a_string": (kernel(LOAD, "c = -'s'", STORE), "c = -'s'", "constant", "not a numeric constant"),
    # found by the fuzzer
    "reduce_a_0d_tile_along_an_axis": (kernel(LOAD, "s = ct.sum(t)", "u = ct.max(s, 1)", STORE), "ct.max(s, 1)",
                                       "axis", "out of range for a tile of rank 0"),
    "transpose_axis_out_of_range": (kernel(LOAD, "t = ct.transpose(t, 0, 5)", STORE), "ct.transpose", "axis",
                                    "out of range"),
    "expand_dims_bool_axis": (kernel(LOAD, "u = ct.expand_dims(t, True)", STORE), "ct.expand_dims", "axis",
                              "out of range"),
    "compare_with_an_array": (kernel(LOAD, "m = ct.where(t > y, t, 1e-06)", STORE), "t > y", "operator",
                              "operator > on Array"),
    "add_an_array": (kernel(LOAD, "t = t + x", STORE), "t = t + x", "operator", "operator + on Array"),
    "call_of_a_tuple": (kernel(LOAD, "t = ()(t)", STORE), "()(t)", "call", "this call is not supported"),
    "kernel_option_reads_a_kernel_local": (kernel(LOAD, STORE).replace("@ct.kernel\n", "@ct.kernel(occupancy=t.T)\n"),
                                           "occupancy=t.T", "name", "undefined name `t`"),
    "kernel_option_out_of_range": (kernel(LOAD, STORE).replace("@ct.kernel\n", "@ct.kernel(num_ctas=3)\n"),
                                   "num_ctas=3", "ct.kernel", "num_ctas=3 is out of range"),
}


def test_gather_padding_not_representable_in_the_array_dtype(tmp_path):
    """Found by fuzzing configurations: -inf padding of an integer array was an internal OverflowError."""
    path = tmp_path / "k.py"
    text = kernel("t = ct.gather(x, ct.arange(16, dtype=ct.int32), padding_value=float('-inf'))", STORE) + GOOD
    path.write_text(text)
    report = run(path, {"bad_kernel": [{"x": "i64", "y": "i64", "TILE": 16}], "good_kernel": CONFIG["good_kernel"]})
    by_kernel = {r.kernel: r for r in report.results}
    d = by_kernel["bad_kernel"].diagnostic
    assert by_kernel["good_kernel"].ok and d.construct == "padding_value" and "not representable in i64" in d.message
    assert d.loc.line == _line_of(text, "ct.gather")


@pytest.mark.parametrize("value", ["abc", None, 1.5, True, 2**40])
def test_configured_constant_of_the_wrong_kind(tmp_path, value):
    """A configuration (capture, --config) giving `TILE: ct.Constant[int]` a non-int was accepted and spelled
    into the generated Rust; it is refused at the parameter."""
    path = tmp_path / "k.py"
    text = kernel("t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))", STORE) + GOOD
    path.write_text(text)
    report = run(path, {"bad_kernel": [{"x": "f32", "y": "f32", "TILE": value}], "good_kernel": CONFIG["good_kernel"]})
    by_kernel = {r.kernel: r for r in report.results}
    d = by_kernel["bad_kernel"].diagnostic
    assert by_kernel["good_kernel"].ok and d is not None and d.construct == "config", str(d)
    assert (d.loc.line, "ct.Constant[int]" in d.message) == (_line_of(text, "def bad_kernel"), True)


def _line_of(text: str, marker: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if marker in line)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_kernel_is_a_located_diagnostic(tmp_path, name):
    source, marker, construct, message = CASES[name]
    path = tmp_path / "bad.py"
    text = source + GOOD
    path.write_text(text)
    report = run(path, CONFIG)  # no exception escapes
    by_kernel = {r.kernel: r for r in report.results}
    assert by_kernel["good_kernel"].ok, str(by_kernel["good_kernel"].diagnostic)
    d = by_kernel["bad_kernel"].diagnostic
    if marker is None:  # valid input that used to crash: it translates
        assert d is None, str(d)
        return
    assert isinstance(d, Diagnostic), f"{name}: translated without a diagnostic"
    assert d.construct == construct and message in d.message, str(d)
    assert d.construct != "internal"
    assert (d.loc.file, d.loc.line) == (str(path), _line_of(text, marker)), str(d)
    assert d.loc.col >= 1


@pytest.mark.parametrize("params,body,construct", [
    # `_` is no Rust name: a const generic cannot be renamed (the launcher passes it by name)
    ("x, y, _: ConstInt", ["t = ct.load(x, index=(ct.bid(0),), shape=(_,))", STORE], "signature"),
    ("x, y, TILE: ConstInt", ["_ = ct.bid(0)", "t = ct.load(x, index=(_,), shape=(16,))", STORE], None),
    ("_, y, TILE: ConstInt", ["t = ct.load(_, index=(ct.bid(0),), shape=(16,))", STORE], None),
])
def test_underscore_names_reach_valid_rust(tmp_path, params, body, construct):
    """These used to reach rustfmt, which then failed every kernel of the run without a location."""
    if shutil.which("rustfmt") is None:
        pytest.skip("rustfmt is not installed")
    path = tmp_path / "k.py"
    path.write_text(kernel(*body, params=params) + GOOD)
    report = run(path, {"bad_kernel": [{"x": "f32", "y": "f32", "_": "f32" if params.startswith("_") else 16,
                                        "TILE": 16}]}, out_dir=tmp_path / "crate")
    by_kernel = {r.kernel: r for r in report.results}
    assert by_kernel["good_kernel"].ok, str(by_kernel["good_kernel"].diagnostic)
    d = by_kernel["bad_kernel"].diagnostic
    assert (d.construct, d.loc.line) == (construct, 9) if construct else d is None, str(d)
    rust = (tmp_path / "crate" / "src" / "k.rs").read_text()
    # rustfmt accepts `_` as an expression, cargo does not: no generated binding or use may be `_`
    used = re.compile(r"(?<![\w'\"])_(?![\w'\"])(?!\s*=>)")  # a name `_`; not a string "_" or a match arm
    code = [line for line in rust.splitlines() if not line.lstrip().startswith("//")]
    assert not [line for line in code if used.search(line)]


def test_bid_negative_zero_does_not_fail_the_crate(tmp_path):
    if shutil.which("rustfmt") is None:
        pytest.skip("rustfmt is not installed")
    path = tmp_path / "k.py"
    path.write_text(kernel("b = ct.bid(-0.0)", LOAD, STORE) + GOOD)
    report = run(path, CONFIG, out_dir=tmp_path / "crate")
    by_kernel = {r.kernel: r for r in report.results}
    assert by_kernel["good_kernel"].ok and by_kernel["bad_kernel"].diagnostic.construct == "axis"
    assert (tmp_path / "crate" / "src" / "k.rs").is_file()


# ---------------------------------------------------------------- file-level input

def _file_diagnostic(path: Path):
    report = run(path, CONFIG)
    (res,) = report.results
    assert res.kernel == "<file>" and isinstance(res.diagnostic, Diagnostic)
    assert res.diagnostic.construct != "internal"
    return res.diagnostic


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + (HEAD + GOOD).encode())
    report = run(path, CONFIG)
    assert [r.ok for r in report.results] == [True], [str(r.diagnostic) for r in report.results]


def test_latin1_cookie_is_honoured(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + (HEAD + GOOD).encode())
    assert all(r.ok for r in run(path, CONFIG).results)


def test_latin1_without_cookie_is_located(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes((HEAD + GOOD).encode() + b"# caf\xe9\n")
    d = _file_diagnostic(path)
    assert d.construct == "encoding" and "0xe9" in d.message and "UTF-8" in d.hint
    assert (d.loc.line, d.loc.col) == ((HEAD + GOOD).count("\n") + 1, 6)


@pytest.mark.parametrize("data", [bytes(range(256)) * 4, b"\x00\x01\x02" * 100, b"x = 1\x00\n"])
def test_binary_input_is_a_diagnostic(tmp_path, data):
    path = tmp_path / "blob.py"
    path.write_bytes(data)
    d = _file_diagnostic(path)
    assert d.construct in ("encoding", "syntax") and d.loc.line >= 1


def test_oversized_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "huge.py"
    path.write_text(HEAD + GOOD + "# padding\n" * (MAX_SOURCE_BYTES // 10 + 1))
    t0 = time.perf_counter()
    d = _file_diagnostic(path)
    assert d.construct == "file size" and time.perf_counter() - t0 < 2


def test_not_a_regular_file(tmp_path):
    d = _file_diagnostic(tmp_path)  # a directory
    assert d.construct == "file"


@pytest.mark.parametrize("deep", [" + ".join(["1"] * 5000), "(" * 5000 + "1" + ")" * 5000])
def test_5000_deep_expression_fails_only_its_kernel(tmp_path, deep):
    """The parser gives up on it (RecursionError / too many parentheses): only that kernel is lost."""
    path = tmp_path / "deep.py"
    text = kernel(LOAD, f"c = {deep}", STORE) + GOOD
    path.write_text(text)
    by_kernel = {r.kernel: r for r in run(path, CONFIG).results}
    assert by_kernel["good_kernel"].ok, str(by_kernel["good_kernel"].diagnostic)
    d = by_kernel["bad_kernel"].diagnostic
    assert d.construct in ("nesting", "syntax") and d.loc.line == _line_of(text, "c = "), str(d)


def test_5000_deep_module_constant_is_located(tmp_path):
    path = tmp_path / "deep.py"
    text = HEAD + GOOD + "\nC = " + " + ".join(["1"] * 5000) + "\n"
    path.write_text(text)
    by_kernel = {r.kernel: r for r in run(path, CONFIG).results}
    assert by_kernel["good_kernel"].ok
    d = by_kernel["<file>"].diagnostic
    assert d.construct == "nesting" and d.loc.line == text.count("\n")


def test_real_syntax_errors_still_fail_the_file(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(HEAD + GOOD + "\ndef broken(:\n    pass\n")
    assert _file_diagnostic(path).construct == "syntax"


# ---------------------------------------------------------------- hangs

def _within(seconds: float, fn):
    def alarm(*_):
        raise TimeoutError(f"took more than {seconds} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _helper_tower(levels: int) -> str:
    """h_k calls h_{k-1} twice: 2**levels inlined bodies (took > 590 s for 17 levels)."""
    out = ["def h0(t):", "    return t + 1.0"]
    for i in range(1, levels + 1):
        out += ["", "", f"def h{i}(t):", f"    return h{i - 1}(t) + h{i - 1}(t)"]
    return "\n".join(out)


@pytest.mark.parametrize("levels,construct", [(15, "size"), (17, "recursion")])
def test_exponential_inlining_is_bounded(tmp_path, levels, construct):
    path = tmp_path / "tower.py"
    text = kernel(LOAD, f"t = h{levels}(t)", STORE, prefix="\n\n" + _helper_tower(levels)) + GOOD
    path.write_text(text)
    t0 = time.perf_counter()
    report = _within(20, lambda: run(path, CONFIG))
    assert time.perf_counter() - t0 < 5
    by_kernel = {r.kernel: r for r in report.results}
    assert by_kernel["good_kernel"].ok
    d = by_kernel["bad_kernel"].diagnostic
    assert d is not None and d.construct == construct and d.loc.line > 1, str(d)


def test_many_values_are_named_in_linear_time(tmp_path):
    """1,024 inlined helper bodies (4,000 values) translate in seconds (naming was quadratic)."""
    path = tmp_path / "tower.py"
    path.write_text(kernel(LOAD, "t = h10(t)", STORE, prefix="\n\n" + _helper_tower(10)) + GOOD)
    t0 = time.perf_counter()
    report = _within(20, lambda: run(path, CONFIG))
    assert all(r.ok for r in report.results) and time.perf_counter() - t0 < 5


def test_nested_conditional_expressions_lower_in_linear_time(tmp_path):
    """`1 if c else (1 if c else ...)` on a runtime `c`, 24 deep: each arm is lowered once (it was lowered
    twice per level, 2**24 times at the innermost)."""
    from tileport.translate import lower
    nested = "1"
    for _ in range(24):
        nested = f"(1 if c else {nested})"
    path = tmp_path / "k.py"
    path.write_text(kernel("c = ct.bid(0) > 2", f"k = {nested}", LOAD, "t = t * k", STORE) + GOOD)
    t0 = time.perf_counter()
    kernels, results = _within(20, lambda: lower(str(path)))
    assert time.perf_counter() - t0 < 5
    assert all(r.ok for r in results), [str(r.diagnostic) for r in results]
    assert {k.base_name for k in kernels} == {"bad_kernel", "good_kernel"}


def test_kernel_too_large_is_a_diagnostic(tmp_path):
    body = [LOAD] + ["t = t + 1.0"] * 20_001 + [STORE]
    path = tmp_path / "big.py"
    path.write_text(kernel(*body) + GOOD)
    report = _within(30, lambda: run(path, CONFIG))
    d = {r.kernel: r for r in report.results}["bad_kernel"].diagnostic
    assert d.construct == "size" and "20000 operations" in d.message, str(d)


def test_module_constant_error_names_its_definition(tmp_path):
    text = kernel(LOAD, "t = t * BIG", STORE, prefix=textwrap.dedent("""
        BASE = 10
        BIG = BASE ** BASE ** BASE
    """))
    path = tmp_path / "k.py"
    path.write_text(text + GOOD)
    d = {r.kernel: r for r in run(path, CONFIG).results}["bad_kernel"].diagnostic
    assert "module constant `BIG`" in d.message and d.loc.line == _line_of(text, "BIG = ")


def test_module_aliases_translate_beside_constants_that_do_not_fold(tmp_path):
    # an expression that is not of constant form is an alias (evaluated where a kernel uses it); one that is
    # but does not fold is that kernel's diagnostic, located at its definition
    text = kernel(LOAD, "t = t * BIG", STORE, prefix=textwrap.dedent("""
        BIG = 2 ** 2 ** 20
        fexp = ct.exp
    """)) + GOOD.replace("tile=ct.load(x, index=(i,), shape=(TILE,))",
                         "tile=fexp(ct.load(x, index=(i,), shape=(TILE,)))")
    path = tmp_path / "k.py"
    path.write_text(text)
    by_kernel = {r.kernel: r for r in run(path, CONFIG).results}
    assert by_kernel["good_kernel"].ok, str(by_kernel["good_kernel"].diagnostic)
    d = by_kernel["bad_kernel"].diagnostic
    assert "module constant `BIG`" in d.message and d.loc.line == _line_of(text, "BIG = ")


@pytest.mark.parametrize("option", ["ct.ByTarget(sm_100=64, default=2)", "ct.ByTarget(sm_100=2, default=0)"])
def test_by_target_option_values_are_checked_per_target(tmp_path, option):
    text = kernel(LOAD, STORE).replace("@ct.kernel\n", f"@ct.kernel(occupancy={option})\n") + GOOD
    path = tmp_path / "k.py"
    path.write_text(text)
    by_kernel = {r.kernel: r for r in run(path, CONFIG).results}
    assert by_kernel["good_kernel"].ok
    d = by_kernel["bad_kernel"].diagnostic
    assert d.construct == "ct.kernel" and "out of range" in d.message and d.loc.line == _line_of(text, "@ct.kernel(")


# ---------------------------------------------------------------- translator bugs stay per kernel

def _check_only_bad_kernel_failed(tmp_path) -> None:
    path = tmp_path / "k.py"
    text = kernel(LOAD, STORE) + GOOD
    path.write_text(text)
    report = run(path, CONFIG)
    by_kernel = {r.kernel: r for r in report.results}
    assert by_kernel["good_kernel"].ok and "good_kernel" in report.files["src/k.rs"]
    d = by_kernel["bad_kernel"].diagnostic
    assert d.construct == "internal" and "KeyError" in d.message and d.loc.line == _line_of(text, "def bad_kernel")


def test_a_pass_bug_fails_only_its_kernel(tmp_path, monkeypatch):
    """A pass exception (once a StopIteration aborting the whole run) is an `internal` diagnostic of its kernel."""
    from tileport.frontends.cutile import FRONTEND

    def failing_pass(k, naming):
        if k.base_name == "bad_kernel":
            raise KeyError("simulated pass bug")
    monkeypatch.setattr(FRONTEND, "passes", (*FRONTEND.passes, failing_pass))
    _check_only_bad_kernel_failed(tmp_path)


def test_an_emitter_bug_fails_only_its_kernel(tmp_path, monkeypatch):
    """An emitter exception (once a KeyError aborting the whole run) is an `internal` diagnostic of its kernel."""
    import tileport.emit.rust.kernel as rk

    class Failing(rk.KernelEmitter):
        def emit(self):
            if self.kernel.name == "bad_kernel":
                raise KeyError("simulated emitter bug")
            return super().emit()
    monkeypatch.setattr(rk, "KernelEmitter", Failing)
    _check_only_bad_kernel_failed(tmp_path)
