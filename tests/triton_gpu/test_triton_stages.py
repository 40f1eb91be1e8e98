"""Stages D and E for a Triton source file, on the CPU: the launch evidence is keyed and fingerprinted
with the Triton harness, its timing is graded against the Triton kernel (the only reference), and E's
report shows the Triton column."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tileport.launches import parse_spec
from tileport.ops.triton_kernels import CORPUS
from tileport.pipeline import stage_d, stage_e
from tileport.pipeline.evidence import grade_performance

REPO = Path(__file__).resolve().parents[2]


def _ctx(path: Path, kernel: str):
    launches = parse_spec({"format": "tileport-launches", "version": 1, "launches": [
        {"framework": "triton", "kernel": kernel, "file": str(path), "grid": [1], "args": []}]})
    target = SimpleNamespace(path=path, kernel=kernel, source_text=path.read_text(), launches=launches)
    return SimpleNamespace(target=target, kernel=kernel)


def test_launch_identity_of_a_triton_kernel_includes_the_triton_harness(tmp_path):
    softmax = next(k for k in CORPUS if k.kernel == "softmax_kernel")
    key, fp, comps = stage_d.launch_identity(_ctx(softmax.path, softmax.kernel), {"crate": str(tmp_path)})
    assert key == "launch:softmax.softmax_kernel" and comps["triton harness"] and len(fp) == 24
    cutile = REPO / "src" / "tileport" / "ops" / "kernels" / "softmax.py"
    _, fp2, comps2 = stage_d.launch_identity(_ctx(cutile, "softmax_gather_kernel"), {"crate": str(tmp_path)})
    assert "triton harness" not in comps2 and fp2 != fp
    assert stage_d.is_triton(_ctx(softmax.path, softmax.kernel)) and not stage_d.is_triton(_ctx(cutile, "x"))


def test_triton_timings_are_graded_against_the_triton_kernel():
    records = [{"op": "launch:k.k", "dtype": "float16", "shape": [8], "times_us": {"triton": 10.0, "cutile-rs": 10.4}},
               {"op": "launch:k.k", "dtype": "float32", "shape": [8], "times_us": {"triton": 20.0, "cutile-rs": 21.0}}]
    g = grade_performance(records)
    assert g["reference_backend"] == "triton" and g["verdict"] == "DONE"
    assert abs(g["geomean_ratio"] - (1.04 * 1.05) ** 0.5) < 1e-6
    slow = grade_performance([{**records[0], "times_us": {"triton": 10.0, "cutile-rs": 12.0}}])
    assert slow["verdict"] == "INVESTIGATE"


def test_performance_report_has_the_triton_column(tmp_path):
    g = grade_performance([{"op": "k", "dtype": "bfloat16", "shape": [4, 8],
                            "times_us": {"triton": 10.0, "cutile-rs": 9.0}}])
    stage_e._report(tmp_path / "p.md", "DONE", g["reason"], "launch:k.k", g, {})
    text = (tmp_path / "p.md").read_text()
    assert "| dtype | shape | cutile-rs µs | Triton µs | rs/ref |" in text
    assert "| bfloat16 | 4x8 | 9.0 | 10.0 | 0.900 |" in text
    assert "geomean_ratio=0.9000" in text
