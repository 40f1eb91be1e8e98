"""Stage verdicts: the enums of the verdict protocol, the verdict record, and its JSON schema.

Every stage ends in one `Verdict`, written as `<out>/<kernel>/<stage dir>/verdict.json` and validated
against `verdict.schema.json` (the schema also pins which verdicts each stage may return, and which
extra fields a verdict must carry: the class of a D failure, the owner of a C FAIL_FIXABLE, the
geomean ratio of an E grade...). The enums are exactly the verdict
protocol of docs/pipeline.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("verdict.schema.json")
SCHEMA_VERSION = 1


class Stage(StrEnum):
    A = "A"  # analyze
    B = "B"  # device kernel
    C = "C"  # diagnose (on a D/E failure)
    D = "D"  # host/FFI + correctness
    E = "E"  # benchmark
    F = "F"  # residual performance (optional)


class AVerdict(StrEnum):
    PASS = "PASS"
    FAIL_FIXABLE = "FAIL_FIXABLE"
    BLOCKED = "BLOCKED"


class BVerdict(StrEnum):
    COMPILED = "COMPILED"
    FAIL_COMPILE = "FAIL_COMPILE"
    FAIL_FIXABLE = "FAIL_FIXABLE"
    BLOCKED = "BLOCKED"


class CVerdict(StrEnum):
    PASS = "PASS"
    PASS_WITH_NOTES = "PASS_WITH_NOTES"
    FAIL_FIXABLE = "FAIL_FIXABLE"
    FAIL_COMPILER_BUG = "FAIL_COMPILER_BUG"
    BLOCKED = "BLOCKED"


class DVerdict(StrEnum):
    ALL_PASS = "ALL_PASS"
    FAIL = "FAIL"
    FAIL_FIXABLE = "FAIL_FIXABLE"  # nothing to test on: the kernel has no launches (record them, or give a spec)
    BLOCKED = "BLOCKED"


class EVerdict(StrEnum):
    DONE = "DONE"
    INVESTIGATE = "INVESTIGATE"
    BLOCKED = "BLOCKED"


class FVerdict(StrEnum):
    FIXABLE = "FIXABLE"
    ALIGNED = "ALIGNED"
    BLOCKED = "BLOCKED"


VERDICTS: dict[Stage, type[StrEnum]] = {Stage.A: AVerdict, Stage.B: BVerdict, Stage.C: CVerdict,
                                        Stage.D: DVerdict, Stage.E: EVerdict, Stage.F: FVerdict}


class FailClass(StrEnum):
    """Who has to act on a D failure / a BLOCKED verdict (TileGym's fail_class / block_class)."""

    HOST = "host"      # launcher, C ABI, binding, launch plan: D repairs it
    KERNEL = "kernel"  # the device program: C diagnoses, B repairs
    ENV = "env"        # the environment cannot run the stage (no GPU, no toolchain, stale evidence)


# What a stage's verdict becomes when its validator rejects its own artifacts (after the one
# same-stage repair). D's artifacts are host-side, so a rejected D goes back to D (class host).
REJECTED: dict[Stage, tuple[str, str | None]] = {
    Stage.A: ("FAIL_FIXABLE", None), Stage.B: ("FAIL_FIXABLE", None), Stage.C: ("BLOCKED", None),
    Stage.D: ("BLOCKED", "host"), Stage.E: ("BLOCKED", None), Stage.F: ("BLOCKED", None),
}


@dataclass
class Verdict:
    """One stage run's outcome. `details` is stage-specific (see docs/pipeline.md)."""

    kernel: str
    stage: str
    verdict: str
    attempt: int = 1
    reason: str = ""
    fail_class: str | None = None  # D: host|kernel|env on FAIL/BLOCKED; any stage: env when BLOCKED by it
    owner: str | None = None       # C: kernel|host on FAIL_FIXABLE
    diagnostics: list[dict] = field(default_factory=list)  # translator diagnostics (file/line/col)
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> path relative to the kernel dir
    details: dict[str, Any] = field(default_factory=dict)
    inputs_hash: str = ""
    validator: dict[str, Any] = field(default_factory=lambda: {"ok": True, "errors": [], "repaired": False})
    agent: dict[str, Any] | None = None
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION

    @property
    def is_env_block(self) -> bool:
        return self.verdict == "BLOCKED" and self.fail_class == FailClass.ENV

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False, default=str) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def load(cls, path: Path) -> "Verdict":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def write(self, path: Path) -> None:
        errors = schema_errors(self.to_dict())
        if errors:
            raise ValueError(f"verdict of {self.kernel} {self.stage} does not match the schema: {errors}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)

    def one_line(self) -> str:
        extra = f" ({self.fail_class})" if self.fail_class else f" (owner {self.owner})" if self.owner else ""
        return f"{self.stage}{'' if self.attempt == 1 else f'({self.attempt})'} {self.verdict}{extra}"


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def schema_errors(doc: Any) -> list[str]:
    """Every schema violation of a verdict document, as 'path: message' lines (empty: valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]


def load_checked(path: Path) -> tuple[Verdict | None, list[str]]:
    """A verdict file read once: (the verdict, []) or (None, its schema errors; a missing or
    unparsable file is an error too)."""
    path = Path(path)
    if not path.is_file():
        return None, [f"{path.name}: missing"]
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        return None, [f"{path.name}: not JSON ({e})"]
    errors = [f"{path.name}: {e}" for e in schema_errors(doc)]
    return (None, errors) if errors else (Verdict.from_dict(doc), [])


def check_file(path: Path) -> list[str]:
    """Schema errors of a verdict file (a missing or unparsable file is an error too)."""
    return load_checked(path)[1]
