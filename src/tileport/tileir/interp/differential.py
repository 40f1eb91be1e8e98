"""Differential runs: the reference and the port executed on the same inputs, outputs compared.

    report = differential(ref_bytecode, gen_bytecode, problem, port_extra_args=roles)
    report.verdict      # AGREE | DIFFER | ERROR
    report.differs      # True when the port computes something else (or faults) and the reference ran

Both sides run in this interpreter with the same rounding, so the port is held to one unit in the
last place of each output's dtype (`PORT_TOLERANCE`: room for a reassociated f32 expression, not for
a narrower accumulator); the NumPy reference (and a GPU run) to the op spec's tolerance
(`problem.rtol`, `problem.atol`).

DIFFER: an output differs beyond the tolerance (exactly, for problems marked exact), or the port
faults (an unmasked out-of-bounds access, a division by zero, a failed assert) where the reference
ran. ERROR: the reference itself could not run, or either side uses an op outside the interpreter's
subset (UnsupportedOp): nothing is concluded.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..model import Module, walk
from ..reader import read_module
from .errors import InterpError, UnsupportedOp
from .executor import Argument, run_kernel


@dataclass
class Problem:
    """One run of a kernel: arguments in the kernel's parameter order, the grid, the outputs."""
    kernel: str
    args: list[tuple[str, Argument]]
    grid: tuple[int, int, int]
    outputs: list[str]
    exact: bool = False
    rtol: float = 1e-5
    atol: float = 1e-6
    reference: dict[str, np.ndarray] = field(default_factory=dict)  # NumPy results, float64


# (rtol, atol) of port vs reference per output dtype; integer outputs compare exactly.
PORT_TOLERANCE = {"f32": (1e-5, 1e-6), "f64": (1e-12, 1e-15), "f16": (2 ** -10, 1e-6),
                  "bf16": (2 ** -7, 1e-6)}


@dataclass
class Comparison:
    """One output of one side against another (or against the NumPy reference)."""
    output: str
    agree: bool
    mismatches: int
    total: int
    max_abs_diff: float
    first_mismatch: list | None = None   # [index, expected, got]


@dataclass
class Side:
    seconds: float = 0.0
    error: str = ""
    error_type: str = ""


@dataclass
class DifferentialReport:
    kernel: str
    verdict: str = "ERROR"
    reference: Side = field(default_factory=Side)
    port: Side = field(default_factory=Side)
    notes: list[str] = field(default_factory=list)              # approximations taken, per side
    outputs: list[Comparison] = field(default_factory=list)     # port vs reference
    numpy: list[Comparison] = field(default_factory=list)       # reference vs NumPy, if given
    port_numpy: list[Comparison] = field(default_factory=list)  # port vs NumPy, if given

    @property
    def differs(self) -> bool:
        return self.verdict == "DIFFER"

    def summary(self, label: str | None = None) -> str:
        """One line: `label` (default: the kernel name), the verdict and why."""
        head = label or self.kernel
        if self.verdict == "ERROR":
            return f"{head}: ERROR {self.reference.error or self.port.error}"
        if self.port.error:
            return f"{head}: DIFFER (port faults: {self.port.error})"
        bad = [c for c in self.outputs if not c.agree]
        detail = "; ".join(f"{c.output}: {c.mismatches}/{c.total} differ, first {c.first_mismatch}"
                           for c in bad)
        return f"{head}: {self.verdict}" + (f" ({detail})" if detail else "")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value).__name__)


