"""tileport's own Triton corpus (src/tileport/ops/triton_kernels) through the Triton frontend: every kernel
translates, and the block-structured accesses of each become partition views (the rest, gathers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file

CORPUS = Path(__file__).resolve().parents[2] / "src" / "tileport" / "ops" / "triton_kernels"
FILES = sorted(p for p in CORPUS.glob("*.py") if p.name != "__init__.py")
# Pointers each kernel reaches through gathers/scatters (offsets that are no block: `+ n_cols`, `+ half_dim`,
# a key/value split that does not divide the block); every other pointer is a partition view.
FLAT = {
    "attention_fwd_kernel": set(),
    "flash_decode_partial_kernel": {"k_ptr", "v_ptr"},
    "rope_kernel": {"x_ptr", "y_ptr"},
    "silu_and_mul_kernel": {"x_ptr"},
}


def test_the_corpus_is_there():
    assert len(FILES) >= 12


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_kernel_translates(path):
    tr = translate_file(str(path), naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    assert tr.module.kernels
    for k in tr.module.kernels:
        arrays = {p.name for p in k.params if p.is_array}
        assert set(k.views) | FLAT.get(k.base_name, set()) == arrays, (k.name, sorted(k.views))
        for name, view in k.views.items():
            assert len(view["strides"]) == len(view["extents"]) == k.param(name).ty.rank
