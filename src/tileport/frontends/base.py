"""What every frontend is: the interface the translator drives, and what the frontends share.

A frontend turns one source file into the kernel model (`tileport.model`): one `Kernel` per entry,
specialized for the configurations in use (`KernelConfig`), with a located diagnostic for each kernel
it cannot translate. It names the passes its kernels need before emission (passes that reproduce its
own compiler's IR run for it alone) and, when its language has a compiler of its own, how to capture
that compiler's reference Tile IR for a configuration (stage A of the pipeline diffs against it).
Frontends know no target: identifiers are made with the `Naming` the emitter supplies.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from tileport.diagnostics import Diagnostic
from tileport.frontends.imports import Resolver
from tileport.model.ir import Kernel, KernelModule
from tileport.model.naming import Naming


@dataclass(frozen=True)
class KernelConfig:
    """What the source does not say: one mapping per configuration in use.

    Each configuration maps array and scalar parameters to a dtype name ("f16", "i32", ...) and
    constant parameters to a value. `ranks` gives array ranks when they are known from outside.
    `pinned` fixes constants to literals (literal-specialized entries). `runtime` names constants that
    become typed runtime parameters: no values are known and they cannot stay const generics. `generic`
    names int constants that stay const generics although the kernel compares them (no values are known):
    the comparison is computed from the const generics. `launch_options` are the options of the kernel's
    recorded launches beside its arguments (Triton's num_warps, num_stages, ...; an autotuned launch records
    the configuration the autotuner chose).
    """

    configs: tuple[Mapping[str, Any], ...] = ()
    ranks: Mapping[str, int] = field(default_factory=dict)
    pinned: Mapping[str, Any] = field(default_factory=dict)
    runtime: frozenset[str] = frozenset()
    generic: frozenset[str] = frozenset()
    launch_options: tuple[Mapping[str, Any], ...] = ()


@dataclass
class Translation:
    """Result of a frontend on one file: kernels (one per entry) and per-kernel diagnostics."""

    module: KernelModule
    diagnostics: list[Diagnostic]


# A pass rewrites one kernel in place; it makes new identifiers with the target's naming.
Pass = Callable[[Kernel, Naming], Any]


class Frontend(Protocol):
    """One source language."""

    name: str  # "cutile", ...
    passes: Sequence[Pass]  # run in this order on every kernel the frontend produced
    # The language's own compiler whose Tile IR export of a configuration is the reference ("cuda.tile";
    # `tileport.capture` runs it on the CPU), None when the language has no Tile IR compiler (the port is
    # then proven against the source kernel on the GPU only).
    reference_compiler: str | None

    def accepts(self, path: str, tree: ast.Module) -> bool:
        """Whether the file (its parsed AST: nothing of it runs) is written in this language."""

    def parse(self, path: str, configs: Mapping[str, KernelConfig] | None, only: Sequence[str] | None,
              naming: Naming, resolver: Resolver | None = None) -> Translation:
        """Every kernel of `path` (those in `only`), one `Kernel` per specialized entry. Names the file
        imports from other modules are read through `resolver` (`frontends.imports`: by default relative
        imports only, or the package's resolver while one is active)."""

