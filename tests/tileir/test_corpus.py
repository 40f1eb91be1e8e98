"""The product's reference corpus (src/tileport/ops/kernels, captures from the op specs).

Every capture is exported like the pipeline does (tileport.ops.capture_ref), read by the bytecode
reader, checked against tileirdisasm, and diffed: against itself and against its 13.3 export, which
must both PASS (no CRITICAL or WARN). Generated (cutile-rs) programs are diffed in test_pairs.py.
"""

from __future__ import annotations

import io

import pytest

import tir_oracle
from sampling import first_of_each, sweep
from tileport.capture.export import build_signature
from tileport.ops.capture_ref import reference_bytecode, reference_kernel
from tileport.ops.specs import all_specs
from tileport.tileir import diff, read_module
from tileport.tileir.rules import Severity

CAPTURES = [(spec, capture) for spec in all_specs().values() for capture in spec.captures]


def _id(item) -> str:
    spec, capture = item
    return f"{spec.name}:{capture.label}"


def _export_13_3(spec, capture) -> bytes:
    from cuda.tile.compilation import export_kernel
    kernel = reference_kernel(spec, capture.kernel)
    buf = io.BytesIO()
    export_kernel(kernel, [build_signature(kernel, capture)], buf, output_format="tileir_bytecode",
                  bytecode_version="13.3")
    return buf.getvalue()


# Exported, read and diffed for the first capture of each kernel; every capture with --slow.
CAPTURE_SAMPLE = sweep([pytest.param(*c, id=_id(c)) for c in CAPTURES], first_of_each(lambda p: p.values[1].kernel))


def test_corpus_is_not_empty():
    assert len(CAPTURES) >= 10


@pytest.mark.parametrize("spec,capture", CAPTURE_SAMPLE)
def test_corpus_capture(spec, capture, tmp_path):
    data = reference_bytecode(spec, capture)
    module = read_module(data)
    if tir_oracle.disasm_path() is not None:
        path = tmp_path / "ref.tileirbc"
        path.write_bytes(data)
        assert tir_oracle.reader_sequence(module) == tir_oracle.parse(tir_oracle.disassemble(path))
    assert diff(module, module).verdict == "PASS"
    report = diff(module, read_module(_export_13_3(spec, capture)))
    assert report.verdict == "PASS", report.to_markdown()
    assert all(f.severity == Severity.INFO for f in report.findings)
