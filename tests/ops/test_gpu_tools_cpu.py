"""The GPU measurement commands on a machine without a GPU: a one-line reason and exit 2, no file."""

from __future__ import annotations

import pytest

from tileport.gpu import bench, callcost
from tileport.ops.backends import cuda_unavailable_reason


@pytest.mark.parametrize("main", [callcost.main, bench.main], ids=["callcost", "bench"])
def test_refuses_without_a_gpu(main, tmp_path, capsys):
    if cuda_unavailable_reason() is None:
        pytest.skip("a CUDA GPU is visible: the refusal path does not apply")
    out = tmp_path / "r.json"
    assert main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU: " in err and cuda_unavailable_reason() in err
    assert not out.exists()
