"""The Tile IR interpreter on the reference corpus: small problems per corpus kernel, differential runs
of every capture (`python3 -m eval.interp`) and the mutation suite's second checker.

- `problem(capture, kernel_file, seed=0, tolerance=..., variant=0) -> Problem` and
  `problems(...) -> list[Problem]` (small inputs per corpus kernel)
- `outputs_differ(reference_module, port_module, capture, kernel_file, ...) -> DifferentialReport`
  (for mutation suites: `.differs` says whether the mutated port computes something else)
"""

from .corpus import problem, problems, variants
from .mutation import outputs_differ

__all__ = ["outputs_differ", "problem", "problems", "variants"]
