"""Every corpus kernel run by the Tile IR interpreter on small inputs, reference and port.

- the reference (cuTile Python's export) against a NumPy reference, and its canonicalized form
  (tokens stripped) against itself;
- (cargo) the port (the cutile-rs cdylib's IR export) against the reference: AGREE, within the
  op spec's dtype tolerance (exactly for copy-like kernels); and the comparison can fail: planted
  defects in the port's IR (a removed loop, swapped operands, another padding value, an f16
  accumulator) are reported as DIFFER.
"""

from __future__ import annotations

import time

import pytest

import tir_mutations
from eval.interp import outputs_differ, problems
from sampling import first_of_each, sweep
from tileport.capture import generated_arg_roles, generated_bytecode
from tileport.ops.capture_ref import reference_bytecode
from tileport.ops.specs import all_specs
from tileport.tileir import canonicalize, read_module
from tileport.tileir.interp import differential, run_pair
from tileport.tileir.model import clone_module, walk

SECONDS_PER_CAPTURE = 5.0  # interpreter time of both sides; the corpus takes ~0.1 s on average


def _captures():
    seen, out = set(), []
    for spec in all_specs().values():
        for cap in spec.captures:
            key = (spec.kernel_file, cap.label)
            if key not in seen:
                seen.add(key)
                out.append(pytest.param(spec, cap, id=f"{spec.kernel_file[:-3]}:{cap.label}"))
    return out


CAPTURES = _captures()
# The interpreter sweeps run for the first capture of each kernel; every capture with --slow.
CAPTURE_SAMPLE = sweep(CAPTURES, first_of_each(lambda p: p.values[1].kernel))
_REFERENCE: dict[tuple, bytes] = {}


def _reference(spec, cap) -> bytes:
    key = (spec.kernel_file, cap.label)
    if key not in _REFERENCE:
        _REFERENCE[key] = reference_bytecode(spec, cap)
    return _REFERENCE[key]


def _problems(spec, cap):
    """The capture's problems at the tolerance of its first array of an op dtype (a kernel of integer arrays
    only is compared exactly: eval.interp.corpus.EXACT)."""
    dtype = next((dt for dt, _ in cap.arrays.values() if dt in spec.tolerances), spec.dtypes[0])
    tol = spec.tolerances[dtype]
    return problems(cap, spec.kernel_file, tolerance=(tol.rtol, tol.atol))


def test_every_corpus_kernel_has_a_problem():
    assert len(CAPTURES) >= 45
    kernels = {p.values[1].kernel for p in CAPTURES}
    assert len(kernels) >= 17
    from eval.interp.corpus import PROBLEMS
    assert not kernels - set(PROBLEMS), f"captured kernels without an interpreter problem: {kernels - set(PROBLEMS)}"


@pytest.mark.parametrize("spec,cap", CAPTURE_SAMPLE)
def test_reference_matches_numpy(spec, cap):
    module = read_module(_reference(spec, cap))
    for prob in _problems(spec, cap):
        report = run_pair(module, module, prob)
        assert report.verdict == "AGREE", report.summary()
        assert report.numpy, f"{cap.label}: no NumPy reference to compare with"
        bad = [c for c in report.numpy if not c.agree]
        assert not bad, bad
        assert report.reference.seconds < SECONDS_PER_CAPTURE
        # canonicalized (tokens stripped, CSE, DCE): the same program, the same outputs
        canonical = run_pair(module, canonicalize(module), prob)
        assert canonical.verdict == "AGREE", canonical.summary()


@pytest.mark.cargo
@pytest.mark.parametrize("spec,cap", CAPTURE_SAMPLE)
def test_port_agrees_with_reference(spec, cap, library):
    _, gen = generated_bytecode(library, cap)
    for prob in _problems(spec, cap):
        t0 = time.perf_counter()
        report = differential(_reference(spec, cap), gen, prob,
                              port_extra_args=generated_arg_roles(library, cap, read_module(gen)))
        assert report.verdict == "AGREE", report.summary()
        assert all(c.agree for c in report.port_numpy), report.port_numpy
        assert time.perf_counter() - t0 < 2 * SECONDS_PER_CAPTURE


def _swap_first_subf(m):
    m = clone_module(m)
    op = next(o for o in walk(m.entries[0]) if o.name == "subf")
    op.operands = op.operands[::-1]
    return m


PLANTED = [
    ("softmax.py", "softmax_tma_kernel[float16]", tir_mutations.change_padding),
    ("softmax.py", "softmax_gather_kernel[float32]", _swap_first_subf),
    ("rms_norm.py", "rms_norm_kernel[bfloat16]", tir_mutations.remove_loop),
    ("matmul.py", "matmul_kernel[float16]", tir_mutations.mma_accumulator_f16),
]


def _capture(kernel_file: str, label_prefix: str):
    for param in CAPTURES:
        spec, cap = param.values
        if spec.kernel_file == kernel_file and cap.label.startswith(label_prefix):
            return spec, cap
    raise LookupError(label_prefix)


@pytest.mark.cargo
@pytest.mark.parametrize("kernel_file,label,mutation", PLANTED, ids=[p[2].__name__ for p in PLANTED])
def test_planted_defect_in_the_port_differs(kernel_file, label, mutation, library):
    spec, cap = _capture(kernel_file, label)
    reference = read_module(_reference(spec, cap))
    port = read_module(generated_bytecode(library, cap)[1])
    roles = generated_arg_roles(library, cap, port)
    tol = spec.tolerances[next(iter(cap.arrays.values()))[0]]
    unchanged = outputs_differ(reference, port, cap, kernel_file, port_extra_args=roles,
                               tolerance=(tol.rtol, tol.atol))
    assert unchanged.verdict == "AGREE", unchanged.summary()
    mutated = outputs_differ(reference, mutation(port), cap, kernel_file, port_extra_args=roles,
                             tolerance=(tol.rtol, tol.atol))
    assert mutated.differs, mutated.summary()


@pytest.mark.cargo
def test_cli_writes_reports_and_exit_status(tmp_path, library, monkeypatch):
    import json

    from tileport.runtime import library as library_module
    from eval.interp.__main__ import main
    # The session's loaded library, never a cargo run: in CI a cargo run here rebuilt the crate (312 s; other
    # tests build crates into the same target directory after the fixture's build).
    loads = []
    monkeypatch.setattr(library_module, "load", lambda **kw: loads.append(kw) or library)
    out = tmp_path / "interp.json"
    assert main(["--kernel", "vector_add_kernel[float16]", "--json", str(out), "--profile", "dev"]) == 0
    assert loads == [{"profile": "dev"}]
    reports = json.loads(out.read_text())["reports"]
    assert [r["verdict"] for r in reports] == ["AGREE"]
    assert main(["--kernel", "no such kernel"]) == 2


def test_reports_note_the_approximations_taken():
    spec, cap = _capture("softmax.py", "softmax_gather_kernel[float32]")
    module = read_module(_reference(spec, cap))
    report = run_pair(module, module, _problems(spec, cap)[0])
    assert "reference: exp rounding_mode=approx (computed exactly) x1" in report.notes
    assert "port: divf flush_to_zero (applied) x1" in report.notes
