"""Triton versions of the operators of the library, written for tileport: the Triton corpus.

Each module holds `@triton.jit` kernel(s), a plain host launcher (grid + arguments) and a docstring
stating the semantics, which mirror the cuTile kernel of the same operator in `ops/kernels/`. The
modules import triton and torch; tileport itself only reads them with `ast` (translation) and never
imports them. `CORPUS` lists every kernel with the library operator that serves as its cuTile Python
anchor (None: no operator of the same semantics). Offsets are 32-bit (every tensor the driver launches
them on has fewer than 2**31 elements), except in layer_norm.py, which keeps the `.to(tl.int64)` row
offset idiom.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


@dataclass(frozen=True)
class TritonKernel:
    file: str            # module file name in this directory
    kernel: str          # the @triton.jit kernel
    anchor: str | None   # tileport.ops operator of the same semantics

    @property
    def path(self) -> Path:
        return HERE / self.file


CORPUS: tuple[TritonKernel, ...] = (
    TritonKernel("vector_add.py", "vector_add_kernel", "vector_add"),
    TritonKernel("relu.py", "relu_kernel", "relu"),
    TritonKernel("gelu.py", "gelu_tanh_kernel", "gelu"),
    TritonKernel("swiglu.py", "swiglu_kernel", "swiglu"),
    TritonKernel("geglu.py", "geglu_kernel", "geglu"),
    TritonKernel("silu_and_mul.py", "silu_and_mul_kernel", "silu_and_mul"),
    TritonKernel("softmax.py", "softmax_kernel", "softmax"),
    TritonKernel("layer_norm.py", "layer_norm_fwd_kernel", "layer_norm"),
    TritonKernel("rms_norm.py", "rms_norm_kernel", "rms_norm"),
    TritonKernel("rope.py", "rope_kernel", "rope"),
    TritonKernel("matmul.py", "matmul_kernel", "matmul"),
    TritonKernel("matmul_block_ptr.py", "matmul_block_ptr_kernel", "matmul"),
    TritonKernel("attention.py", "attention_fwd_kernel", "fmha_fwd"),
    TritonKernel("flash_decode.py", "flash_decode_partial_kernel", "flash_decode"),
    TritonKernel("flash_decode.py", "flash_decode_combine_kernel", None),
)


def corpus_files() -> list[Path]:
    """The corpus module files, each once, in `CORPUS` order."""
    return list(dict.fromkeys(k.path for k in CORPUS))
