"""Our Triton kernels (tests/triton/data and the corpus, src/tileport/ops/triton_kernels), ported and built:
the generated crate compiles (cargo), every entry exports its Tile IR from the built library and that IR
compiles to an sm_90 cubin with tileiras. Triton has no reference Tile IR, so the port's own IR is what is
checked here (the GPU differential test compares against Triton itself)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tileport import toolchain
from tileport.model.types import TORCH_DTYPES
from tileport.ops.spec import Capture
from tileport.translate import translate

pytestmark = pytest.mark.cargo

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "src" / "tileport" / "ops" / "triton_kernels"
TORCH_NAME = {v: k for k, v in TORCH_DTYPES.items()}
TILE = 64  # every constexpr (tile sizes, group sizes, repeat counts) in the captures


def captures(manifest: dict) -> list[Capture]:
    """One capture per entry: arrays of its f16 arm (its only arm when the dtypes are fixed), constexprs = TILE,
    pinned values as given."""
    out = []
    for e in manifest["entries"]:
        for v in e["variants"]:
            arms = max((len(vals) for vals in v["dtype_vars"].values()), default=1)
            for arm in [min(1, arms - 1)]:
                arrays = {}
                for p in e["params"]:
                    if p["kind"] == "array":
                        dt = v["array_dtypes"][p["name"]]
                        dt = v["dtype_vars"][dt][arm] if dt in v["dtype_vars"] else dt
                        arrays[p["name"]] = (TORCH_NAME[dt], p["rank"])
                scalars = {p["name"]: TORCH_NAME[p["dtype"]] for p in e["params"] if p["kind"] == "scalar"}
                consts = {p["name"]: v["pinned"].get(p["name"], TILE) for p in e["params"] if p["kind"] == "const"}
                out.append(Capture(e["kernel"], arrays, scalars, {**consts, **v["pinned"]}))
    return out


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    from tileport.runtime.library import KernelLibrary, build
    crate = tmp_path_factory.mktemp("triton") / "crate"
    files = sorted(DATA.glob("*.py")) + sorted(p for p in CORPUS.glob("*.py") if p.name != "__init__.py")
    report = translate([str(p) for p in files], crate, crate="tileport_triton_own")
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    shutil.copy(REPO / "rust" / "Cargo.lock", crate / "Cargo.lock")
    return KernelLibrary(build(crate, "dev"), crate / "kernels.json")


def test_kernel_names_are_unique(library):
    """Captures name kernels: our test kernels must not share a name with a corpus kernel."""
    names = [e["kernel"] for e in library.manifest["entries"]]
    assert len(names) == len(set(names))


def test_every_entry_exports_ir_that_compiles_to_a_cubin(library):
    if toolchain.tileiras() is None:
        pytest.skip("tileiras not found (bash scripts/setup.sh)")
    from tileport.capture import capture_side, generated_bytecode
    caps = captures(library.manifest)
    assert len(caps) == sum(len(e["variants"]) for e in library.manifest["entries"]) >= 30

    def one(c: Capture):
        try:
            _, bc = generated_bytecode(library, c)
            side = capture_side(bc, None, "generated", ("sm_90",))
            return c.label, [x.ok for x in side.cubins] == [True], ""
        except Exception as e:  # noqa: BLE001 - reported per capture below
            return c.label, False, f"{type(e).__name__}: {e}"
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, caps))
    failed = [f"{label}: {err or 'tileiras failed'}" for label, ok, err in results if not ok]
    assert not failed, "\n".join(failed)
