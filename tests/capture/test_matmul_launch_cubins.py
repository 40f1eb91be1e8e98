"""The cutile_gpt GEMM cubins the GPU test launches (tests/gpu/data/matmul_launch): cuTile Python's and the
port's, each compiled for the recorded launch's specialization, are the same machine code, and it is the
TMA + TF32 code the launch specialization gives (not the capture's LDGSTS code): what lets
tests/gpu/test_matmul_launch_config.py attribute a time difference to the launch rather than the kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from tileport import sass, toolchain

DATA = Path(__file__).resolve().parents[1] / "gpu" / "data" / "matmul_launch"
TOOLS = pytest.mark.skipif(toolchain.nvdisasm() is None or toolchain.cuobjdump() is None,
                           reason="needs nvdisasm and cuobjdump")


def _opcodes(s: sass.Sass, prefix: str) -> int:
    """Instructions whose opcode (after any predicate) starts with `prefix`."""
    words = (i.text.split() for i in s.instructions)
    return sum(1 for w in words if (w[1] if w[0].startswith("@") else w[0]).startswith(prefix))


@TOOLS
@pytest.mark.parametrize("kernel, instructions, tma_loads", [("matmul_kernel", 608, 2),
                                                             ("matmul_bias_kernel", 648, 3)])  # + the bias
def test_reference_and_port_cubins_are_the_same_tma_tf32_code(kernel, instructions, tma_loads):
    ref = sass.disassemble(DATA / f"ref_{kernel}.cubin", toolchain.nvdisasm(), toolchain.cuobjdump())
    port = sass.disassemble(DATA / f"port_{kernel}.cubin", toolchain.nvdisasm(), toolchain.cuobjdump())
    result = sass.compare(ref, port)
    assert result["same"], result["first_difference"]
    assert result["instructions"] == [instructions, instructions] and result["registers"] == [64, 64], result
    assert _opcodes(port, "UTMALDG") == tma_loads and _opcodes(port, "LDGSTS") == 0, sass.listing(port)[:2000]
    assert _opcodes(port, "HMMA.1688.F32.TF32") == 8, sass.listing(port)[:2000]
