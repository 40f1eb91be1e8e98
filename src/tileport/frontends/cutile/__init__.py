"""The cuTile Python frontend: `@ct.kernel` functions (cuda.tile 1.7.0) -> the kernel model.

- `scan`: the module scan (cuda.tile imports, constants, helpers, closures, imported modules);
- `lowerer`: configurations and specialization, the kernel visitor `KernelLowerer` (scopes, entry), whose
  methods per Python construct are grouped in `control` (statements, helper inlining) and `expressions`;
- `calls`: one handler per `ct.<fn>` (registered in `calls.HANDLERS`), one module per construct family,
  typed with the model's builder;
- `dtypes`: cuTile's dtype names and its implicit promotion (given to the builder);
- `values`: compile-time values and constant folding (the shared `frontends.liveness` says which names a
  block reads and rebinds).

`FRONTEND` is what the translator drives (`tileport.frontends.base.Frontend`).
"""

from __future__ import annotations

import ast
from typing import Mapping, Sequence

from tileport.frontends.base import KernelConfig, Translation
from tileport.frontends.imports import Resolver
from tileport.frontends.cutile.lowerer import classify_params, translate_file
from tileport.frontends.cutile.scan import CT_MODULE, ScannedModule, loc_of, scan_module
from tileport.model.naming import Naming
from tileport.passes.fma import fuse_fma
from tileport.passes.hoist import hoist_invariants
from tileport.passes.intdiv import expand_int_division
from tileport.passes.pointers import lower_pointers
from tileport.passes.tokens import order_memory


class CuTileFrontend:
    """`@ct.kernel` functions of files that import cuda.tile."""

    name = "cutile"
    # fuse_fma and order_memory reproduce what cuTile Python's compiler does (its fma contraction and its
    # memory-token order), so that the port's Tile IR matches the reference op for op.
    passes = (lower_pointers, expand_int_division, fuse_fma, hoist_invariants, order_memory)
    reference_compiler = "cuda.tile"  # its own export, on the CPU

    def accepts(self, path: str, tree: ast.Module) -> bool:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == CT_MODULE for a in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and ((node.module or "").startswith(CT_MODULE) or (
                    node.module == "cuda" and any(a.name == "tile" for a in node.names))):
                return True
        return False

    def parse(self, path: str, configs: Mapping[str, KernelConfig] | None, only: Sequence[str] | None,
              naming: Naming, resolver: Resolver | None = None) -> Translation:
        return translate_file(path, configs, only, naming, resolver)


FRONTEND = CuTileFrontend()


__all__ = ["FRONTEND", "KernelConfig", "Translation", "ScannedModule", "classify_params", "loc_of",
           "scan_module", "translate_file"]
