"""Long chains of conditional expressions translate in seconds. `a if c else (b if d else ...)` on a
runtime condition is an `if` with a result in each `else` (cuTile Python's Tile IR nests them so);
emitted nested, each level a `let sel = if ...; sel`, rustfmt's time grew exponentially with the
depth (25 s at depth 20). The port continues such a chain as `else if`, at one depth whatever its
length; a chain down the `then` branches stays nested (its Tile IR is nested there), each level the
value of its block, which rustfmt formats in linear time. (tests/translator/data/constructs.py's
`cond_chain_kernel` proves the IR of both on the CPU.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tileport.translate import translate

DEPTH = 100
TIME_LIMIT_S = 20.0  # about 1 s each here; unbounded (exponential) before
HEADER = "import cuda.tile as ct\n\n\n@ct.kernel\n"


def else_chain(arm: str, test: str, last: str) -> str:
    chain = last
    for i in range(DEPTH, 0, -1):
        chain = f"{arm.format(i=i)} if {test.format(i=i)} else ({chain})"
    return chain


def then_chain(arm: str, test: str, last: str) -> str:
    chain = last
    for i in range(DEPTH, 0, -1):
        chain = f"({chain}) if {test.format(i=i)} else {arm.format(i=i)}"
    return chain


CUTILE = {
    # a runtime scalar condition
    "else_scalar": ("x, y, n: int", else_chain("{i}.0", "n == {i}", "0.5"), "(t * s).astype(y.dtype)"),
    # 0-d tile conditions computed in the else branch (a reduction each): the `else if` condition's block
    "else_tile": ("x, y", else_chain("t * {i}.0", "ct.max(t) > {i}.0", "t"), "s"),
    "then_scalar": ("x, y, n: int", then_chain("{i}.0", "n == {i}", "0.5"), "(t * s).astype(y.dtype)"),
}


def cutile_kernel(params: str, chain: str, stored: str) -> str:
    return (HEADER + f"def k({params}):\n    t = ct.load(x, index=(ct.bid(0),), shape=(16,))\n    s = {chain}\n"
            f"    ct.store(y, index=(ct.bid(0),), tile={stored})\n")


TRITON = f"""import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    s = {else_chain("{i}.0", "n == {i}", "0.5")}
    tl.store(y_ptr + offs, x * s)
"""


def translated(tmp_path: Path, source: str) -> str:
    src = tmp_path / "chain.py"
    src.write_text(source)
    t0 = time.perf_counter()
    report = translate([str(src)], tmp_path / "crate")
    seconds = time.perf_counter() - t0
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    assert seconds < TIME_LIMIT_S, f"{seconds:.1f} s"
    return (tmp_path / "crate" / "src" / "chain.rs").read_text()


def depth(rust: str) -> int:
    """The deepest indentation of the device code (the `#[cutile::module]`), in levels."""
    device = rust.split("\n}\n", 1)[0]
    return max((len(line) - len(line.lstrip(" "))) // 4 for line in device.splitlines() if line.strip())


@pytest.mark.parametrize("case", sorted(CUTILE))
def test_cutile_chain_translates_in_seconds(tmp_path, case):
    rust = translated(tmp_path, cutile_kernel(*CUTILE[case]))
    if case.startswith("else"):
        assert rust.count("} else if ") == DEPTH - 1
        assert depth(rust) <= 4, "the chain nests"


def test_else_if_condition_block_holds_what_the_else_branch_computed_first(tmp_path):
    rust = translated(tmp_path, cutile_kernel(*CUTILE["else_tile"]))
    block = rust.split("} else if {\n", 1)[1].split("} {\n", 1)[0].rstrip().splitlines()
    assert "reduce_max(t, 0i32)" in block[0] and block[-1].strip().startswith("cond_")


def test_triton_chain_translates_in_seconds(tmp_path):
    rust = translated(tmp_path, TRITON)
    assert rust.count("select(") >= DEPTH and depth(rust) <= 4  # Triton selects: flat as it is
