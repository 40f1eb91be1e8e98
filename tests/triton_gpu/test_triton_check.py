"""The Triton differential harness on the CPU: planning against the port's parameters (pointer views
and flat pointers), tolerances (TF32 for kernels with tl.dot), whole cases on a numpy fake device whose "source"
and "port" are Python functions, the summary, the cuTile anchors of the corpus, and the AST rebuild of
a Triton file (what is kept, what is refused with a location, the restricted import)."""

from __future__ import annotations

import ast
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tileport.gpu import triton_check as tc
from tileport.gpu.launch_check import ArgPlan
from tileport.gpu.triton_source import TritonSourceError, restricted_builtins, sanitize, triton_namespace
from tileport.launches import parse_spec
from tileport.ops.triton_kernels import CORPUS, corpus_files

PARAMS = [{"name": "x_ptr", "kind": "array", "rank": 1}, {"name": "y_ptr", "kind": "array", "rank": 1},
          {"name": "n_cols", "kind": "scalar"}, {"name": "BLOCK", "kind": "const"}]


def record(x_shape=(4, 6), options=None):
    launch = {"framework": "triton", "kernel": "k", "file": "k.py", "grid": [4], "options": options or {"num_warps": 4},
              "args": [{"name": "x_ptr", "kind": "array", "dtype": "float32", "shape": list(x_shape),
                        "strides": [x_shape[1], 1] if len(x_shape) == 2 else [1]},
                       {"name": "y_ptr", "kind": "array", "dtype": "float32", "shape": [4], "strides": [1]},
                       {"name": "n_cols", "kind": "scalar", "dtype": "int32", "value": 6},
                       {"name": "BLOCK", "kind": "const", "value": 8}]}
    return parse_spec({"format": "tileport-launches", "version": 1, "launches": [launch]})[0]


def test_rank1_pointer_without_view_gets_the_flat_buffer_and_the_options():
    plans, problems = tc.plan_triton_launches("launch:k.k", [record()], PARAMS)
    assert problems == [] and len(plans) == 1
    p = plans[0]
    assert p.layouts == {"x_ptr": ((24,), (1,))} and p.options == {"num_warps": 4}  # y_ptr is 1-D already
    assert [a.storage for a in p.args if a.kind == "array"] == [24, 4]


def test_a_port_of_another_rank_without_view_is_a_problem():
    params = [{**PARAMS[0], "rank": 3}] + PARAMS[1:]
    plans, problems = tc.plan_triton_launches("k", [record()], params)
    assert plans == [] and any("rank 2 vs the kernel's rank 3" in p for p in problems)


def _arg(shape, strides):
    return ArgPlan("t", "array", "float32", tuple(shape), tuple(strides))


def test_view_layouts_from_masks_strides_and_the_buffer():
    # extents given by masks (vector_add): a 1-D view of n elements over a 2-D tensor
    assert tc.view_layout({"strides": ["1"], "extents": ["n"]}, _arg((4, 6), (6, 1)), 24, {"n": 24}) == ((24,), (1,))
    # rows not bounded by a mask (softmax): the buffer gives them; padded rows (stride 8 > 6 columns)
    assert tc.view_layout({"strides": ["stride_xm", "1"], "extents": [None, "n_cols"]}, _arg((4, 6), (8, 1)), 30,
                          {"stride_xm": 8, "n_cols": 6}) == ((4, 6), (8, 1))
    # a transposed 4-D view (attention's k): inner open dims by stride, the outermost from the buffer
    view = {"strides": ["sb", "sh", "1", "ss"], "extents": [None, None, None, "S"]}
    assert tc.view_layout(view, _arg((2, 3, 5, 4), (60, 20, 4, 1)), 120, {"sb": 60, "sh": 20, "ss": 4, "S": 5}) == (
        (2, 3, 4, 5), (60, 20, 1, 4))
    # a flattened row index (lse [B, H, S] seen as [B*H, S]): the buffer, not the stride match, sizes it
    assert tc.view_layout({"strides": ["S", "1"], "extents": [None, "S"]}, _arg((2, 3, 5), (15, 5, 1)), 30,
                          {"S": 5}) == ((6, 5), (5, 1))
    assert tc.view_layout({"strides": ["2 * n", "1"], "extents": ["m // 2", "n"]}, _arg((8,), (1,)), 64,
                          {"n": 4, "m": 8}) == ((4, 4), (8, 1))


