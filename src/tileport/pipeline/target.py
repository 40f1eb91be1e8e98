"""A pipeline target: one kernel of one file, and what the operator library knows about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tileport.frontends.base import KernelConfig
from tileport.ops.spec import Capture, OpSpec


@dataclass
class Target:
    """One kernel of one file, and what the library knows about it."""

    key: str                       # directory name under --out
    kernel: str
    path: Path                     # the cuTile Python file (absolute)
    configs: dict[str, KernelConfig]  # kernel -> translator configuration, for every kernel of the file
    captures: list[Capture]        # the configurations whose IR is captured (may be empty: A decides)
    config_source: str             # "spec:<ops>" | "config:<file>" | "default"
    ops: list[str] = field(default_factory=list)  # library ops that launch this kernel
    primary_op: str | None = None  # the op whose benchmark grades the kernel (fewest kernels)
    library: bool = False          # the file is the library's kernel file (GPU harness runs its port)
    record_path: Callable[[str], str] | None = None  # source path as recorded in generated code
    config_entries: list[dict] | None = None  # --config configurations of this kernel (outside the library)
    launches: list = field(default_factory=list)  # LaunchRecords of this kernel (tileport.launches), for D/E
    launch_source: str = ""        # "spec:<file>" | "inferred" | "" (none)
    launch_missing: list = field(default_factory=list)  # what launch inference could not derive (Missing)

    @property
    def source_text(self) -> str:
        return self.path.read_text()

    @property
    def module(self) -> str:
        """The Rust module of the kernel's file (as `tileport translate` names it: `support.py` -> `support_`)."""
        from tileport.emit.rust.names import module_name
        return module_name(self.path.stem, set())


def primary_op(kernel: str, specs: dict[str, OpSpec], ops: list[str]) -> str | None:
    if not ops:
        return None

    def prefix(a: str, b: str) -> int:
        n = 0
        for x, y in zip(a, b):
            if x != y:
                break
            n += 1
        return n
    return min(ops, key=lambda op: (len(specs[op].kernels), -prefix(op, kernel), op))
