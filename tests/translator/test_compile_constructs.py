"""The construct kernels the reference corpus does not exercise, compiled and proven on the CPU.

tests/translator/data/constructs.py is translated into one crate (`tileport_constructs`, under
tmp_path), built once with cargo (dev profile, the same CARGO_TARGET_DIR as the repo crate so the
dependencies are reused) and loaded. For every capture below, both sides are captured for the same
signature (cuTile Python's export, the port's IR export inside the cdylib), both compile to an sm_90
cubin with tileiras, and the structural IR diff reports no CRITICAL finding.
"""

from __future__ import annotations

import ast
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tileport import toolchain
from tileport.corpus import _config_entry
from tileport.frontends.cutile import KernelConfig
from tileport.ops.spec import Capture
from tileport.translate import translate

pytestmark = pytest.mark.cargo

DATA = Path(__file__).parent / "data" / "constructs.py"
REPO = Path(__file__).resolve().parents[2]
F32, F16, BF16, I32 = "float32", "float16", "bfloat16", "int32"

CAPTURES = [
    Capture("load_modes_kernel", {"x": (F32, 2), "y": (F32, 2)}, {}, {"TM": 32, "TN": 64}),
    Capture("load_modes_kernel", {"x": (F16, 2), "y": (F16, 2)}, {}, {"TM": 32, "TN": 64}),
    Capture("load_order_kernel", {"x": (F32, 2), "y": (F32, 2)}, {}, {"TM": 32, "TN": 64}),
    Capture("gather_checked_kernel", {"x": (F32, 1), "y": (F32, 1)}, {"n": I32}, {"TILE": 128}),
    Capture("gather_2d_kernel", {"x": (I32, 2), "y": (I32, 2)}, {}, {"TM": 16, "TN": 32}),
    Capture("creation_kernel", {"y": (F32, 1)}, {}, {"TILE": 128}),
    Capture("arith_kernel", {"a": (F32, 1), "b": (F32, 1), "y": (F32, 1), "m": (I32, 1)}, {}, {"TILE": 128}),
    Capture("arith_kernel", {"a": (F16, 1), "b": (F16, 1), "y": (F16, 1), "m": (I32, 1)}, {}, {"TILE": 128}),
    Capture("int_arith_kernel", {"a": (I32, 1), "b": (I32, 1), "y": (I32, 1)}, {}, {"TILE": 128}),
    Capture("math_kernel", {"x": (F32, 1), "y": (F32, 1)}, {}, {"TILE": 256}),
    Capture("math_kernel", {"x": (BF16, 1), "y": (BF16, 1)}, {}, {"TILE": 256}),
    Capture("reduce_kernel", {"x": (F32, 2), "s0": (F32, 1), "s1": (F32, 1), "s2": (F32, 1)}, {},
            {"TM": 16, "TN": 64}),
    Capture("matmul_f16_kernel", {"a": (F16, 2), "b": (F16, 2), "c": (F16, 2)}, {}, {"TM": 64, "TN": 64, "TK": 32}),
    Capture("shape_kernel", {"x": (F32, 2), "v": (F32, 1), "y": (F32, 2), "z": (F32, 1)}, {}, {"TM": 16, "TN": 32}),
    Capture("loops_kernel", {"x": (F16, 1), "y": (F16, 1)}, {"n": I32}, {"TILE": 128}),
    Capture("loops_kernel", {"x": (F32, 1), "y": (F32, 1)}, {"n": I32}, {"TILE": 128}),
    Capture("branch_kernel", {"x": (F16, 1), "y": (F16, 1)}, {}, {"TILE": 128, "MODE": 1, "UPCAST": True}),
    Capture("branch_kernel", {"x": (F16, 1), "y": (F16, 1)}, {}, {"TILE": 128, "MODE": 2, "UPCAST": False}),
    Capture("branch_kernel", {"x": (F32, 1), "y": (F32, 1)}, {}, {"TILE": 128, "MODE": 2, "UPCAST": False}),
    Capture("float_const_kernel", {"x": (F32, 1), "y": (F32, 1)}, {}, {"TILE": 128, "ALPHA": 0.25}),
    Capture("float_const_kernel", {"x": (F32, 1), "y": (F32, 1)}, {}, {"TILE": 128, "ALPHA": -1.5}),
    Capture("fma_kernel", {"a": (F32, 1), "b": (F32, 1), "c": (F32, 1), "y": (F32, 1)}, {}, {"TILE": 128}),
    Capture("persistent_kernel", {"x": (F32, 2), "w": (F32, 1), "y": (F32, 2)}, {"n_rows": I32}, {"TILE": 256}),
    Capture("inplace_kernel", {"x": (F32, 2)}, {"n_rows": I32}, {"TILE": 256}),
    Capture("cond_chain_kernel", {"x": (F32, 1), "y": (F32, 1)}, {"n": I32}, {"TILE": 128}),
    Capture("cond_chain_kernel", {"x": (F16, 1), "y": (F16, 1)}, {"n": I32}, {"TILE": 128}),
]

