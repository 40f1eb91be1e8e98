"""tileport.gpu.profile's parsing of ncu's details page (CPU: no ncu, no GPU)."""

import json

import pytest

from tileport.gpu.profile import headline, parse_case, parse_details, winners

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(kid: str, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kid}","9","python3","h","{kernel}","1","7","(128, 1, 1)","(264, 1, 1)","0","9.0",'
            f'"{section}","{metric}","{unit}","{value}"')


def test_details_page_grouped_per_kernel_and_section():
    text = "\n".join(["==PROF== Connected to process 9", HEADER,
                      row("0", "softmax_kernel", "GPU Speed Of Light Throughput", "DRAM Throughput", "%", "71.2"),
                      row("0", "softmax_kernel", "Occupancy", "Achieved Occupancy", "%", "40.5"),
                      row("1", "combine_kernel", "Launch Statistics", "Registers Per Thread", "register/thread", "32"),
                      "==PROF== Disconnected"])
    kernels = parse_details(text)
    assert sorted(kernels) == ["0 softmax_kernel", "1 combine_kernel"]
    h = headline(kernels["0 softmax_kernel"])
    assert h == {"dram_throughput_pct": "71.2 %", "achieved_occupancy_pct": "40.5 %"}
    assert headline(kernels["1 combine_kernel"]) == {"registers_per_thread": "32 register/thread"}


def test_no_kernel_rows_is_empty():
    assert parse_details("==PROF== No kernels were profiled.\n") == {}


def test_case_syntax():
    assert parse_case("rope/float16/4x4096x32x128") == ("rope", "float16", (4, 4096, 32, 128), "cutile")
    assert parse_case("softmax/bfloat16/1024x16384/cutile-rs")[3] == "cutile-rs"
    assert parse_case("rope/float16/1x16384x8x128/torch.compile")[3] == "torch.compile"
    with pytest.raises(ValueError, match="backend 'cutlass' is none of cutile, cutile-rs, torch, torch.compile"):
        parse_case("rope/float16/1x16384x8x128/cutlass")
    with pytest.raises(ValueError, match="OP/DTYPE/SHAPE"):
        parse_case("softmax")
    with pytest.raises(ValueError, match="OP/DTYPE/SHAPE"):
        parse_case("softmax/float16/1024xwide")


def test_cli_refuses_a_bad_case_without_a_traceback(capsys):
    from tileport.gpu.profile import main
    with pytest.raises(SystemExit) as exc:
        main(["softmax/float16/abc"])
    assert exc.value.code == 2 and "OP/DTYPE/SHAPE" in capsys.readouterr().err


def test_winners_of_an_autotune_result(tmp_path):
    p = tmp_path / "tune.json"
    p.write_text(json.dumps({"cases": [{"op": "softmax", "dtype": "float16", "shape": [1024, 16384],
                                        "backends": {"cutile": {"chosen": {"BLOCK_M": 1}},
                                                     "cutile-rs": {"chosen": None}}}]}))
    assert winners(p) == {("softmax", "float16", (1024, 16384), "cutile"): {"BLOCK_M": 1}}


def test_cli_without_a_gpu_says_so(capsys, monkeypatch):
    from tileport.gpu import profile
    from tileport.ops import backends
    monkeypatch.setattr(backends, "cuda_unavailable_reason", lambda: "no CUDA device")
    assert profile.main(["softmax/float16/1024x16384"]) == 2
    assert "needs a CUDA GPU: no CUDA device" in capsys.readouterr().err
