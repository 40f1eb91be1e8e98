"""A NumPy interpreter for the Tile IR subset of the corpus kernels, and differential runs.

Public API (docs/tileir.md, "Interpreter and differential runs"):

- `run_kernel(module, args, grid, extra_args=None) -> {array name: array}`
- `differential(ref_bytecode, gen_bytecode, problem, port_extra_args=None) -> DifferentialReport`
- `run_pair(reference_module, port_module, problem, port_extra_args=None) -> DifferentialReport`
- `Problem`: one run of a kernel (arguments, grid, outputs, tolerance); the corpus kernels' small
  problems and the mutation suites' entry point live in the evaluation harness (eval/interp)
- errors: `InterpError` and its kinds `UnsupportedOp`, `MemoryFault`, `ArgumentError`
"""

from .differential import Comparison, DifferentialReport, Problem, compare, differential, run_pair
from .errors import ArgumentError, InterpError, MemoryFault, UnsupportedOp
from .executor import Array, Scalar, run_kernel

__all__ = ["Array", "ArgumentError", "Comparison", "DifferentialReport", "InterpError", "MemoryFault",
           "Problem", "Scalar", "UnsupportedOp", "compare", "differential", "run_kernel", "run_pair"]