# Entries the translation must produce (literal-specialized kernels get one per constant value in use).
ENTRIES = {
    "branch_kernel": ["branch_kernel_mode1_upcast1", "branch_kernel_mode2_upcast0"],
    "float_const_kernel": ["float_const_kernel_alpha0p25", "float_const_kernel_alpham1p5"],
}


def kernel_names() -> list[str]:
    tree = ast.parse(DATA.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and any("kernel" in ast.unparse(d) for d in n.decorator_list)]


def configs() -> dict[str, KernelConfig]:
    """The translation's configurations: exactly the captures' dtypes and constants (as the corpus does)."""
    by_kernel: dict[str, list[Capture]] = {}
    for c in CAPTURES:
        by_kernel.setdefault(c.kernel, []).append(c)
    return {k: KernelConfig(tuple(_config_entry(c) for c in caps),
                            {n: rank for c in caps for n, (_dt, rank) in c.arrays.items()})
            for k, caps in by_kernel.items()}


def test_every_construct_kernel_has_a_capture():
    assert sorted(kernel_names()) == sorted({c.kernel for c in CAPTURES})


@pytest.fixture(scope="module")
def constructs(tmp_path_factory):
    """(report, library) of the constructs crate: one translation, one cargo build."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    from tileport.runtime.library import KernelLibrary, build
    crate = tmp_path_factory.mktemp("constructs") / "crate"
    report = translate([str(DATA)], crate, {str(DATA): configs()}, crate="tileport_constructs")
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    # the repo crate's lock file: the same dependency versions, so cargo reuses their build artifacts
    shutil.copy(REPO / "rust" / "Cargo.lock", crate / "Cargo.lock")
    so = build(crate, "dev")
    return report, KernelLibrary(so, crate / "kernels.json")


def test_constructs_crate_translates_and_loads(constructs):
    report, lib = constructs
    entries = {r.kernel: r.entries for r in report.results}
    assert sorted(entries) == sorted(kernel_names())
    for kernel, names in entries.items():
        assert names == ENTRIES.get(kernel, [kernel]), kernel
    assert sorted(lib.entries) == sorted(kernel_names())
    assert lib.manifest["crate"] == "tileport_constructs"


@pytest.fixture(scope="module")
def verified(constructs):
    """verify_capture (reference IR, generated IR, sm_90 cubins, IR diff) for every capture, 2 at a time."""
    if toolchain.tileiras() is None or toolchain.tileirdisasm() is None:
        pytest.skip("tileiras/tileirdisasm not found (bash scripts/setup.sh)")
    from tileport.capture.verify import verify_capture
    _, lib = constructs

    def one(capture):
        return verify_capture(lib, DATA, capture, None, archs=("sm_90",))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, CAPTURES))
    print("\nconstruct captures (verdict, CRITICAL/WARN/INFO, seconds):")
    for r in results:
        print(f"  {r.capture:60s} {r.verdict:16s} {r.critical}/{r.warn}/{r.info} {r.seconds:5.1f}s {r.error}")
    return {r.capture: r for r in results}


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.label for c in CAPTURES])
def test_construct_ir_matches_reference(verified, capture):
    r = verified[capture.label]
    assert not r.error, r.error
    assert r.cubins_ref == {"sm_90": True}, "the reference does not compile for sm_90"
    assert r.cubins_gen == {"sm_90": True}, "the port does not compile for sm_90"
    assert r.critical == 0, "\n".join(r.findings)
    assert r.verdict in ("PASS", "PASS_WITH_NOTES"), (r.verdict, r.findings)
