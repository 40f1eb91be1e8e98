"""The idiomatic corpus port compiles to cuTile Python's Tile IR and to the faithful port's machine code, on a
sample of the corpus (what bench/results/idiomatic-vs-faithful.json records for every capture, from
eval/idiomatic_proof.py).

The idiomatic side is the committed crate (the `library` fixture, built once per session); the faithful side is
the faithful rendering of the sample's files, built once here. Each sample capture must diff clean against the
reference, compile (sm_90) to the faithful port's instruction stream, and read as the committed result does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import idiomatic_proof as proof
from tileport.corpus import captures_by_kernel
from tileport.ops.specs import all_specs

pytestmark = pytest.mark.cargo

REPO = Path(__file__).resolve().parents[2]
RESULT = REPO / "bench" / "results" / "idiomatic-vs-faithful.json"
# (kernel, capture index): an owned output and folded sum; views, a loop and folds; a shared body with the NEG_INF
# view and the approximate exp helper; no-TMA loads and stores; token-ordered stores; a gather; scalar min and
# ceil_div in an f16 kernel (typed `let`s); a single-element gather through the module's `load_element`.
SAMPLE = [("vector_add_kernel", 1), ("rms_norm_kernel", 2), ("softmax_tma_kernel", 0),
          ("softmax_tma_lean_kernel", 1), ("softmax_online_kernel", 0), ("softmax_gather_kernel", 0),
          ("matmul_splitk_kernel", 1), ("fmha_bwd_dq_kernel", 0)]
FILES = ("vector_add.py", "rms_norm.py", "softmax.py", "matmul_splitk.py", "attention_bwd.py")


@pytest.fixture(scope="module")
def faithful(tmp_path_factory):
    from tileport.runtime.library import KernelLibrary, build
    crate = proof.write_faithful_crate(tmp_path_factory.mktemp("faithful"), list(FILES))
    return KernelLibrary(build(crate, "dev"), crate / "kernels.json")


def test_sample_diffs_clean_and_compiles_to_the_faithful_machine_code(library, faithful):
    committed = {c["capture"]: c for c in json.loads(RESULT.read_text())["captures"]}
    by_kernel = captures_by_kernel(all_specs())
    for kernel, index in SAMPLE:
        path, captures = by_kernel[kernel]
        r = proof.compare(faithful, library, path, captures[index], ("sm_90",))
        assert r.clean, (r.capture, r.ir_verdict, r.findings, r.error)
        assert r.sass_equal_to_faithful == {"sm_90": True}, (r.capture, r.first_difference)
        pinned = committed[r.capture]
        assert (pinned["ir_verdict"], pinned["critical"], pinned["warn"], pinned["sass_equal_to_faithful"]["sm_90"]) \
            == (r.ir_verdict, r.critical, r.warn, True)

