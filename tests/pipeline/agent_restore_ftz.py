#!/usr/bin/env python3
"""A scripted external agent for the pipeline's agent-protocol tests (a real program, not a mock).

Invoked by a repair stage as `<this script> [--vandalize] <prompt.md>`, with $TILEPORT_PROMPT and
$TILEPORT_WORKDIR set (docs/pipeline.md, "External agents"). It reads the prompt's IR-diff findings,
and for every `math/flush_to_zero` finding restores `ftz::Enabled` on the line of the generated
source the finding points at (`gen <file>.rs:<line>:<col>`) in `kernel.rs` of the work directory.
With --vandalize it instead renames the kernel's entry functions (the validator must reject that).
As a D(2) agent (--fix-symbol) it reads the C symbol the failing verdict expects and renames the
launcher's `extern "C" fn` in `ffi.rs` to it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    vandalize = "--vandalize" in argv
    args = [a for a in argv if not a.startswith("--")]
    prompt = Path(args[0] if args else os.environ["TILEPORT_PROMPT"]).read_text()
    assert Path(os.environ["TILEPORT_PROMPT"]).read_text() == prompt, "argv[1] and $TILEPORT_PROMPT differ"
    if "--fix-symbol" in argv:
        assert os.environ["TILEPORT_STAGE"] == "D", os.environ["TILEPORT_STAGE"]
        ffi = Path(os.environ["TILEPORT_WORKDIR"]) / "ffi.rs"
        want = re.search(r"declares the C symbol \((\w+)\)", prompt).group(1)
        text, n = re.subn(r'extern "C" fn \w+\(', f'extern "C" fn {want}(', ffi.read_text(), count=1)
        ffi.write_text(text)
        print(f"renamed {n} launcher(s) to {want}")
        return 0
    kernel = Path(os.environ["TILEPORT_WORKDIR"]) / "kernel.rs"
    text = kernel.read_text()
    if vandalize:
        kernel.write_text(re.sub(r"pub (unsafe )?fn \w+", r"pub \1fn vandalized", text))
        print("renamed every entry to `vandalized`")
        return 0
    lines = text.splitlines(keepends=True)
    targets = set()
    for row in prompt.splitlines():
        if "flush_to_zero" in row:
            targets |= {int(m.group(1)) for m in re.finditer(r"gen [\w./-]+\.rs:(\d+):\d+", row)}
    fixed = []
    for n in sorted(targets):
        if 0 < n <= len(lines) and "ftz::Disabled" in lines[n - 1]:
            lines[n - 1] = lines[n - 1].replace("ftz::Disabled", "ftz::Enabled")
            fixed.append(n)
    kernel.write_text("".join(lines))
    print(f"flush_to_zero findings at kernel.rs lines {sorted(targets)}; restored ftz::Enabled on {fixed}")
    return 0 if fixed else 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
