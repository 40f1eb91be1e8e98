"""The plan cache's call key (ops/plan_cache.call_key): a call that differs from a cached one in any
component a plan depends on (op, backend, each tensor's dtype, shape, strides and device, each
scalar's type and value, each out= tensor's) gets a key of its own, so it never replays another
call's plan; and the stream is not part of the plan: every replay launches on the stream current
at the call. Each test fails if the key drops the component it varies.

The key tests run twice: on real torch tensors when torch is installed, and on stand-ins (a fake
`torch` module with the four attributes the key reads) everywhere, CI included."""

from __future__ import annotations

import shutil
import sys
import types
from dataclasses import dataclass

import pytest

from tileport.ops import plan_cache
from tileport.ops.plan_cache import call_key


@dataclass(frozen=True)
class FakeDevice:
    type: str
    index: int | None = None


class FakeTensor:
    """What call_key reads of a tensor: dtype, shape, stride(), device (and a data pointer it must
    not read: two tensors of one layout at different addresses share a key)."""

    def __init__(self, shape, dtype="float32", stride=None, device=FakeDevice("cuda", 0), ptr=0x1000):
        self.shape, self.dtype, self.device, self.ptr = tuple(shape), dtype, device, ptr
        self._stride = tuple(stride) if stride is not None else _contiguous(shape)

    def stride(self):
        return self._stride


