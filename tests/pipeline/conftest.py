"""Helpers of the pipeline tests: run the real pipeline (quietly) on targets, read artifacts back."""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

HERE = Path(__file__).parent
DATA = HERE / "data"
FIXTURES = HERE / "fixtures"


def run(targets, out: Path, **options):
    from tileport.pipeline import Options
    from tileport.pipeline.batch import run_batch
    opts = Options(out=out, **options)
    outcomes, session = run_batch(targets, opts, Console(file=io.StringIO(), width=200), progress=False)
    return {o.key: o for o in outcomes}, session


def verdict(out: Path, key: str, stage_dir: str) -> dict:
    return json.loads((out / key / stage_dir / "verdict.json").read_text())


def route(outcome) -> list[str]:
    return [r["stage"] + ("" if r["attempt"] == 1 else f"({r['attempt']})") + " " + r["verdict"]
            + (f"/{r['fail_class']}" if r.get("fail_class") else "") + (f"/{r['owner']}" if r.get("owner") else "")
            for r in outcome.route]


@pytest.fixture
def pipeline():
    return run


AGENT = [sys.executable, str(HERE / "agent_restore_ftz.py")]


# ---- planted translator defects (Options.planted): what a repair attempt must remove

@dataclass(frozen=True)
class Plant:
    """A defect planted into B(1)'s kernel text. `ftz` (ftz::Enabled -> ftz::Disabled) and `tma`
    (tma::Enabled -> tma::Disabled) touch the device part only; `ffi` renames the launcher's C symbol (a
    host defect); `compile` appends code rustc rejects."""

    name: str

    def apply(self, text: str) -> tuple[str, str]:
        from tileport.pipeline.stage_b import split_module
        device, host = split_module(text)
        if self.name in ("ftz", "tma"):
            old, new = f"{self.name}::Enabled", f"{self.name}::Disabled"
            n = device.count(old)
            return device.replace(old, new) + host, f"{n} x `{old}` -> `{new}`" if n else f"no `{old}` to change"
        if self.name == "ffi":
            new_host, n = re.subn(r'(extern "C" fn tileport_\w+)\(', r"\1_planted(", host, count=1)
            return device + new_host, f"{n} C symbol(s) renamed with suffix `_planted`"
        if self.name == "compile":
            rejected = '\n#[allow(dead_code)]\nfn planted_defect() -> i32 {\n    "not an i32"\n}\n'
            return text + rejected, "type error appended"
        raise ValueError(f"unknown planted defect {self.name!r} (ftz, tma, ffi, compile)")


@pytest.fixture
def plant():
    """plant(kernel, defect) -> the `planted=` option of a pipeline run."""
    return lambda kernel, defect: {kernel: Plant(defect)}
