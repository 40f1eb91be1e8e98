"""Helpers of the pipeline tests: run the real pipeline (quietly) on targets, read artifacts back."""

from __future__ import annotations

import io
import json
import sys
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
