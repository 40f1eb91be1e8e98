"""The concrete signature a kernel's Tile IR is captured for, on both sides of an IR diff."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Capture:
    """A concrete signature for Tile IR capture on CPU (no tensors needed).

    `arrays` maps array parameters to (dtype name, rank), e.g. {"x": ("float16", 2)}; `scalars` maps
    runtime scalar parameters to a dtype name ("int32", "float32"); `constants` gives every
    `ct.Constant` parameter its value. Arrays are captured contiguous (last stride 1) and 16-byte
    aligned on both sides.
    """

    kernel: str
    arrays: Mapping[str, tuple[str, int]]
    scalars: Mapping[str, str] = field(default_factory=dict)
    constants: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        dts = sorted({dt for dt, _ in self.arrays.values()})
        consts = ",".join(f"{k}={v}" for k, v in sorted(self.constants.items()))
        return f"{self.kernel}[{'/'.join(dts)}]({consts})"
