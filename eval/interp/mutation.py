"""The entry point for mutation suites: does a (mutated) port compute what the reference does?"""

from __future__ import annotations

from pathlib import Path

from tileport.ops.spec import Capture
from tileport.tileir.interp.differential import DifferentialReport, run_pair
from tileport.tileir.model import Module

from .corpus import problems


def outputs_differ(reference: Module, port: Module, capture: Capture, kernel_file: str | Path, *,
                   port_extra_args: dict[int, tuple] | None = None, seed: int = 0,
                   tolerance: tuple[float, float] = (1e-5, 1e-6)) -> DifferentialReport:
    """Run the reference module and the port module (model objects, e.g. a mutated copy) on each
    of the capture's small problems; the first report that does not AGREE is returned (else the
    last). `report.differs` is the answer; `report.verdict == "ERROR"` means the run says nothing
    (the reference failed, or an op is outside the interpreter's subset).

    `port_extra_args`: the port entry's leading launcher arguments
    (`tileport.capture.generated_arg_roles(lib, capture, port_module)`); `kernel_file`: the kernel file name
    under ops/kernels (the op spec's `kernel_file`) or a path.
    """
    report = None
    for prob in problems(capture, kernel_file, seed, tolerance):
        report = run_pair(reference, port, prob, port_extra_args)
        if report.verdict != "AGREE":
            break
    return report
