"""Occupancy hints of Triton ports (`frontends/triton/occupancy.py`): from the largest tile the configured
constexpr values give; none for matrix-multiply kernels or unknown sizes."""

from __future__ import annotations

from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.base import KernelConfig
from tileport.frontends.triton import translate_file

CORPUS = Path(__file__).resolve().parents[2] / "src" / "tileport" / "ops" / "triton_kernels"


def hints(file: str, kernel: str, *configs: dict) -> dict:
    cfg = {kernel: KernelConfig(tuple(configs))} if configs else None
    tr = translate_file(str(CORPUS / file), cfg, [kernel], naming=RUST_NAMING)
    assert not tr.diagnostics, [str(d) for d in tr.diagnostics]
    return {k.name: k.hints.get("occupancy") for k in tr.module.kernels}


def test_row_kernels_share_the_sm_up_to_8192_words():
    # softmax over 8192 bf16 columns: one 8192-word f32 tile; tileiras alone compiles for one block per SM
    assert hints("softmax.py", "softmax_kernel", {"x_ptr": "bf16", "y_ptr": "bf16", "BLOCK": 1024},
                 {"x_ptr": "bf16", "y_ptr": "bf16", "BLOCK": 8192}) == {"softmax_kernel": 4}
    assert hints("softmax.py", "softmax_kernel", {"x_ptr": "f32", "y_ptr": "f32", "BLOCK": 16384}) == \
        {"softmax_kernel": 2}
    assert hints("softmax.py", "softmax_kernel", {"x_ptr": "f32", "y_ptr": "f32", "BLOCK": 32768}) == \
        {"softmax_kernel": None}


def test_unknown_sizes_and_matrix_multiplies_get_no_hint():
    assert hints("softmax.py", "softmax_kernel") == {"softmax_kernel": None}  # BLOCK not configured
    cfg = {"q_ptr": "bf16", "k_ptr": "bf16", "v_ptr": "bf16", "o_ptr": "bf16", "lse_ptr": "f32",
           "BLOCK_M": 64, "BLOCK_N": 32, "HEAD_DIM": 64, "CAUSAL": True}
    assert set(hints("attention.py", "attention_fwd_kernel", cfg).values()) == {None}


def test_gathered_elements_count_their_offsets():
    # flash_decode_partial gathers [BLOCK_N, HEAD_DIM] key and value tiles: 64 x 128 elements with their
    # offsets are 16384 words (with occupancy 4, tileiras spills it to local memory)
    cfg = {"q_ptr": "bf16", "k_ptr": "bf16", "v_ptr": "bf16", "kv_lens_ptr": "i32", "o_part_ptr": "f32",
           "lse_part_ptr": "f32", "BLOCK_N": 64, "HEAD_DIM": 128}
    assert hints("flash_decode.py", "flash_decode_partial_kernel", cfg) == {"flash_decode_partial_kernel": 2}
