"""Diff results: findings, the verdict, and their JSON / markdown / rich renderings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .rules import Owner, Severity, Status

SCHEMA_PATH = Path(__file__).with_name("diff_report.schema.json")
SCHEMA_VERSION = 1

_EXIT = {"PASS": 0, "PASS_WITH_NOTES": 2, "FAIL": 1}
_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARN: 1, Severity.INFO: 2}
_STYLE = {Severity.CRITICAL: "bold red", Severity.WARN: "yellow", Severity.INFO: "dim"}
# Categories in cause order (sorted_findings); unlisted categories come after these.
CAUSE_ORDER = ("memory_count", "memory_family", "index", "memory_semantics", "loop", "mma", "reduction",
               "precision", "dtype", "tile_shape", "partition_view", "math", "cast", "constant",
               "constant_arg", "argument", "memory_hints", "memory_order", "entry_hints", "function",
               "other_ops", "assume", "signature", "address", "shape_plumbing")
_VERDICT_STYLE = {"PASS": "bold green", "PASS_WITH_NOTES": "bold yellow", "FAIL": "bold red"}


@dataclass(frozen=True)
class Location:
    """Where a finding is: the function, the op's canonical one-line text and its source line."""
    function: str
    op: str
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "op": self.op, "source": self.source}


@dataclass
class Finding:
    category: str
    rule: str
    status: Status
    severity: Severity
    owner: Owner
    message: str
    action: str
    ref: Location | None = None
    gen: Location | None = None
    count: int = 1  # how many identical occurrences this finding stands for

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "rule": self.rule, "status": str(self.status),
                "severity": str(self.severity), "owner": str(self.owner), "message": self.message,
                "action": self.action, "count": self.count,
                "ref": self.ref.to_dict() if self.ref else None,
                "gen": self.gen.to_dict() if self.gen else None}


@dataclass
class DiffReport:
    reference: str
    generated: str
    target: str
    findings: list[Finding]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        severities = {f.severity for f in self.findings if f.status != Status.MATCH}
        if Severity.CRITICAL in severities:
            return "FAIL"
        if Severity.WARN in severities:
            return "PASS_WITH_NOTES"
        return "PASS"

    @property
    def exit_code(self) -> int:
        return _EXIT[self.verdict]

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in Severity}
        for f in self.findings:
            if f.status != Status.MATCH:
                out[str(f.severity)] += 1
        return out

    def sorted_findings(self) -> list[Finding]:
        """Differences first, by severity, then by cause: what the port does to memory (a missing
        or extra load/store, the wrong elements) leads, consequences such as a lost alignment
        assumption or a signature difference come last."""
        return sorted(self.findings, key=lambda f: (f.status == Status.MATCH, _SEVERITY_ORDER[f.severity],
                                                    _cause_rank(f.category), f.category, f.rule))

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "verdict": self.verdict, "exit_code": self.exit_code,
                "reference": self.reference, "generated": self.generated, "target": self.target,
                "counts": self.counts(), "stats": self.stats,
                "findings": [f.to_dict() for f in self.sorted_findings()]}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_markdown(self) -> str:
        c = self.counts()
        lines = [f"# Tile IR diff: {self.verdict}", "",
                 f"- reference: `{self.reference}`", f"- generated: `{self.generated}`",
                 f"- target: `{self.target}`",
                 f"- findings: {c['CRITICAL']} CRITICAL, {c['WARN']} WARN, {c['INFO']} INFO", ""]
        issues = [f for f in self.sorted_findings() if f.status != Status.MATCH]
        if issues:
            lines += ["| severity | status | category / rule | owner | finding | action |",
                      "|---|---|---|---|---|---|"]
            for f in issues:
                where = "".join(f"<br>{side}: `{_md(loc.op)}`" + (f" ({loc.source})" if loc.source else "")
                                for side, loc in (("ref", f.ref), ("gen", f.gen)) if loc)
                count = f" (×{f.count})" if f.count > 1 else ""
                lines.append(f"| {f.severity} | {f.status} | {f.category} / {f.rule} | {f.owner} | "
                             f"{_md(f.message)}{count}{where} | {_md(f.action)} |")
            lines.append("")
        matched = [f for f in self.findings if f.status == Status.MATCH]
        if matched:
            lines += ["## Matched categories", ""]
            lines += [f"- {f.category}: {_md(f.message)}" for f in matched]
            lines.append("")
        return "\n".join(lines)

    def __rich__(self) -> Group:
        c = self.counts()
        head = Text.assemble((self.verdict, _VERDICT_STYLE[self.verdict]),
                             f"  {c['CRITICAL']} critical, {c['WARN']} warn, {c['INFO']} info   ",
                             (f"{self.reference}  vs  {self.generated}  ({self.target})", "dim"))
        table = Table(show_lines=False, expand=True)
        for col in ("severity", "status", "category", "finding", "owner / action"):
            table.add_column(col, overflow="fold")
        for f in self.sorted_findings():
            if f.status == Status.MATCH:
                continue
            where = "".join(f"\n{side}: {_short(loc.op)}" + (f"  [{loc.source}]" if loc.source else "")
                            for side, loc in (("ref", f.ref), ("gen", f.gen)) if loc)
            count = f" (x{f.count})" if f.count > 1 else ""
            table.add_row(Text(str(f.severity), _STYLE[f.severity]), str(f.status),
                          f"{f.category}/{f.rule}", Text(f.message + count + where),
                          f"{f.owner}: {f.action}")
        matched = ", ".join(f.category for f in self.findings if f.status == Status.MATCH)
        parts: list[Any] = [Panel(head, title="tileport irdiff")]
        if table.row_count:
            parts.append(table)
        if matched:
            parts.append(Text(f"matched: {matched}", "green"))
        return Group(*parts)


def _cause_rank(category: str) -> int:
    return CAUSE_ORDER.index(category) if category in CAUSE_ORDER else len(CAUSE_ORDER)


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
