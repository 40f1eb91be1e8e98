"""docs/usage.md's "call a translated crate from Python" snippet, run as written on the CPU: the crate is
translated and built, the snippet's torch is a stand-in whose tensors are device arrays with made-up
pointers, so everything up to the launch is real and the launch itself fails cleanly on the missing
GPU driver with a typed TileportError (a wrong API use in the snippet would raise something else)."""

from __future__ import annotations

import itertools
import re
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.cli import app
from tileport.runtime.abi import TileportError

pytestmark = pytest.mark.cargo

REPO = Path(__file__).resolve().parents[2]
PTR = 0x7F00_0000_0000
_allocated = itertools.count()


class FakeTensor:
    """What the binding reads of a CUDA tensor: `__cuda_array_interface__` and `__dlpack_device__`."""

    def __init__(self, n: int):
        self.n = n
        ptr = PTR + next(_allocated) * (1 << 32)  # each array its own memory, as the binding checks
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "strides": None,
                                         "version": 3}

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def numel(self) -> int:
        return self.n


def fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.randn = lambda n, device=None: FakeTensor(n)
    torch.randn_like = torch.empty_like = lambda t: FakeTensor(t.n)
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0,
                                       current_stream=lambda device: types.SimpleNamespace(cuda_stream=0))
    return torch


def readme_blocks() -> tuple[str, str]:
    text = (REPO / "docs" / "usage.md").read_text()
    at = text.index("Call a translated crate from Python")
    bash = re.search(r"```bash\n(.*?)```", text[at:], re.S).group(1).strip()
    python = re.search(r"```python\n(.*?)```", text[at:], re.S).group(1)
    return bash, python


def driver_present() -> bool:
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_readme_snippet_loads_a_translated_crate_and_calls_an_entry(tmp_path, monkeypatch, capsys):
    if driver_present():
        pytest.skip("a CUDA driver is present: the stand-in tensors' made-up pointers must not reach it")
    bash, python = readme_blocks()
    args = bash.split()
    assert args[:2] == ["tileport", "translate"]
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["translate", str(REPO / args[2]), *args[3:]])
    assert r.exit_code == 0, r.output
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.delenv("TILEPORT_LIB", raising=False)
    code = python.replace('profile="release"', 'profile="dev"')  # the same build, minutes faster
    with pytest.raises(TileportError) as e:  # no GPU driver here: the launch fails, typed, after every check passed
        exec(compile(code, "usage.md", "exec"), {})  # noqa: S102 - our own guide's snippet
    assert "[('a', 'array'), ('b', 'array'), ('c', 'array'), ('TILE', 'const')]" in capsys.readouterr().out
    assert "driver" in str(e.value).lower() or "cuda" in str(e.value).lower(), e.value  # not an argument error