def compare(name: str, expected: np.ndarray, got: np.ndarray, *, exact: bool, rtol: float,
            atol: float) -> Comparison:
    """Elementwise: NaN only where NaN is expected; exact means the same value and sign."""
    e = np.asarray(expected, np.float64)
    g = np.asarray(got, np.float64)
    if e.shape != g.shape:
        return Comparison(name, False, e.size, e.size, float("inf"), [list(e.shape), list(g.shape)])
    nan_e, nan_g = np.isnan(e), np.isnan(g)
    with np.errstate(invalid="ignore"):
        if exact:
            close = (e == g) & (np.signbit(e) == np.signbit(g))
        else:
            close = np.isclose(g, e, rtol=rtol, atol=atol) | (e == g)  # e == g: equal infinities
    bad = ~np.where(nan_e | nan_g, nan_e & nan_g, close)
    with np.errstate(invalid="ignore"):
        diff = np.abs(e - g)
    finite = diff[np.isfinite(diff)]
    first = None
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        first = [list(index), float(e[index]), float(g[index])]
    return Comparison(name, not bad.any(), int(bad.sum()), int(e.size),
                      float(finite.max()) if finite.size else 0.0, first)


def _approximations(op) -> list[str]:
    found = []
    if op.attributes.get("rounding_mode") == "approx":
        found.append(f"{op.name} rounding_mode=approx (computed exactly)")
    if op.attributes.get("flush_to_zero"):
        found.append(f"{op.name} flush_to_zero (applied)")
    return found


def approximation_notes(module: Module, side: str) -> list[str]:
    """Where the interpreter's arithmetic may differ from the hardware's by a few ulp."""
    counts = Counter(note for f in module.entries for op in walk(f) for note in _approximations(op))
    return [f"{side}: {note} x{n}" for note, n in sorted(counts.items())]


def _run(module: Module, problem: Problem, extra_args, side: Side) -> dict[str, np.ndarray] | None:
    t0 = time.perf_counter()
    try:
        return run_kernel(module, problem.args, problem.grid, extra_args)
    except InterpError as e:
        side.error, side.error_type = str(e), type(e).__name__
        return None
    finally:
        side.seconds = round(time.perf_counter() - t0, 3)


def _against_numpy(expected: dict, got: dict, problem: Problem) -> list[Comparison]:
    return [compare(name, expected[name], got[name], exact=False, rtol=problem.rtol, atol=problem.atol)
            for name in problem.outputs if name in expected]


def _port_against_reference(ref_out: dict, port_out: dict, problem: Problem) -> list[Comparison]:
    elems = {name: arg.elem for name, arg in problem.args}
    out = []
    for name in problem.outputs:
        tol = PORT_TOLERANCE.get(elems[name])
        exact = problem.exact or tol is None
        rtol, atol = tol or (0.0, 0.0)
        out.append(compare(name, ref_out[name], port_out[name], exact=exact, rtol=rtol, atol=atol))
    return out


def run_pair(reference: Module, port: Module, problem: Problem,
             port_extra_args: dict[int, tuple] | None = None) -> DifferentialReport:
    """Both modules (model objects) on the problem's inputs; see the module docstring."""
    report = DifferentialReport(problem.kernel)
    report.notes = approximation_notes(reference, "reference") + approximation_notes(port, "port")
    ref_out = _run(reference, problem, None, report.reference)
    port_out = _run(port, problem, port_extra_args, report.port)
    if ref_out is None or report.port.error_type == UnsupportedOp.__name__:
        return report  # ERROR: nothing to compare against
    if problem.reference:
        report.numpy = _against_numpy(problem.reference, ref_out, problem)
    if port_out is None:
        report.verdict = "DIFFER"
        return report
    if problem.reference:
        report.port_numpy = _against_numpy(problem.reference, port_out, problem)
    report.outputs = _port_against_reference(ref_out, port_out, problem)
    report.verdict = "AGREE" if all(c.agree for c in report.outputs) else "DIFFER"
    return report


def differential(ref_bytecode: bytes, gen_bytecode: bytes, problem: Problem,
                 port_extra_args: dict[int, tuple] | None = None) -> DifferentialReport:
    """`run_pair` on Tile IR bytecode (cuTile Python's export and the port's)."""
    return run_pair(read_module(ref_bytecode), read_module(gen_bytecode), problem, port_extra_args)
