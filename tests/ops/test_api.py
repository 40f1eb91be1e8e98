"""The operator API without torch or a GPU (runs in CI): backend selection, availability with
reasons, the operator namespace, and the rule that importing tileport never imports torch.

Where torch happens to be installed, the tests that describe a torch-less machine skip with the
reason; tests/ops/test_api_torch.py covers the torch side on the CPU.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tileport
import tileport.ops as ops
from tileport.ops import api, backends
from tileport.ops.specs import SPEC_MODULES, all_specs

REPO = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None
no_torch_only = pytest.mark.skipif(HAS_TORCH, reason="describes a machine without torch; torch is installed here")


@pytest.fixture(autouse=True)
def _restore_backend(monkeypatch):
    """Each test starts from the initial default and leaves no process-wide choice behind."""
    monkeypatch.delenv(api.BACKEND_ENV, raising=False)
    saved = api._default[0]
    api._default[0] = None
    yield
    api._default[0] = saved


# ---------------------------------------------------------------------------------------------
# Importing


def test_importing_tileport_and_its_ops_does_not_import_torch():
    code = (
        "import sys, tileport, tileport.ops as o\n"
        "o.op_names(); o.softmax; o.get_op('layer_norm'); dir(o)\n"
        "tileport.set_backend('torch'); tileport.get_backend()\n"
        "import tileport.ops.specs, tileport.gpu.check, tileport.gpu.bench, tileport.gpu.timing, tileport.report\n"
        "tileport.ops.specs.all_specs()\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


@no_torch_only
def test_torch_namespace_without_torch_says_what_is_missing():
    with pytest.raises(ImportError, match="needs PyTorch"):
        ops.torch  # noqa: B018


# ---------------------------------------------------------------------------------------------
# Backend selection


def test_default_backend_is_cutile_rs():
    assert api.DEFAULT_BACKEND == "cutile-rs"
    assert ops.get_backend() == "cutile-rs"
    assert tileport.get_backend() == "cutile-rs"


def test_set_backend_switches_and_validates():
    for name in ops.BACKENDS:
        tileport.set_backend(name)
        assert ops.get_backend() == name
    with pytest.raises(ValueError, match="unknown backend 'cuda'; choose from torch, cutile, cutile-rs"):
        ops.set_backend("cuda")
    assert ops.get_backend() == "cutile-rs"  # a refused name changes nothing


def test_use_backend_nests_and_restores():
    ops.set_backend("torch")
    with ops.use_backend("cutile") as name:
        assert name == "cutile" and ops.get_backend() == "cutile"
        with tileport.use_backend("cutile-rs"):
            assert ops.get_backend() == "cutile-rs"
        assert ops.get_backend() == "cutile"
    assert ops.get_backend() == "torch"


def test_use_backend_restores_after_an_exception():
    with pytest.raises(RuntimeError, match="boom"):
        with ops.use_backend("cutile"):
            raise RuntimeError("boom")
    assert ops.get_backend() == "cutile-rs"


def test_use_backend_refuses_unknown_names_before_entering():
    with pytest.raises(ValueError, match="unknown backend 'rust'"):
        with ops.use_backend("rust"):
            pytest.fail("entered the block")
    assert ops.get_backend() == "cutile-rs"


def test_set_backend_inside_a_block_applies_now_and_stays_as_the_default():
    with ops.use_backend("cutile"):
        ops.set_backend("torch")
        assert ops.get_backend() == "torch"
    assert ops.get_backend() == "torch"


def test_set_backend_is_process_wide_and_use_backend_is_per_thread():
    seen = {}

    def worker(key):
        seen[key] = ops.get_backend()

    ops.set_backend("torch")
    with ops.use_backend("cutile"):
        t = threading.Thread(target=worker, args=("during",))
        t.start()
        t.join()
        assert ops.get_backend() == "cutile"
    assert seen["during"] == "torch"  # the other thread sees the default, not this thread's block


def test_backend_from_the_environment(monkeypatch):
    monkeypatch.setenv(api.BACKEND_ENV, "cutile")
    assert ops.get_backend() == "cutile"
    ops.set_backend("torch")  # an explicit choice wins over the environment
    assert ops.get_backend() == "torch"
    api._default[0] = None
    monkeypatch.setenv(api.BACKEND_ENV, "nvidia")
    with pytest.raises(ValueError, match=r"unknown backend in \$TILEPORT_BACKEND 'nvidia'"):
        ops.get_backend()


def test_the_environment_is_read_once(monkeypatch):
    """$TILEPORT_BACKEND is the *initial* default: read by the first call that needs it, not on every
    call; set_backend and use_backend still override it as before."""
    monkeypatch.setenv(api.BACKEND_ENV, "cutile")
    assert ops.get_backend() == "cutile"
    monkeypatch.setenv(api.BACKEND_ENV, "torch")
    assert ops.get_backend() == "cutile"  # a later change of the environment is not the default
    monkeypatch.delenv(api.BACKEND_ENV)
    assert ops.get_backend() == "cutile"
    with ops.use_backend("torch"):
        assert ops.get_backend() == "torch"
    assert ops.get_backend() == "cutile"
    ops.set_backend("cutile-rs")
    assert ops.get_backend() == "cutile-rs"


def test_set_backend_in_another_thread_while_the_environment_is_read_wins(monkeypatch):
    """The first call's read of the environment never overwrites a set_backend made meanwhile."""
    other = []

    def slow_initial_backend():  # another thread chooses a backend while this one reads the environment
        other.append(threading.Thread(target=ops.set_backend, args=("torch",)))
        other[0].start()
        other[0].join(timeout=0.2)  # it waits for this resolution to end (or, unserialized, is done already)
        return "cutile"

    monkeypatch.setattr(api, "_initial_backend", slow_initial_backend)
    assert ops.get_backend() in ("cutile", "torch")
    other[0].join()
    assert ops.get_backend() == "torch"


