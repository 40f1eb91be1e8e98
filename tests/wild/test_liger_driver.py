"""eval/wild_drivers/liger_driver.py without a GPU: it reaches Liger's op modules without running the
package's `__init__` files, and its cases drive every CUDA file of Liger-Kernel 0.8.5 that holds a kernel
(the committed wild-triton.json lists them)."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "eval" / "wild_drivers" / "liger_driver.py"
# files whose kernels the driver reaches through another op module (the file -> the case that launches it)
INDIRECT = {"liger_kernel/ops/utils.py": "cross_entropy", "liger_kernel/ops/fused_moe_kernels.py": "fused_moe"}


@pytest.fixture
def driver(monkeypatch):
    """The driver module, imported with a stand-in `torch` (it only reads dtypes at import)."""
    fake_torch = types.ModuleType("torch")
    fake_torch.float32, fake_torch.bfloat16 = "float32", "bfloat16"
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.syspath_prepend(str(DRIVER.parent))
    spec = importlib.util.spec_from_file_location("liger_driver_under_test", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_liger(root: Path) -> None:
    pkg = root / "liger_kernel"
    (pkg / "ops").mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg / "ops" / "__init__.py"):
        init.write_text("raise ImportError('a package __init__ ran')\n")
    (pkg / "ops" / "utils.py").write_text("VALUE = 7\n")
    (pkg / "ops" / "softmax.py").write_text("from liger_kernel.ops.utils import VALUE\n")


def test_op_modules_import_without_the_package_inits(driver, tmp_path, monkeypatch):
    _fake_liger(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "liger_kernel" or m.startswith("liger_kernel.")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        assert driver.import_ops() == tmp_path / "liger_kernel"
        assert driver.ops("softmax").VALUE == 7
    finally:
        for name in [m for m in sys.modules if m == "liger_kernel" or m.startswith("liger_kernel.")]:
            del sys.modules[name]


def test_cases_are_isolated_and_the_summary_is_written_after_each(driver, tmp_path, monkeypatch):
    def boom() -> None:
        raise RuntimeError("no TMA here")
    seen = []
    out = tmp_path / "summary.json"
    monkeypatch.setenv("WILD_DRIVER_OUT", str(out))
    monkeypatch.setattr(driver, "import_ops", lambda: None)
    monkeypatch.setattr(driver, "torch", types.SimpleNamespace(manual_seed=lambda s: None))

    def ok() -> None:
        seen.append(json.loads(out.read_text())["cases"])  # the first case's result is already on disk
    monkeypatch.setattr(driver, "CASES", {"first": boom, "second": ok})
    assert driver.main() == 0
    summary = json.loads(out.read_text())
    assert seen == [{"first": summary["cases"]["first"]}] and summary["cases"]["second"] == {"ok": True}
    assert summary["cases"]["first"]["error"] == "RuntimeError: no TMA here" and summary["ok"] == 1


def test_missing_package_is_an_import_error(driver, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="not installed"):
        driver.import_ops()


def _driven_files(driver) -> dict[str, list[str]]:
    """op file (in the wheel) -> the cases that call `ops("<module>")` on it (read with ast)."""
    out: dict[str, list[str]] = {}
    tree = ast.parse(DRIVER.read_text())
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in driver.CASES):
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "ops":
                module = call.args[0].value
                out.setdefault(f"liger_kernel/ops/{module.replace('.', '/')}.py", []).append(fn.name)
    return out


def test_cases_drive_every_cuda_file_with_a_kernel(driver):
    table = json.loads((REPO / "bench" / "results" / "wild-triton.json").read_text())
    cuda = {r["file"] for r in table["kernels"] if r["role"] == "kernel" and "/_ascend/" not in r["file"]}
    driven = _driven_files(driver)
    for file, case in INDIRECT.items():
        assert case in driver.CASES and file in cuda
    assert cuda - set(driven) - set(INDIRECT) == set(), "CUDA files with kernels no case launches"


def test_every_case_is_isolated_and_the_dispatcher_is_pinned_to_triton(driver):
    text = DRIVER.read_text()
    assert 'LIGER_KERNEL_IMPL", "nvidia-triton"' in text
    imports = {n.module for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.startswith("liger_kernel") for m in imports), "only ops() imports Liger's op modules"
    assert len(driver.CASES) >= 30 and all(callable(c) for c in driver.CASES.values())