def test_view_problems():
    with pytest.raises(ValueError, match="reaches element 24 of a buffer of 24"):
        tc.view_layout({"strides": ["1"], "extents": ["n"]}, _arg((24,), (1,)), 24, {"n": 25})
    with pytest.raises(ValueError, match="`stride_q` is not an integer of this launch"):
        tc.view_layout({"strides": ["stride_q"], "extents": [None]}, _arg((24,), (1,)), 24, {"stride_q": 1.5})
    with pytest.raises(ValueError, match="no dimension of that stride"):
        tc.view_layout({"strides": ["7", "5"], "extents": [None, None]}, _arg((4, 6), (6, 1)), 24, {})
    params = [{**PARAMS[0], "rank": 2, "view": {"strides": ["n_cols", "1"], "extents": ["BLOCK", "n_cols"]}}]
    plans, problems = tc.plan_triton_launches("k", [record()], params + PARAMS[1:])  # BLOCK 8 rows > the 4 there are
    assert plans == [] and any("`x_ptr`: the view [8, 6] / strides [6, 1] reaches element 47 of a buffer of 24" in p
                               for p in problems), problems


def test_tolerances_tf32_only_for_f32_of_dot_kernels():
    plan = tc.plan_triton_launches("k", [record()], PARAMS, tf32=True)[0][0]
    f32 = plan.args[0]
    assert tc.tolerance(plan, f32) == tc.TF32_TOLERANCE
    plain = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    assert tc.tolerance(plain, f32) == tc.TRITON_TOLERANCES["float32"]
    assert tc.tolerance(plain, ArgPlan("i", "array", "int32")) is None  # exact


def test_tf32_atol_follows_the_outputs_rms():
    """Two TF32 dots of length 4096 on randn inputs differ by ~0.035 near zero (H200): a fixed atol of 0.01
    refused the matmul port; scaled by the output's RMS (~64) it passes, and an error of the RMS itself
    (a wrong port) still fails."""
    import numpy as np
    plan = tc.plan_triton_launches("k", [record()], PARAMS, tf32=True)[0][0]
    rng = np.random.default_rng(0)
    ref = (rng.standard_normal((64, 4096)) @ rng.standard_normal((4096, 64))).astype(np.float32)
    rtol, atol = tc.tolerance(plan, plan.args[0], ref)
    assert rtol == tc.TF32_TOLERANCE[0] and 0.5 < atol < 0.8
    near = ref + np.float32(0.035)
    assert tc.compare_arrays(near, ref, "float32", (rtol, atol))[0]
    assert not tc.compare_arrays(near, ref, "float32", tc.TF32_TOLERANCE)[0]
    wrong = ref + np.float32(64.0)
    assert not tc.compare_arrays(wrong, ref, "float32", (rtol, atol))[0]
    assert tc.tolerance(plan, plan.args[0], np.zeros((4, 4), np.float32)) == tc.TF32_TOLERANCE  # RMS below 1


def test_calls_dot_follows_helpers():
    text = "def h(a, b):\n    return tl.dot(a, b)\n\ndef k(a):\n    return h(a, a)\n\ndef e(a):\n    return a + 1\n"
    assert tc.calls_dot(text, "k") and not tc.calls_dot(text, "e")
    mm = next(k for k in CORPUS if k.kernel == "matmul_kernel")
    assert tc.calls_dot(mm.path.read_text(), mm.kernel)
    sm = next(k for k in CORPUS if k.kernel == "softmax_kernel")
    assert not tc.calls_dot(sm.path.read_text(), sm.kernel)


class FakeDevice:
    """numpy buffers; kernels are Python functions of the argument values (in parameter order)."""

    def __init__(self, source, port):
        self.source, self.port, self.timed = source, port, []

    def make(self, arg, host):
        base = host.astype(np.float64 if arg.dtype.startswith(("float", "bfloat")) else host.dtype)
        return base, np.lib.stride_tricks.as_strided(base, arg.shape, [s * base.itemsize for s in arg.strides])

    def clone(self, arg, handle):
        return self.make(arg, handle[0].copy())

    def value(self, handle):
        return handle[1]

    def to_host(self, arg, handle):
        return np.array(handle[1])

    def run_source(self, plan, values):
        self.source(*values)

    def run_port(self, plan, values):
        self.port(*tc.port_arguments(plan, values, lambda v, shape, strides: np.lib.stride_tricks.as_strided(
            v, shape, [s * v.itemsize for s in strides])))

    def sync(self):
        pass

    def time_us(self, fn):
        fn()
        self.timed.append(fn)
        return 10.0 + len(self.timed)


