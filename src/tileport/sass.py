"""Machine code (SASS) of two cubins, compared instruction by instruction on the CPU.

`disassemble` runs `nvdisasm -c` (code sections only) and `cuobjdump -res-usage` (registers per
thread); `compare` matches the two instruction streams after normalization:

| in the listing                        | becomes            | why                                   |
|---------------------------------------|--------------------|---------------------------------------|
| `/*0a40*/` instruction address        | dropped            | layout, not behaviour                 |
| `R17`, `UR4`, `P2`, `UP1`, `B0`       | `R`, `UR`, `P`, ...| register allocation may differ        |
| `` `(.L_x_3) `` branch target         | `<+5>` (relative)  | labels are numbered per file          |
| kernel symbol (`*_Kt2_A1f32...`)      | `<sym>`            | the two sides mangle names apart      |

Everything else (opcodes with modifiers, immediates, constant-bank offsets, predicates) must match for
`same`. `same_except_parameter_offsets` also ignores the offsets into constant bank 0 (`c[0x0][0x220]`),
where the kernel parameters live: it separates "the same code reading a differently laid out parameter
list" (a port with extra launcher-filled arguments) from a different program.
A tool that is missing, fails or prints no instruction raises `SassError`: the comparison then
fails; it never reports two empty listings as identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

# A tiny kernel (stores 42) for `probe`: ptxas compiles it in milliseconds, nvdisasm must list STG and EXIT.
PROBE_PTX = """.version 8.0
.target {arch}
.address_size 64
.visible .entry tileport_probe(.param .u64 out)
{{
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], {value};
	ret;
}}
"""
PROBE_OPCODES = ("STG", "EXIT")
DISASM_TIMEOUT_S = 300.0  # nvdisasm / cuobjdump on one cubin

_ADDRESS = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s*(.*?)\s*;?\s*$")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_SYMBOL = re.compile(r"^\s*\.type\s+([\w.$]+),@function")
_REGISTER = re.compile(r"\b(UR|R|UP|P|B)\d+\b")
_PARAMETER = re.compile(r"c\[0x0\]\[0x[0-9a-f]+\]")
_REGCOUNT = re.compile(r"Function ([\w.$]+):\s*\n\s*REG:(\d+)")


class SassError(RuntimeError):
    """Disassembly did not produce machine code (tool missing, failed, or listed no instruction)."""


@dataclass(frozen=True)
class Instruction:
    text: str  # as nvdisasm prints it, without the address
    normalized: str


@dataclass(frozen=True)
class Sass:
    functions: tuple[str, ...]
    instructions: tuple[Instruction, ...]
    registers: int  # the largest per-thread count over the cubin's functions


def _run(cmd: list[str], what: str) -> str:
    try:
        proc = run_tool(cmd, DISASM_TIMEOUT_S)
    except (OSError, ToolTimeout) as e:
        raise SassError(f"{what} could not run: {e}") from None
    if proc.returncode != 0:
        raise SassError(f"{what} exited with {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return proc.stdout


def parse(listing: str) -> tuple[tuple[str, ...], tuple[Instruction, ...]]:
    """Functions and normalized instructions of an `nvdisasm -c` listing."""
    functions = tuple(m.group(1) for m in map(_SYMBOL.match, listing.splitlines()) if m)
    texts: list[str] = []
    labels: dict[str, int] = {}  # label -> index of the instruction it precedes
    for line in listing.splitlines():
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = len(texts)
            continue
        m = _ADDRESS.match(line)
        if m and m.group(2) and not m.group(2).startswith("."):  # `.byte` etc. are data, not code
            texts.append(m.group(2).rstrip(" ;"))
    symbols = re.compile("|".join(re.escape(f) for f in sorted(functions, key=len, reverse=True))) \
        if functions else None
    out = []
    for i, text in enumerate(texts):
        norm = _TARGET.sub(lambda t: f"<{labels[t.group(1)] - i:+d}>" if t.group(1) in labels else "<label>", text)
        norm = _REGISTER.sub(r"\1", norm)
        if symbols is not None:
            norm = symbols.sub("<sym>", norm)
        out.append(Instruction(text, re.sub(r"\s+", " ", norm)))
    return functions, tuple(out)


def register_count(usage: str) -> int:
    """Largest `REG:n` over the functions of a `cuobjdump -res-usage` listing."""
    counts = [int(n) for _, n in _REGCOUNT.findall(usage)]
    if not counts:
        raise SassError("cuobjdump -res-usage reported no function")
    return max(counts)


def disassemble(cubin: Path, nvdisasm: Path | None, cuobjdump: Path | None) -> Sass:
    if nvdisasm is None:
        raise SassError("nvdisasm not found (pip install 'nvidia-cuda-nvdisasm==13.4.92', or: bash scripts/setup.sh)")
    if cuobjdump is None:
        raise SassError("cuobjdump not found (pip install 'nvidia-cuda-cuobjdump==13.4.92')")
    functions, instructions = parse(_run([str(nvdisasm), "-c", str(cubin)], "nvdisasm"))
    if not instructions:
        raise SassError(f"nvdisasm listed no instruction for {cubin.name}")
    registers = register_count(_run([str(cuobjdump), "-res-usage", str(cubin)], "cuobjdump -res-usage"))
    return Sass(functions, instructions, registers)


def _first_difference(ref: Sass, port: Sass, key=lambda text: text) -> dict | None:
    for i in range(max(len(ref.instructions), len(port.instructions))):
        r = ref.instructions[i] if i < len(ref.instructions) else None
        p = port.instructions[i] if i < len(port.instructions) else None
        if r is None or p is None or key(r.normalized) != key(p.normalized):
            return {"index": i, "reference": r.text if r else "<end>", "port": p.text if p else "<end>"}
    return None


def compare(ref: Sass, port: Sass) -> dict:
    """Same instruction stream (after normalization)? Else the first differing instruction."""
    first = _first_difference(ref, port)
    same_code = first is None or _first_difference(ref, port, lambda t: _PARAMETER.sub("c[0x0][param]", t)) is None
    return {"same": first is None, "same_except_parameter_offsets": same_code,
            "registers": [ref.registers, port.registers],
            "instructions": [len(ref.instructions), len(port.instructions)], "first_difference": first}


def listing(s: Sass) -> str:
    """One instruction per line, as compared (for the artifacts)."""
    return "".join(f"{i:5d}  {ins.text}\n" for i, ins in enumerate(s.instructions))


def probe_cubin(ptxas: Path, dst: Path, arch: str = "sm_90", value: int = 42) -> Path:
    """Compile the probe kernel (see PROBE_PTX) to `dst` with ptxas."""
    ptx = dst.with_suffix(".ptx")
    ptx.write_text(PROBE_PTX.format(arch=arch, value=value))
    _run([str(ptxas), "-arch", arch, str(ptx), "-o", str(dst)], "ptxas")
    return dst


def probe(ptxas: Path, nvdisasm: Path | None, cuobjdump: Path | None, work: Path) -> Sass:
    """Disassemble the probe kernel and require its known instructions (for `tileport doctor`)."""
    s = disassemble(probe_cubin(ptxas, work / "probe.cubin"), nvdisasm, cuobjdump)
    opcodes = {next(t for t in ins.text.split() if not t.startswith("@")) for ins in s.instructions}
    missing = [op for op in PROBE_OPCODES if not any(o.startswith(op) for o in opcodes)]
    if missing:
        raise SassError(f"nvdisasm listing of the probe kernel lacks {', '.join(missing)}")
    return s
