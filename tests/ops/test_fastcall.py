"""The compiled op-call replay (tileport.runtime.fastcall): the op wrapper tries it first and takes
the Python path when it declines; plans are promoted to it once, bounded per backend, and forgotten
with the plan cache; the extension builds, loads only when built for this torch, and guards what it
cannot launch (CPU tensors) by declining. Launches themselves need a GPU (tests/gpu/test_callpath.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

from tileport.ops import api, operators, plan_cache  # noqa: E402
from tileport.runtime import fastcall  # noqa: E402


class FakeExtension:
    """The extension's interface: `plan` returns a marker per call, guarding the inputs' shapes;
    `run` answers from a table for the first plan whose guard holds."""

    def __init__(self):
        self.answers = {}  # marker -> output, or None to decline
        self.guards = {}  # marker -> input shapes
        self.tried = []

    def plan(self, inputs, output, *rest):
        marker = ("plan", len(self.answers))
        self.guards[marker] = [x.shape for x in inputs]
        return marker

    def run(self, plans, inputs):
        for p in plans:
            self.tried.append(p)
            if self.guards[p] == [x.shape for x in inputs] and self.answers.get(p) is not None:
                return self.answers[p]
        return None


class PendingPlan:
    """A cached plan whose compiled form exists once `ready` (CachedPlan.fastcall_plan's contract)."""

    def __init__(self, ext):
        self.ext, self.fast_pending, self.ready, self.runs = ext, True, True, 0

    def run(self, inputs, out):
        self.runs += 1
        return "python"

    def fastcall_plan(self, inputs, output):
        if not self.ready:
            return None
        self.fast_pending = False
        marker = self.ext.plan(inputs, output)
        self.ext.answers[marker] = "compiled"
        return marker


@pytest.fixture
def ext(monkeypatch):
    plan_cache.clear()
    fake = FakeExtension()
    monkeypatch.setattr(fastcall, "_loaded", [fake, "on (fake)"])
    saved = api._default[0]
    api._default[0] = "cutile-rs"
    yield fake
    api._default[0] = saved
    plan_cache.clear()


def _store(plan, inputs, backend="cutile-rs"):
    plan_cache.store(plan_cache.call_key(api.library_spec("vector_add"), backend, inputs, None), plan)
    return plan


def test_a_plan_is_promoted_once_then_the_compiled_path_answers(ext):
    op = operators.get_op("vector_add")
    a, b = torch.zeros(8), torch.ones(8)
    plan = _store(PendingPlan(ext), (a, b))
    plan.ready = False  # the library has not recorded the launch yet: no promotion, asked again next call
    assert op(a, b) == "python" and plan.fast_pending
    plan.ready = True
    assert op(a, b) == "python" and not plan.fast_pending  # this call ran in Python and promoted the plan
    assert op(a, b) == "compiled" and plan.runs == 2
    assert op(a, b, backend="cutile-rs") == "compiled"  # a named backend uses the same table
    with api.use_backend("torch"):  # another backend: another table, the Python path
        assert op(a, b) != "compiled"


def test_a_declined_call_takes_the_python_path(ext):
    op = operators.get_op("vector_add")
    a, b, c = torch.zeros(8), torch.ones(8), torch.zeros(4)
    first = _store(PendingPlan(ext), (a, b))
    op(a, b)
    other = _store(PendingPlan(ext), (c, c))
    ext.answers = {k: None for k in ext.answers}  # the extension's guards reject every call
    assert op(c, c) == "python" and other.runs == 1 and not other.fast_pending  # promoted now
    ext.answers = {k: None for k in ext.answers}
    assert op(a, b) == "python" and first.runs == 2
    assert ext.tried[-2:] == [("plan", 1), ("plan", 0)]  # newest first, every plan of the backend tried


def test_out_and_plans_without_a_compiled_form_never_reach_it(ext):
    op = operators.get_op("vector_add")
    a, b, o = torch.zeros(8), torch.ones(8), torch.empty(8)
    plan = _store(PendingPlan(ext), (a, b))
    plan.fast_pending = False  # e.g. a plan of two launches
    assert op(a, b) == "python" and op(a, b) == "python" and ext.tried == []
    plan_cache.store(plan_cache.call_key(api.library_spec("vector_add"), "cutile-rs", (a, b), o), plan)
    assert op(a, b, out=o) == "python" and ext.tried == []


def test_the_table_is_bounded_per_backend_and_cleared_with_the_plan_cache(ext):
    op = operators.get_op("vector_add")
    table = plan_cache.fast_table("vector_add")
    for n in range(plan_cache.MAX_FAST + 2):
        x = torch.zeros(n + 1)
        _store(PendingPlan(ext), (x, x))
        op(x, x)
    assert len(table["cutile-rs"].args[0]) == plan_cache.MAX_FAST
    plan_cache.clear()
    assert table == {} and plan_cache.fast_table("vector_add") is table  # the wrapper's dict, emptied


def test_status_says_why_op_calls_do_not_use_it(monkeypatch, tmp_path):
    monkeypatch.setenv(fastcall.DIR_ENV, str(tmp_path))
    monkeypatch.setattr(fastcall, "_loaded", [])
    assert fastcall.module() is None and "not built" in fastcall.status() and "fastcall build" in fastcall.status()
    monkeypatch.setenv(fastcall.ENV, "0")
    monkeypatch.setattr(fastcall, "_loaded", [])
    assert fastcall.module() is None and fastcall.status().startswith("off")


def test_the_build_name_follows_source_torch_and_python():
    assert fastcall.module_name("2.11.0") != fastcall.module_name("2.11.1")
    assert fastcall.module_name("2.11.0") == fastcall.module_name("2.11.0")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The real extension, built once for this module's tests (a C++ compiler and ninja are needed)."""
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("no C++ compiler or ninja to build the extension")
    directory = tmp_path_factory.mktemp("fastcall")
    mp = pytest.MonkeyPatch()
    mp.setenv(fastcall.DIR_ENV, str(directory))
    mp.setattr(fastcall, "_loaded", [])
    try:
        assert fastcall.main(["build"]) == 0
        assert fastcall.status().startswith("on (") and str(directory) in fastcall.status()
        yield fastcall.module()
    finally:
        mp.undo()


def test_the_extension_declines_what_it_cannot_launch(built):
    a = torch.zeros(8)
    sources = ((0, 0, 0), (0, 1, 0), (1, 0, 0))
    assert built.plan((a, a), a, sources, 1, 1, lambda d: 0, lambda rc: None, None) is None  # CPU tensors
    assert built.run((), (a, a)) is None
    with pytest.raises(TypeError):
        built.run(("not a plan",), (a, a))
    with pytest.raises(TypeError):
        built.run([], (a, a))


def test_doctor_lists_the_build(built, tmp_path, monkeypatch):
    """`tileport doctor` shows the build as an optional component: ok where it was built, else the command."""
    from tileport import doctor
    monkeypatch.setenv(fastcall.DIR_ENV, str(tmp_path))
    missing = doctor.check_fastcall()
    assert not missing.ok and not missing.required and missing.fix == "python3 -m tileport.runtime.fastcall build"
    monkeypatch.setenv(fastcall.DIR_ENV, str(Path(built.__file__).parents[1]))
    found = doctor.check_fastcall()
    assert found.ok and found.path == built.__file__ and torch.__version__ in found.version
