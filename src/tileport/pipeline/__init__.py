"""The bounded porting pipeline: stages A-F with machine-checkable verdicts, a router with caps,
resumable runs, an external-agent protocol for the repair stages, batches and reports.

    tileport port FILE.py[::kernel] | --op NAME | --corpus DIR   [-j N] --out DIR ...

See docs/pipeline.md. Entry points: `resolve_targets(...)`, `batch.run_batch(targets, options)`,
`engine.run_kernel(session, target)`; the routing table is `routing.TABLE`.
"""

from __future__ import annotations

from pathlib import Path

from .context import Options, Session, Target
from .targets import TargetError, corpus_targets, dedupe_keys, file_targets, load_launches, op_targets, parse_spec


def resolve_targets(specs: list[str] | None = None, op: str | None = None, corpus: Path | None = None,
                    config: Path | None = None, launches: Path | None = None) -> list[Target]:
    """FILE[::kernel] arguments, --op NAME and --corpus DIR -> the kernels to port (in order);
    `launches`: a launch spec (tileport record) for kernels outside the operator library."""
    records = load_launches(launches)
    targets: list[Target] = []
    for s in specs or []:
        path, kernel = parse_spec(s)
        targets += file_targets(path, kernel, config, ops_filter=[op] if op else None, launches=launches,
                                spec_records=records)
    if op and not specs:
        targets += op_targets(op)
    if corpus is not None:
        targets += corpus_targets(corpus, config, launches)
    if not targets:
        raise TargetError("nothing to port: give FILE.py[::kernel], --op NAME or --corpus DIR")
    return dedupe_keys(targets)


__all__ = ["Options", "Session", "Target", "TargetError", "resolve_targets"]
