"""A NumPy interpreter for the Tile IR subset of the corpus kernels, and differential runs.

Public API (docs/tileir.md, "Interpreter and differential runs"):

- `run_kernel(module, args, grid, extra_args=None) -> {array name: array}`
- `differential(ref_bytecode, gen_bytecode, problem, port_extra_args=None) -> DifferentialReport`
- `run_pair(reference_module, port_module, problem, port_extra_args=None) -> DifferentialReport`
- `outputs_differ(reference_module, port_module, capture, kernel_file, ...) -> DifferentialReport`
  (for mutation suites: `.differs` says whether the mutated port computes something else)
- `problem(capture, kernel_file, seed=0, tolerance=..., variant=0) -> Problem` and
  `problems(...) -> list[Problem]` (small inputs per corpus kernel)
- errors: `InterpError` and its kinds `UnsupportedOp`, `MemoryFault`, `ArgumentError`
"""

from .corpus import Problem, problem, problems
from .differential import Comparison, DifferentialReport, compare, differential, run_pair
from .errors import ArgumentError, InterpError, MemoryFault, UnsupportedOp
from .executor import Array, Scalar, run_kernel
from .mutation import outputs_differ

__all__ = ["Array", "ArgumentError", "Comparison", "DifferentialReport", "InterpError", "MemoryFault",
           "Problem", "Scalar", "UnsupportedOp", "compare", "differential", "outputs_differ",
           "problem", "problems", "run_kernel", "run_pair"]