def row_sums_2d(x, y, n_cols, block):  # the source: x as the recorded [4, 6] tensor
    y[:] = x.sum(axis=1)


def row_sums_flat(x, y, n_cols, block):  # the port: x as a pointer (flat buffer)
    assert x.ndim == 1
    y[:] = x.reshape(-1, n_cols).sum(axis=1)


def test_faithful_port_passes():
    plan = tc.plan_triton_launches("launch:k.k", [record()], PARAMS)[0][0]
    rec = tc.check_triton_launch(plan, FakeDevice(row_sums_2d, row_sums_flat))
    assert rec["ok"], rec["error"]
    assert rec["backend"] == "cutile-rs" and rec["source"] == "triton" and rec["options"] == {"num_warps": 4}


def test_wrong_port_fails_and_names_the_array():
    def off(x, y, n_cols, block):
        row_sums_flat(x, y, n_cols, block)
        y[2] *= 1.001  # beyond the f32 tolerance
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    rec = tc.check_triton_launch(plan, FakeDevice(row_sums_2d, off))
    assert not rec["ok"] and rec["error"].startswith("`y_ptr`: max |error|")


def test_source_failure_is_named_as_the_triton_kernel():
    def boom(*a):
        raise RuntimeError("CompilationError at 3:4")
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    rec = tc.check_triton_launch(plan, FakeDevice(boom, row_sums_flat))
    assert not rec["ok"] and "the source Triton kernel failed on this launch" in rec["error"]


class WarpsDevice(FakeDevice):
    """The source kernel sees its launch's num_warps (what fixes a reduction's order in Triton)."""

    def run_source(self, plan, values):
        self.source(*values, warps=plan.options["num_warps"])


def order_dependent_sums(per_warp: float, fail_at: int | None = None):
    """Row sums whose rounding differs by `per_warp * num_warps` between launch configurations."""
    def source(x, y, n_cols, block, warps):
        if warps == fail_at:
            raise RuntimeError("out of resources")
        y[:] = x.sum(axis=1) + per_warp * warps
    return source


def port_off_by(err: float):
    def port(x, y, n_cols, block):
        row_sums_flat(x, y, n_cols, block)
        y[:] += err
    return port


def test_an_order_difference_within_the_sources_own_spread_passes():
    """Triton with 4 warps gives sum + 4e-3, with 2 warps sum + 2e-3: spread 2e-3, atol + 2 x 2e-3; the port
    (sum + 1e-3) is 3e-3 from the source, x11 over the plain f32 tolerance, inside the spread's."""
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    rec = tc.check_triton_launch(plan, WarpsDevice(order_dependent_sums(1e-3), port_off_by(1e-3)))
    assert rec["ok"], rec["error"]
    assert rec["source_spread"]["y_ptr"] == pytest.approx(2e-3)


def test_the_same_difference_fails_when_the_source_does_not_depend_on_the_order():
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    def fixed(x, y, n_cols, block, warps):  # sum + 4e-3 whatever the warps
        y[:] = x.sum(axis=1) + 4e-3
    rec = tc.check_triton_launch(plan, WarpsDevice(fixed, port_off_by(1e-3)))
    assert not rec["ok"] and "source_spread" in rec and not rec["source_spread"]


def test_a_wrong_port_fails_despite_the_spread():
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    rec = tc.check_triton_launch(plan, WarpsDevice(order_dependent_sums(1e-3), port_off_by(0.05)))
    assert not rec["ok"] and rec["error"].startswith("`y_ptr`: max |error|")


def test_a_failing_second_source_launch_keeps_the_plain_tolerance_and_says_why():
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    rec = tc.check_triton_launch(plan, WarpsDevice(order_dependent_sums(1e-3, fail_at=2), port_off_by(1e-3)))
    assert not rec["ok"] and "num_warps=2: RuntimeError: out of resources" in rec["source_spread_error"]
    rec = tc.check_triton_launch(plan, WarpsDevice(order_dependent_sums(1e-3, fail_at=2), port_off_by(4e-3)))
    assert rec["ok"], rec["error"]  # the port agrees with the launch's own result exactly