def test_unknown_backend_in_a_call_is_a_value_error():
    with pytest.raises(ValueError, match="unknown backend 'triton'"):
        ops.relu(object(), backend="triton")
    with pytest.raises(ValueError, match="unknown backend 'triton'"):
        ops.call(all_specs()["relu"], object(), backend="triton")


# ---------------------------------------------------------------------------------------------
# Availability, with reasons


def test_available_backends_agree_with_the_reasons():
    avail = ops.available_backends()
    assert avail == [b for b in ops.BACKENDS if ops.unavailable_reason(b) is None]
    for b in ops.BACKENDS:
        reason = ops.unavailable_reason(b)
        assert reason is None or (isinstance(reason, str) and reason)


@no_torch_only
def test_without_torch_no_backend_is_available_and_each_says_why():
    assert ops.available_backends() == []
    assert tileport.available_backends() == []
    for b in ops.BACKENDS:
        assert ops.unavailable_reason(b) == "PyTorch is not installed"


@no_torch_only
@pytest.mark.parametrize("backend", ops.BACKENDS)
def test_without_torch_a_call_raises_backend_unavailable_with_the_reason(backend):
    with pytest.raises(ops.BackendUnavailable, match=f"backend '{backend}' is unavailable: PyTorch is not installed"):
        ops.softmax(object(), backend=backend)


def test_unknown_backend_reason():
    assert "unknown backend 'x'" in ops.unavailable_reason("x")


def test_rust_library_reasons(monkeypatch, tmp_path):
    from tileport.runtime import library
    monkeypatch.setenv("TILEPORT_LIB", str(tmp_path / "missing.so"))
    assert backends.rust_library_reason() == f"$TILEPORT_LIB is {tmp_path / 'missing.so'}, which is not a file"
    so = tmp_path / "lib.so"
    so.write_bytes(b"")
    monkeypatch.setenv("TILEPORT_LIB", str(so))
    assert backends.rust_library_reason() is None
    monkeypatch.delenv("TILEPORT_LIB")
    monkeypatch.setattr(backends.shutil, "which", lambda name: None)
    assert "no cargo" in backends.rust_library_reason()
    monkeypatch.setattr(library, "REPO_CRATE", tmp_path)
    assert "kernels.json manifest are not there" in backends.rust_library_reason()


# ---------------------------------------------------------------------------------------------
# The operator namespace


def test_op_names_cover_every_spec():
    names = ops.op_names()
    assert names == sorted(all_specs()) and len(names) == len(SPEC_MODULES) >= 16
    for name in names:
        op = getattr(ops, name)
        assert callable(op) and op.__name__ == name and op is ops.get_op(name)
        assert name in dir(ops)


def test_op_signatures_come_from_the_references():
    assert str(inspect.signature(ops.layer_norm)) == "(x, w, b, /, *, out=None, backend=None)"
    assert str(inspect.signature(ops.rope)) == "(x, cos, sin, /, *, out=None, backend=None)"
    assert "layer_norm_fwd_kernel" in ops.layer_norm.__doc__
    for name, spec in all_specs().items():
        params = list(inspect.signature(getattr(ops, name)).parameters)
        assert params[-2:] == ["out", "backend"]
        assert params[:-2] == api.input_names(spec)


def test_unknown_op_is_an_attribute_error_listing_the_ops():
    with pytest.raises(AttributeError, match=r"tileport.ops has no operator 'flash_attention' \(have: bmm, cross_entropy, cross_entropy_bwd, dropout"):
        ops.flash_attention  # noqa: B018
    with pytest.raises(AttributeError):
        ops._hidden  # noqa: B018
    assert not hasattr(ops, "flash_attention")


# ---------------------------------------------------------------------------------------------
# docs/ops.md states the tolerances the specs hold the kernels to


def test_docs_list_every_ops_tolerances():
    text = (REPO / "docs" / "ops.md").read_text()
    table = text.split("<!-- tolerance-table -->", 1)[1].split("<!-- /tolerance-table -->", 1)[0]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*`?([a-z_0-9]+)`?\s*\|(.*)\|\s*$", line)
        if m and m.group(1) in all_specs():
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    for name, spec in all_specs().items():
        assert name in rows, f"docs/ops.md has no tolerance row for {name}"
        cells = " ".join(rows[name])
        for dt in spec.dtypes:
            tol = spec.tolerances[dt]
            want = f"{tol.rtol:g} / {tol.atol:g}"
            assert want in cells, f"docs/ops.md row of {name}: {dt} should read {want}, row is {rows[name]}"
