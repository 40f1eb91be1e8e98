"""Test oracle: the op sequence and result types of `tileirdisasm` text.

Only what the reader is checked against is extracted: for every op, in printed (pre-)order, its
mnemonic and its result types. The printer hides region terminators without operands (an empty
`if` branch prints `{}` but holds a `yield`; a `for` without loop-carried values ends in a hidden
`continue`), so `reader_sequence` drops those from the reader's side.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tileport import toolchain
from tileport.tileir.model import Module, walk

_OPEN = "<([{"
_CLOSE = ">)]}"


def disasm_path() -> Path | None:
    return toolchain.tileirdisasm()


def disassemble(bytecode: Path) -> str:
    exe = disasm_path()
    assert exe is not None, "tileirdisasm not found"
    return subprocess.run([str(exe), str(bytecode)], check=True, capture_output=True, text=True).stdout


def _split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` where no bracket is open."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE and not (ch == ">" and i > 0 and text[i - 1] == "-"):
            depth -= 1
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _types(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return [t.strip() for t in _split_top(text, ",") if t.strip()]


_RESULTS = re.compile(r"^((?:%[\w#.-]+(?::\d+)?)(?:, %[\w#.-]+(?::\d+)?)*) = ")


def parse(text: str) -> list[tuple[str, list[str]]]:
    ops: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "}(" or line.startswith(("entry ", "func ", "global ", "//")):
            continue
        nres, rest = 0, line
        m = _RESULTS.match(line)
        if m:
            names = m.group(1).split(", ")
            nres = sum(int(n.split(":")[1]) if ":" in n else 1 for n in names)
            rest = line[m.end():]
        name = rest.split(" ", 1)[0]
        body = rest[len(name):].rstrip()
        if body.endswith("{"):
            body = body[:-1].rstrip()
        if nres == 0:
            ops.append((name, []))
            continue
        arrow = _split_top(body, "->")
        if len(arrow) > 1:
            types = _types(arrow[-1])
        else:
            sig = _split_top(body, " : ")
            types = _types(sig[-1]) if len(sig) > 1 else []
        # One printed type stands for all results (`%a, %b, %c = get_tile_block_id : tile<i32>`);
        # ops printing operand types too (`select`, `mmaf`) end with the result type.
        if len(types) == nres:
            results = types
        elif len(types) == 1:
            results = types * nres
        else:
            results = types[-1:]
        ops.append((name, results))
    return ops


def reader_sequence(module: Module) -> list[tuple[str, list[str]]]:
    out = []
    for f in module.functions:
        for op in walk(f):
            if op.name in ("yield", "continue") and not op.operands:
                continue
            out.append((op.name, [str(r.type) for r in op.results]))
    return out