def test_other_warps_halves_and_keeps_the_other_options():
    plan = tc.plan_triton_launches("k", [record(options={"num_warps": 16, "num_stages": 3})], PARAMS)[0][0]
    assert tc.other_warps(plan).options == {"num_warps": 8, "num_stages": 3}
    one = tc.plan_triton_launches("k", [record(options={"num_warps": 1})], PARAMS)[0][0]
    assert tc.other_warps(one).options == {"num_warps": 2} and one.options == {"num_warps": 1}


def test_the_source_receives_a_dtype_constant_as_a_dtype(monkeypatch):
    """Liger's rms_norm backward takes `X_dtype: tl.constexpr` (recorded tl.float32, kept as "fp32"): the
    relaunched Triton kernel got the string, and `.to("fp32")` failed to compile."""
    import types

    class FakeDtype:  # triton.language.dtype: built from the name Triton gives it
        def __init__(self, name):
            self.name = name
    language = types.SimpleNamespace(dtype=FakeDtype)
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(language=language))
    monkeypatch.setitem(sys.modules, "triton.language", language)
    rec = record()
    rec.args.append(parse_spec({"format": "tileport-launches", "version": 1, "launches": [{
        "framework": "triton", "kernel": "k", "file": "k.py", "grid": [4], "args": [
            {"name": "X_dtype", "kind": "const", "value": "triton.language.float32"}]}]})[0].args[0])
    plan = tc.plan_triton_launches("k", [rec], PARAMS + [{"name": "X_dtype", "kind": "const"}])[0][0]
    values = ["x", "y", 6, 8, "fp32"]
    got = tc.source_arguments(plan, values)
    assert got[:4] == values[:4] and isinstance(got[4], FakeDtype) and got[4].name == "fp32"


def test_timing_records_triton_and_port():
    plan = tc.plan_triton_launches("k", [record()], PARAMS)[0][0]
    rec = tc.time_triton_launch(plan, FakeDevice(row_sums_2d, row_sums_flat))
    assert rec["times_us"] == {"triton": 11.0, "cutile-rs": 12.0} and "errors" not in rec


def test_summary_counts_and_geomeans():
    check = [{"op": "a", "ok": True, "error": ""}, {"op": "a", "ok": False, "error": "bad"},
             {"op": "b", "ok": True, "error": ""}]
    bench = [{"op": "a", "times_us": {"triton": 10.0, "cutile-rs": 20.0}},
             {"op": "b", "times_us": {"triton": 10.0, "cutile-rs": 5.0},
              "anchor": {"op": "softmax", "times_us": {"cutile": 10.0}}}]
    s = tc.summarize(check, bench, {"c": ["no port"]})
    assert s["kernels"]["a"]["failed"] == 1 and s["kernels"]["a"]["first_failure"] == "bad"
    assert s["kernels_correct"] == 1 and s["kernels_total"] == 3
    assert math.isclose(s["geomean_ratio_vs_triton"], 1.0) and math.isclose(s["geomean_ratio_vs_cutile_op"], 0.5)
    assert s["kernels"]["b"]["anchor_op"] == "softmax"


def _params(path: Path, kernel: str) -> list[str]:
    fn = next(n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == kernel)
    return [a.arg for a in fn.args.args]


def test_every_corpus_anchor_has_a_shape_rule_and_a_library_op():
    from tileport.ops.api import library_spec
    for k in CORPUS:
        assert tc.anchor_op(k.path, k.kernel) == k.anchor
        if k.anchor is None:
            continue
        assert library_spec(k.anchor) is not None, k.anchor
        args = {n: ArgPlan(n, "array", "float16", (2, 3, 5, 64), (1, 1, 1, 1)) for n in _params(k.path, k.kernel)}
        args.update({n: ArgPlan(n, "const", value=True) for n in _params(k.path, k.kernel) if n.isupper()})
        shape = tc.ANCHOR_SHAPES[k.kernel](args)  # names only parameters the kernel has
        assert all(isinstance(d, int) for d in shape)
    assert tc.anchor_op(Path("/elsewhere/softmax.py"), "softmax_kernel") is None


