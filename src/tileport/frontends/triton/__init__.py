"""Triton frontend: `@triton.jit` kernels (parsed with `ast`, never imported) -> the kernel model.

`FRONTEND` is what the translator drives (`tileport.frontends.base.Frontend`).
"""

from __future__ import annotations

import ast
from typing import Mapping, Sequence

from tileport.frontends.base import KernelConfig, Translation
from tileport.frontends.imports import Resolver, module_statements
from tileport.frontends.triton.frontend import is_triton_source, translate_file
from tileport.model.naming import Naming
from tileport.passes.fma import fuse_fma
from tileport.passes.hoist import hoist_invariants
from tileport.passes.intdiv import expand_int_division
from tileport.passes.pointers import lower_pointers
from tileport.passes.tokens import order_memory


class TritonFrontend:
    """`@triton.jit` functions of files that import triton."""

    name = "triton"
    # The same passes as cuTile's: the tokens pass also orders the memory accesses of in-place kernels
    # (a load and a later store of one array), which a Triton kernel relies on as much as a cuTile one.
    passes = (lower_pointers, expand_int_division, fuse_fma, hoist_invariants, order_memory)
    reference_compiler = None  # no Tile IR compiler: the port is proven against the Triton kernel on a GPU

    def accepts(self, path: str, tree: ast.Module) -> bool:
        imports_triton = any(  # guarded imports count (`try: import triton`)
            isinstance(n, ast.Import) and any(a.name.split(".")[0] == "triton" for a in n.names)
            or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "triton"
            for n in module_statements(tree.body, path))
        return imports_triton and is_triton_source(ast.unparse(tree))

    def parse(self, path: str, configs: Mapping[str, KernelConfig] | None, only: Sequence[str] | None,
              naming: Naming, resolver: Resolver | None = None) -> Translation:
        return translate_file(path, configs, only, naming=naming, resolver=resolver)


FRONTEND = TritonFrontend()

__all__ = ["FRONTEND", "Translation", "is_triton_source", "translate_file"]