def _contiguous(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


class Fake:
    """Tensor factory on stand-ins."""

    name = "fake"

    def __init__(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(Tensor=FakeTensor))

    def t(self, shape, dtype="float32", stride=None, device=("cuda", 0), ptr=0x1000):
        return FakeTensor(shape, dtype, stride, FakeDevice(*device), ptr)


class Real:
    """Tensor factory on real torch tensors (meta tensors for other devices: the key reads only
    metadata; "cuda" devices are spelled as meta here since this machine may have no GPU)."""

    name = "torch"

    def __init__(self, monkeypatch):
        self.torch = pytest.importorskip("torch", reason="torch is not installed")

    def t(self, shape, dtype="float32", stride=None, device=("cpu", None), ptr=0):
        torch = self.torch
        dev = "cpu" if device[0] in ("cpu", "cuda") and device[1] in (None, 0) else "meta"
        base = torch.empty(sum((n - 1) * s for n, s in zip(shape, stride or _contiguous(shape))) + 1 + ptr,
                           dtype=getattr(torch, dtype), device=dev)
        return base.as_strided(shape, stride or _contiguous(shape), ptr)


@pytest.fixture(params=[Fake, Real], ids=["stand-ins", "torch"])
def make(request, monkeypatch):
    return request.param(monkeypatch)


SPEC_A, SPEC_B = object(), object()  # the key holds the spec's identity only


def _key(make, *, spec=SPEC_A, backend="cutile-rs", x=None, s=2.0, out=None):
    x = make.t((4, 8)) if x is None else x
    return call_key(spec, backend, (x, s), out)


# one entry per key component: the keyword arguments of a call differing from the base in it alone
VARIANTS = {
    "op": lambda m: dict(spec=SPEC_B),
    "backend": lambda m: dict(backend="cutile"),
    "dtype": lambda m: dict(x=m.t((4, 8), "float16")),
    "shape": lambda m: dict(x=m.t((8, 4))),
    "strides": lambda m: dict(x=m.t((4, 8), stride=(1, 4))),  # same shape, column-major
    "strides (padded rows)": lambda m: dict(x=m.t((4, 8), stride=(16, 1))),
    "device": lambda m: dict(x=m.t((4, 8), device=("meta", None))),
    "device index": lambda m: dict(x=m.t((4, 8), device=("cuda", 1))),
    "scalar type": lambda m: dict(s=2),
    "scalar value": lambda m: dict(s=3.0),
    "out given": lambda m: dict(out=m.t((4, 8))),
}
OUT_VARIANTS = {
    "out dtype": lambda m: m.t((4, 8), "float16"),
    "out shape": lambda m: m.t((8, 4)),
    "out strides": lambda m: m.t((4, 8), stride=(1, 4)),
    "out device": lambda m: m.t((4, 8), device=("meta", None)),
}


def test_same_layout_at_another_address_shares_the_key(make):
    """The key is a function of layouts, not of memory: the premise of every test below."""
    assert _key(make, x=make.t((4, 8), ptr=0)) == _key(make, x=make.t((4, 8), ptr=64))
    assert _key(make, out=make.t((4, 8), ptr=0)) == _key(make, out=make.t((4, 8), ptr=128))


@pytest.mark.parametrize("component", sorted(VARIANTS))
def test_a_call_differing_in_one_component_gets_its_own_key(make, component):
    base = _key(make)
    assert base is not None
    variant = _key(make, **VARIANTS[component](make))
    assert variant is not None and variant != base, component


@pytest.mark.parametrize("component", sorted(OUT_VARIANTS))
def test_an_out_differing_in_one_component_gets_its_own_key(make, component):
    base = _key(make, out=make.t((4, 8)))
    variant = _key(make, out=OUT_VARIANTS[component](make))
    assert variant is not None and variant != base, component


def test_keys_of_different_argument_kinds_never_collide(make):
    """The flat key parses one way: an input tensor, a scalar and an out= tensor never line up."""
    x = make.t((4,))
    keys = [call_key(SPEC_A, "torch", args, out) for args, out in [
        ((x,), None), ((x, 1.0), None), ((1.0, x), None), ((x,), x), ((x, x), None), ((True,), None), ((1,), None)]]
    assert None not in keys and len(set(keys)) == len(keys)


def test_a_cached_plan_is_found_only_by_its_own_key(make, monkeypatch):
    """Through the store: a plan stored under one call's key is not what a call differing in any
    component looks up."""
    monkeypatch.setattr(plan_cache, "_PLANS", {})
    monkeypatch.setattr(plan_cache, "lookup", plan_cache._PLANS.get)
    plan = object()
    plan_cache.store(_key(make), plan)
    assert plan_cache.lookup(_key(make, x=make.t((4, 8), ptr=256))) is plan
    for component, variant in VARIANTS.items():
        assert plan_cache.lookup(_key(make, **variant(make))) is None, component


# ---------------------------------------------------------------------------------------------
# The stream: read at every launch, never part of the plan


def test_each_replay_launches_on_the_stream_current_at_the_call(monkeypatch, tmp_path):
    """A cutile-rs plan (vector_add, recorded from CPU tensors; the library a C stub with the
    launcher's signature) replayed under three different current streams passes each one, and asks
    the stream accessor for the plan's device; a plan that kept its first stream fails here."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler to build the stub library")
    from tileport.gpu import callcost
    from tileport.ops import backends
    from tileport.ops.specs import get_spec
    from tileport.runtime import library as lib_mod
    from tileport.runtime import tensors
    stub = lib_mod.KernelLibrary(callcost._build_stub(tmp_path), lib_mod.REPO_CRATE / "kernels.json")
    current = {"stream": 0x100}
    asked = []
    monkeypatch.setattr(backends, "library", lambda: stub)
    monkeypatch.setattr(tensors, "describe", callcost._cpu_describe)
    monkeypatch.setattr(plan_cache, "_raw_stream", lambda: (lambda index: asked.append(index) or current["stream"]))
    spec = get_spec("vector_add")
    a, b = spec.make_inputs((256,), "float32", "cpu", 0)
    out = spec.allocate(a, b)
    plan = plan_cache.record(spec, "cutile-rs", (a, b), (out,), spec.plan(a, b, out), allocated=True,
                             multi_output=False)
    (launch,) = plan.launches
    seen = []
    monkeypatch.setattr(launch, "_raw", lambda *args: seen.append(args[-1].value) or 0)
    for stream in (0x100, 0x200, 0x300):
        current["stream"] = stream
        y = plan.run((a, b), None)
        assert isinstance(y, torch.Tensor) and y.shape == out.shape
    assert seen == [0x100, 0x200, 0x300]
    assert asked == [plan.device_index] * 3
