"""The SDPA comparison's arithmetic and its refusal to run without a GPU (the timing itself is GPU-only)."""

from __future__ import annotations

from tileport.gpu import sdpa_compare


def test_flops_count_both_matmuls_and_halve_for_causal():
    full = sdpa_compare.flops(2, 1024, causal=False)
    assert full == 4.0 * 2 * sdpa_compare.HEADS_Q * 1024 * 1024 * sdpa_compare.HEAD_DIM
    assert sdpa_compare.flops(2, 1024, causal=True) == full / 2


def test_refuses_to_run_without_a_gpu(tmp_path, monkeypatch, capsys):
    import tileport.ops.backends as backends
    monkeypatch.setattr(backends, "cuda_unavailable_reason", lambda: "no CUDA GPU is visible")
    assert sdpa_compare.main(["--out", str(tmp_path / "x.json")]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
