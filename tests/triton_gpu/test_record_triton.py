"""`tileport record` of Triton launches: the hook wraps `triton.runtime.jit.JITFunction.run`.

Runs on the CPU with a stand-in `triton` package whose JITFunction has Triton 3.6's shape (`params` of
KernelParam-like objects with name / is_constexpr / has_default / default, `fn`, `run(*args, grid,
warmup, **kwargs)`, `__getitem__(grid)` returning a launcher that calls `self.run`) and numpy arrays."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tileport.launches import record
from tileport.launches import load_spec, parse_spec, spec_document

FAKE_JIT = '''
import inspect
CALLS = []

class KernelParam:
    def __init__(self, param):
        self._param = param
        self.name = param.name
        self.is_constexpr = "constexpr" in str(param.annotation)
    @property
    def default(self):
        return self._param.default
    @property
    def has_default(self):
        return self._param.default is not inspect.Parameter.empty

class JITFunction:
    def __init__(self, fn):
        self.fn = fn
        self.params = [KernelParam(p) for p in inspect.signature(fn).parameters.values()]
    def run(self, *args, grid, warmup, **kwargs):
        CALLS.append((self.fn.__name__, grid, warmup))
        return "compiled"
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid=grid, warmup=False, *args, **kwargs)
    def warmup(self, *args, grid, **kwargs):
        return self.run(grid=grid, warmup=True, *args, **kwargs)

def jit(fn):
    return JITFunction(fn)
'''

FAKE_TRITON = '''
from triton.runtime.jit import jit, JITFunction
from triton import language
def cdiv(a, b):
    return (a + b - 1) // b
'''

FAKE_LANGUAGE = '''
class constexpr:
    pass
'''

PROGRAM = '''
import sys
import numpy as np
import triton
import triton.language as tl
from triton.runtime import jit as jitmod

@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, FLAG, BLOCK: tl.constexpr, EVEN: tl.constexpr = True):
    pass

x = np.zeros((8, 6), dtype=np.float16)[:, ::2]
y = np.zeros(24, dtype=np.float16)
idx = np.arange(3, 40, dtype=np.int32)
for i in range(3):  # the same launch three times: one record, count 3
    axpy_kernel[(4,)](x, y, idx + i, 0.5, 24, None, 128)
grid = lambda meta: (triton.cdiv(24, meta["BLOCK"]), 2)
axpy_kernel[grid](x, y, idx, 2.0, 2**40, None, BLOCK=16, EVEN=False, num_warps=8, num_stages=3)
axpy_kernel.warmup(x, y, idx, 2.0, 24, None, 64, grid=(1,))  # a compile, not a launch: not recorded
axpy_kernel[(1,)](x)  # cannot be described (parameters missing): warned, still launched
assert len(jitmod.CALLS) == 6, jitmod.CALLS  # the real run was called every time
print("program ran")
'''


@pytest.fixture
def fake_triton(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "triton" / "runtime").mkdir(parents=True)
    (site / "triton" / "language").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text(FAKE_TRITON)
    (site / "triton" / "runtime" / "__init__.py").write_text("")
    (site / "triton" / "runtime" / "jit.py").write_text(FAKE_JIT)
    (site / "triton" / "language" / "__init__.py").write_text(FAKE_LANGUAGE)
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    monkeypatch.setenv("PYTHONPATH", str(site))
    return tmp_path, prog


def test_record_triton_launches(fake_triton):
    tmp, prog = fake_triton
    spec = tmp / "launches.json"
    proc = subprocess.run([sys.executable, str(prog)], env=record.child_env(spec), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "program ran" in proc.stdout
    assert proc.stderr.count("could not describe a Triton launch: ValueError: parameter `y_ptr` is not given") == 1
    records = load_spec(spec)
    assert len(records) == 2
    first, second = records
    assert (first.framework, first.kernel, first.file, first.grid, first.count) == (
        "triton", "axpy_kernel", str(prog), (4, 1, 1), 3)
    args = {a.name: a for a in first.args}
    assert [a.name for a in first.args] == ["x_ptr", "y_ptr", "out_ptr", "alpha", "n", "FLAG", "BLOCK", "EVEN"]
    assert (args["x_ptr"].kind, args["x_ptr"].dtype, args["x_ptr"].shape, args["x_ptr"].strides) == (
        "array", "float16", [8, 3], [6, 2])
    assert (args["out_ptr"].dtype, args["out_ptr"].range) == ("int32", [3, 41])  # value ranges merged
    assert (args["alpha"].kind, args["alpha"].dtype, args["alpha"].value) == ("scalar", "float32", 0.5)
    assert (args["n"].kind, args["n"].dtype, args["n"].value) == ("scalar", "int32", 24)
    assert (args["FLAG"].kind, args["FLAG"].value) == ("const", None)  # Triton specializes None
    assert (args["BLOCK"].kind, args["BLOCK"].value) == ("const", 128)
    assert (args["EVEN"].kind, args["EVEN"].value) == ("const", True)  # the parameter's default
    assert first.options == {}
    # the callable grid is evaluated on the bound arguments; launch options are kept beside them
    assert second.grid == (2, 2, 1)
    assert second.options == {"num_warps": 8, "num_stages": 3}
    consts = {a.name: a.value for a in second.args if a.kind == "const"}
    assert consts == {"FLAG": None, "BLOCK": 16, "EVEN": False}
    assert {a.name: a.dtype for a in second.args if a.kind == "scalar"} == {"alpha": "float32", "n": "int64"}


def test_spec_with_options_round_trips_and_stays_unchanged_without():
    doc = json.loads(json.dumps(spec_document([])))
    assert doc["launches"] == []
    raw = {"format": "tileport-launches", "version": 1, "launches": [
        {"framework": "triton", "kernel": "k", "file": "/a/k.py", "grid": [2], "options": {"num_warps": 4},
         "args": [{"name": "BLOCK", "kind": "const", "value": 64}]},
        {"framework": "cutile", "kernel": "c", "file": "/a/c.py", "grid": [1], "args": []}]}
    tri, cut = parse_spec(raw)
    assert tri.options == {"num_warps": 4} and tri.to_dict()["options"] == {"num_warps": 4}
    assert "options" not in cut.to_dict()  # cuTile specs are written as before
    other = parse_spec({**raw, "launches": [{**raw["launches"][0], "options": {"num_warps": 8}}]})[0]
    assert other.key() != tri.key()  # different launch options: different launches


class _Param:
    def __init__(self, p: inspect.Parameter):
        self.name, self._p = p.name, p
        self.is_constexpr = "constexpr" in str(p.annotation)
        self.has_default = p.default is not inspect.Parameter.empty
        self.default = p.default


class FakeJIT:
    def __init__(self, fn):
        self.fn = fn
        self.params = [_Param(p) for p in inspect.signature(fn).parameters.values()]


def _kernel(a_ptr, n, scale, BLOCK: "constexpr", MODE: "constexpr" = "fast"):
    pass


def test_describe_triton_launch_binds_keywords_defaults_and_grid():
    a = np.zeros((4, 5), dtype=np.float32)
    rec = record.describe_triton_launch(FakeJIT(_kernel), (a,), {"n": 20, "scale": True, "BLOCK": 32,
                                                                 "num_warps": 2, "enable_fp_fusion": False},
                                        lambda meta: (meta["n"] // meta["BLOCK"] + 1,))
    assert rec.grid == (1, 1, 1) and rec.kernel == "_kernel" and rec.framework == "triton"
    assert [(x.name, x.kind) for x in rec.args] == [("a_ptr", "array"), ("n", "scalar"), ("scale", "scalar"),
                                                     ("BLOCK", "const"), ("MODE", "const")]
    assert rec.args[2].dtype == "bool" and rec.args[4].value == "fast"
    assert rec.options == {"num_warps": 2, "enable_fp_fusion": False}


def test_describe_triton_launch_rejects_too_many_arguments():
    with pytest.raises(ValueError, match="6 arguments for 5 parameters"):
        record.describe_triton_launch(FakeJIT(_kernel), (1, 2, 3, 4, 5, 6), {}, (1,))


def test_triton_hook_is_registered_and_installs_once():
    hook = record.HOOKS["triton"]
    assert hook.module == "triton.runtime.jit"

    class Module:
        class JITFunction:
            def run(self, *args, grid, warmup, **kwargs):
                return ("ran", args, grid, warmup)
    hook.install(Module)
    first = Module.JITFunction.run
    hook.install(Module)  # a second install keeps the one wrapper
    assert Module.JITFunction.run is first and first.__tileport_recording__
    assert Module.JITFunction().run(1, grid=(1,), warmup=True) == ("ran", (1,), (1,), True)


def test_corpus_driver_records_every_corpus_kernel_statically():
    """The driver launches every corpus kernel (read with ast: each CORPUS kernel is launched by a
    host launcher of its file that the driver uses)."""
    import ast

    from tileport.ops.triton_kernels import CORPUS
    driver = Path(__file__).resolve().parents[2] / "eval" / "triton_corpus_driver.py"
    tree = ast.parse(driver.read_text())
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for k in CORPUS:
        launcher = ast.parse(k.path.read_text())
        hosts = {f.name for f in launcher.body if isinstance(f, ast.FunctionDef)
                 and not any("jit" in ast.unparse(d) for d in f.decorator_list)
                 and any(isinstance(c, ast.Subscript) and ast.unparse(c.value) == k.kernel
                         for c in ast.walk(f))}
        assert hosts & used, f"{k.kernel}: no host launcher of it is called by the driver"
