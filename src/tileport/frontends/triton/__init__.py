"""Triton frontend: `@triton.jit` kernels (parsed with `ast`, never imported) -> the kernel model."""

from tileport.frontends.triton.frontend import Translation, is_triton_source, translate_file

__all__ = ["Translation", "is_triton_source", "translate_file"]