# ------------------------------------------------------------------------------------ the AST rebuild

USER_FILE = '''import torch
import triton
import triton.language as tl
from mylib import helper_scale

SCALE = tl.constexpr(2.0 * 3)
DT = tl.float16
RUNTIME = torch.cuda.device_count()


def host(x):
    return x


@triton.autotune(configs=[triton.Config({"BLOCK": 64})],
                 key=["n"])
@triton.jit
def k_ok(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * SCALE, mask=offs < n)


@triton.jit
def k_global(x_ptr):
    tl.store(x_ptr, RUNTIME)


@triton.jit
def k_calls_bad(x_ptr):
    k_global(x_ptr)


@triton.jit(do_not_specialize=[helper_scale])
def k_deco(x_ptr):
    pass

print("host code runs here")
'''


def test_sanitize_keeps_jit_functions_line_aligned_and_refuses_unbound_names(tmp_path):
    m = sanitize(tmp_path / "u.py", USER_FILE)
    lines = m.source.splitlines()
    src = USER_FILE.splitlines()
    assert m.functions == ["k_ok"] and m.kernels == ["k_ok", "k_global", "k_calls_bad", "k_deco"]
    for i, line in enumerate(src):
        kept = lines[i] if i < len(lines) else ""
        assert kept in ("", line)  # every line is the user's own line or blank
    text = m.source
    assert "import torch" not in text and "mylib" not in text and "RUNTIME" not in text.split("def k_ok")[0]
    assert "autotune" not in text and "host code" not in text and "def host" not in text
    assert "SCALE = tl.constexpr(2.0 * 3)" in text and "DT = tl.float16" in text
    assert lines[src.index("@triton.jit")] == "@triton.jit"
    g = m.problems["k_global"]
    assert (g.loc.line, g.loc.col) == (src.index("    tl.store(x_ptr, RUNTIME)") + 1, 21) and "`RUNTIME`" in g.message
    assert "calls `k_global`" in m.problems["k_calls_bad"].message
    assert "not literals" in m.problems["k_deco"].message


def test_sanitize_syntax_error_is_located(tmp_path):
    with pytest.raises(TritonSourceError) as e:
        sanitize(tmp_path / "bad.py", "import triton\n@triton.jit\ndef k(:\n")
    assert e.value.diagnostic.loc.line == 3


def test_corpus_files_rebuild_completely_and_document_themselves():
    for f in corpus_files():
        m = sanitize(f, f.read_text())
        assert m.problems == {} and m.functions == m.kernels, f
        assert "ops/kernels/" in ast.get_docstring(ast.parse(f.read_text())), f"{f.name}: which cuTile op it mirrors"


def test_restricted_import_admits_only_triton_and_math():
    imp = restricted_builtins()["__import__"]
    with pytest.raises(ImportError, match="imports only triton, math"):
        imp("os")
    assert imp("math").pi == math.pi


FAKE_TRITON = '''
def jit(fn=None, **options):
    if fn is None:
        return lambda f: jit(f, **options)
    fn.jitted = options
    return fn
'''


def test_rebuilt_module_loads_with_triton_and_runs_nothing_of_the_file(tmp_path, monkeypatch):
    site = tmp_path / "site" / "triton"
    (site / "language").mkdir(parents=True)
    (site / "__init__.py").write_text(FAKE_TRITON)
    (site / "language" / "__init__.py").write_text("class constexpr:\n    def __init__(self, v):\n"
                                                   "        self.value = v\nfloat16 = 'f16'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    user = tmp_path / "user_kernels.py"
    user.write_text(USER_FILE.replace("import torch\n", "import torch\nopen('SIDE_EFFECT', 'w')\n"))
    monkeypatch.chdir(tmp_path)
    ns, module = triton_namespace(user)
    assert ns["k_ok"].jitted == {} and ns["SCALE"].value == 6.0 and "k_global" not in ns
    assert not (tmp_path / "SIDE_EFFECT").exists()
    import inspect
    assert inspect.getsource(ns["k_ok"]).startswith("@triton.jit\ndef k_ok(")  # Triton's view of the source
    from tileport.gpu.triton_source import source_kernel
    with pytest.raises(ValueError, match="RUNTIME"):
        source_kernel(user, "k_global")
