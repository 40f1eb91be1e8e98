"""Cached launch plans: a repeated operator call does no Python planning and no full input check.

The first call of an op with a given *call key* (op, backend, and for every tensor input and `out=`
tensor its dtype, shape, strides and device; every scalar's type and value) is checked in full and
planned by the spec; the result is kept as a `CachedPlan`:

| kernel argument      | recorded as                                                              |
|----------------------|--------------------------------------------------------------------------|
| array (view of an input / output) | which tensor, byte offset from its data pointer, descriptor |
| array (plan's own buffer, e.g. split-K workspace) | shape / strides / dtype, allocated per call  |
| scalar / constant    | the value, already converted for the backend (ctypes objects for the C ABI) |

A later call with the same key computes the key (which re-establishes every invariant the full check
verified: dtypes, shapes, strides, devices), allocates the outputs (and workspaces), reads the data
pointers and launches on the current stream: no host synchronization, nothing else allocated, so it
can be captured in a CUDA graph. A spec's plan is a function of the key alone, which is what makes
this sound. A call is never cached when a kernel argument cannot be traced to exactly one tensor
(inputs whose memory overlaps), or when a buffer the plan made itself is read before a kernel
writes it (it would hold data, not scratch space).
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import weakref
from dataclasses import dataclass
from threading import get_ident
from typing import Any, Callable, Sequence

from tileport.ops.spec import Launch, OpSpec
from tileport.runtime.abi import AliasingError, MisalignedError, raise_for

MAX_PLANS = 4096
INPUT, OUTPUT, TEMP = 0, 1, 2  # where an array argument lives (index into the call's tensor groups)

_PLANS: dict[tuple, "CachedPlan | TorchPlan"] = {}  # cleared, never replaced: op wrappers hold its `get`
_FAST: dict[str, dict[str, Any]] = {}  # op -> fast_table
MAX_FAST = 4  # compiled replays an op call tries per backend (each a guard check of a few comparisons)
_LOCK = threading.Lock()


class NotCacheable(Exception):
    """The call runs, but its plan cannot be replayed from the key alone (the reason says why)."""


def _torch():
    import torch
    return torch


def _tensor_type() -> type:
    return _torch().Tensor


_SCALARS = (bool, int, float)


def call_key(spec: OpSpec, backend: str, inputs: tuple, out: Any) -> tuple | None:
    """The cache key of a call, or None when an input is neither a torch tensor nor a scalar (a
    DLPack array: the slow path views it as a tensor first) or torch is not imported yet.

    One flat tuple (cheaper to build, hash and compare than a tuple of per-tensor tuples): the op,
    the backend, then per tensor its dtype, shape, strides and device, per scalar its type and
    value, and "out" before each out= tensor. It parses one way only (a torch dtype starts a tensor,
    a Python type a scalar), so two different calls never share a key."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    tensor = torch.Tensor
    key: tuple = (id(spec), backend)  # plans hold their spec, so its id stays unique while cached
    for x in inputs:  # tuple concatenation: cheaper than a list grown and turned into a tuple
        if isinstance(x, tensor):
            key += (x.dtype, x.shape, x.stride(), x.device)
        elif isinstance(x, _SCALARS):
            key += (type(x), x)
        else:
            return None
    if out is not None:
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if not isinstance(o, tensor):
                return None
            key += ("out", o.dtype, o.shape, o.stride(), o.device)
    return key


lookup: Callable[[Any], "CachedPlan | TorchPlan | None"] = _PLANS.get  # the plan of a key (None: none, or no key)


def store(key: tuple | None, plan: "CachedPlan | TorchPlan") -> None:
    if key is None:
        return
    with _LOCK:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan


def clear() -> None:
    """Forget every cached plan (e.g. after the library was rebuilt)."""
    with _LOCK:
        _PLANS.clear()
        for table in _FAST.values():
            table.clear()


def fast_table(op: str) -> dict[str, Any]:
    """backend -> the op's compiled replays (tileport.runtime.fastcall.runner), newest first; the
    op wrapper holds the dict, `clear` empties it."""
    with _LOCK:
        return _FAST.setdefault(op, {})


def promote(table: dict[str, Any], backend: str, plan: "CachedPlan", inputs: tuple, output: Any) -> None:
    """Add `plan`'s compiled replay, once it has one, to the op's `table` (at most MAX_FAST per backend)."""
    fast = plan.fastcall_plan(inputs, output)
    if fast is None:
        return
    from tileport.runtime import fastcall
    with _LOCK:
        old = table.get(backend)
        table[backend] = fastcall.runner((fast, *(old.args[0][:MAX_FAST - 1] if old is not None else ())))


def size() -> int:
    return len(_PLANS)


def as_tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else tuple(out) if isinstance(out, list) else (out,)


# ---------------------------------------------------------------------------------------------
# The torch backend: the baseline function, its inputs checked once per key


class TorchPlan:
    """A checked call signature of the `torch` backend: runs `fn` (the op's PyTorch baseline)."""

    fast_pending = False  # never replayed by the compiled path (CachedPlan.fastcall_plan)

    def __init__(self, spec: OpSpec, fn: Callable[..., Any], multi_output: bool):
        self.spec, self.fn, self.multi_output = spec, fn, multi_output

    def run(self, inputs: tuple, out: Any) -> Any:
        result = self.fn(*inputs)
        if out is None:
            return result
        outs = as_tuple(out)
        for dst, src in zip(outs, as_tuple(result)):
            dst.copy_(src)
        return outs if self.multi_output else outs[0]


# ---------------------------------------------------------------------------------------------
# Tile backends: the recorded launches


def _span(t: Any) -> tuple[int, int]:
    """[first byte, end byte) of the memory a tensor's elements occupy."""
    start = t.data_ptr()
    if t.numel() == 0:
        return start, start
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def _layout(t: Any) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype


@functools.cache
def _written_params() -> dict[str, frozenset[str]]:
    """kernel -> the array parameters it writes (from the generated crate's manifest)."""
    from tileport.runtime.library import REPO_CRATE
    try:
        manifest = json.loads((REPO_CRATE / "kernels.json").read_text())
    except (OSError, ValueError):
        return {}
    return {e["kernel"]: frozenset(p["name"] for p in e["params"] if p["kind"] == "array" and p.get("written"))
            for e in manifest["entries"]}


@dataclass(frozen=True)
class ArrayRef:
    """Where a kernel's array argument lives: tensor `index` of `group` (INPUT, OUTPUT, TEMP), at
    `offset` bytes from its data pointer, with `layout` (shape, strides, dtype); `whole`: the
    argument is that tensor itself (same layout, no offset)."""

    group: int
    index: int
    offset: int
    layout: tuple
    whole: bool


@dataclass(frozen=True)
class RecordedLaunch:
    """A launch of the plan with its array arguments traced (ArrayRef) and every other value kept."""

    kernel: str
    grid: tuple
    args: dict


class _Sources:
    """Traces each tensor argument of a plan to the input / output it views, or to a buffer the
    plan made (a temporary, allocated again per call)."""

    def __init__(self, inputs: tuple, outs: tuple):
        tensor = _tensor_type()
        self.groups = [(INPUT, i, t) for i, t in enumerate(inputs) if isinstance(t, tensor)]
        self.groups += [(OUTPUT, i, t) for i, t in enumerate(outs)]
        self.temps: list[tuple] = []  # layouts
        self._temp_ptrs: dict[int, int] = {}  # data_ptr -> temp index
        self._temp_ends: list[int] = []  # each temporary's end address

    def locate(self, kernel: str, param: str, arg: Any) -> ArrayRef:
        lo, hi = _span(arg)
        owners = [(g, i, t) for g, i, t in self.groups if hi > lo and _span(t)[0] <= lo and hi <= _span(t)[1]]
        if len(owners) > 1:
            raise NotCacheable(f"{kernel}.{param} lies in the memory of several inputs/outputs")
        if owners:
            g, i, t = owners[0]
            return ArrayRef(g, i, lo - t.data_ptr(), _layout(arg), lo == t.data_ptr() and _layout(arg) == _layout(t))
        if lo in self._temp_ptrs:
            index = self._temp_ptrs[lo]
            if self.temps[index] == _layout(arg):
                return ArrayRef(TEMP, index, 0, _layout(arg), True)
            if hi != self._temp_ends[index]:
                raise NotCacheable(f"{kernel}.{param}: a plan buffer used with two layouts")
            # the whole buffer under another shape (split-KV partials: [B, Hkv, G, splits, D] for the kernel
            # that writes them, [B, Hq, splits, D] for the one that reads them): a view of the temporary
            return ArrayRef(TEMP, index, 0, _layout(arg), False)
        if param not in _written_params().get(kernel, ()):
            raise NotCacheable(f"{kernel}.{param}: a buffer the plan made is read before a kernel writes it")
        if hi == lo or arg.untyped_storage().nbytes() != hi - lo or not arg.is_contiguous():
            raise NotCacheable(f"{kernel}.{param}: a plan buffer that is a view")
        self._temp_ptrs[lo] = len(self.temps)
        self._temp_ends.append(hi)
        self.temps.append(_layout(arg))
        return ArrayRef(TEMP, len(self.temps) - 1, 0, _layout(arg), True)


def trace(inputs: tuple, outs: tuple, launches: Sequence[Launch]) -> tuple[list[RecordedLaunch], list[tuple]]:
    """The launches with their arrays traced to inputs / outputs / temporaries, and the temporaries'
    layouts; NotCacheable when that cannot be done from the call key alone."""
    sources = _Sources(inputs, outs)
    tensor = _tensor_type()
    recorded = [RecordedLaunch(launch.kernel, tuple(launch.grid),
                               {p: sources.locate(launch.kernel, p, a) if isinstance(a, tensor) else a
                                for p, a in launch.args.items()})
                for launch in launches]
    return recorded, sources.temps


def resolve(recorded: RecordedLaunch, groups: tuple) -> dict:
    """The launch's arguments for the tensors of one call: arrays as (data pointer, layout)."""
    return {p: (groups[a.group][a.index].data_ptr() + a.offset, a.layout) if isinstance(a, ArrayRef) else a
            for p, a in recorded.args.items()}


class CachedPlan:
    """The launches of one call key, replayed on new tensors of the same layout."""

    def __init__(self, spec: OpSpec, device: Any, out_layouts: tuple | None, multi_output: bool,
                 temps: list[tuple], launches: list, like: int | None = None):
        """`like`: an input that torch.empty_like turns into the one output's layout (_template_input)."""
        self.spec, self.device, self.device_index = spec, device, device.index or 0
        self.like = like
        self.out_layouts, self.multi_output, self.temps, self.launches = out_layouts, multi_output, temps, launches
        self._empty = _torch().empty_strided
        self._extents: tuple | None = None  # (input index, bytes) per tensor input, bytes per output
        self.fast_pending = False  # True while the compiled path (fastcall) may still take this plan over
        if not multi_output and not temps and len(launches) == 1:  # most ops: one output, one kernel
            if out_layouts is None:
                self.run = self._one_launch_into()
            elif len(out_layouts) == 1:
                self.run = self._one_launch()
                self.fast_pending = isinstance(launches[0], RustLaunch)

    def fastcall_plan(self, inputs: tuple, output: Any) -> Any:
        """The compiled replay of this plan (tileport.runtime.fastcall), made from a call it just ran
        (`inputs` -> `output`), or None: not yet (the library records the launch on a later call),
        or never (no compiled path here, or one it cannot guard; `fast_pending` is then cleared)."""
        launch = self.launches[0]
        replay = launch._replay
        if replay is None:
            if launch._attempts <= 0:
                self.fast_pending = False
            return None
        self.fast_pending = False
        from tileport.runtime import fastcall
        if fastcall.module() is None:
            return None
        import ctypes
        lib = launch._lib
        return fastcall.plan(inputs, output, tuple(launch.sources), replay.handle.value,
                             ctypes.cast(lib.replay.launch, ctypes.c_void_p).value, _raw_stream(),
                             lambda rc: raise_for(rc, lib.last_error()), replay)

    def _one_launch(self) -> Callable[[tuple, Any], Any]:
        """`run` of a plan that allocates one output and launches one kernel, its values held by a
        closure (no per-call attribute lookups, lists or loops); `out=` takes the general path."""
        ((shape, stride, dtype),) = self.out_layouts
        empty, dev, index, launch = self._empty, self.device, self.device_index, self.launches[0].run
        general = CachedPlan.run.__get__(self)  # the class's run: this closure shadows it on the instance
        like, tensor, empty_like = self.like, _tensor_type(), _torch().empty_like

        def run(inputs: tuple, out: Any) -> Any:
            if out is not None:
                return general(inputs, out)
            o = empty(shape, stride, dtype=dtype, device=dev)
            launch((inputs, (o,), ()), index)
            return o

        def run_like(inputs: tuple, out: Any) -> Any:  # empty_like parses fewer arguments than empty_strided
            if out is not None:
                return general(inputs, out)
            x = inputs[like]  # its layout and device are in the key, its type is not: a subclass takes `empty`
            o = empty_like(x) if type(x) is tensor else empty(shape, stride, dtype=dtype, device=dev)
            launch((inputs, (o,), ()), index)
            return o
        return run if like is None else run_like

    def _one_launch_into(self) -> Callable[[tuple, Any], Any]:
        """`run` of a plan that launches one kernel into one given output (`out=`): the general path's
        aliasing check (_check_disjoint) for one output, in a closure; a tuple or list as `out=`,
        or a tensor subclass, takes the general path."""
        index, launch, tensor, name = self.device_index, self.launches[0].run, _tensor_type(), self.spec.name
        general = CachedPlan.run.__get__(self)  # the class's run: this closure shadows it on the instance

        def run(inputs: tuple, out: Any) -> Any:
            if type(out) is not tensor:
                return general(inputs, out)
            extents = self._extents
            if extents is None:  # a function of the key's layouts: computed once per plan
                extents = self._extents = _extents(inputs, (out,))
            in_extents, out_extents = extents
            if out_extents:  # an empty output aliases nothing
                lo = out.data_ptr()
                hi = lo + out_extents[0][1]
                for i, n in in_extents:
                    start = inputs[i].data_ptr()
                    if lo < start + n and start < hi:
                        raise AliasingError(f"{name}: an output shares memory with another argument "
                                            "(the port assumes no aliasing)")
            launch((inputs, (out,), ()), index)
            return out
        return run

    def run(self, inputs: tuple, out: Any) -> Any:
        empty, dev = self._empty, self.device
        if out is None:
            outs = [empty(shape, stride, dtype=dtype, device=dev) for shape, stride, dtype in self.out_layouts]
        else:
            outs = as_tuple(out)
            extents = self._extents
            if extents is None:  # a function of the key's layouts: computed once per plan
                extents = self._extents = _extents(inputs, outs)
            _check_disjoint(self.spec, inputs, outs, extents)
        temps = [empty(shape, stride, dtype=dtype, device=dev) for shape, stride, dtype in self.temps] \
            if self.temps else ()
        groups, index = (inputs, outs, temps), self.device_index
        for launch in self.launches:
            launch.run(groups, index)
        return tuple(outs) if self.multi_output else outs[0]


def _extent(t: Any) -> int:
    """Bytes from a tensor's data pointer to the end of its last element (0 when empty)."""
    lo, hi = _span(t)
    return hi - lo


def _extents(inputs: tuple, outs: tuple) -> tuple:
    """((input index, bytes), ...) of the non-empty tensor inputs, ((output index, bytes), ...) of the
    non-empty outputs: empty tensors alias nothing."""
    ins = ((i, _extent(x)) for i, x in enumerate(inputs) if hasattr(x, "data_ptr"))
    return tuple((i, n) for i, n in ins if n), tuple((k, n) for k, n in enumerate(map(_extent, outs)) if n)


def _check_disjoint(spec: OpSpec, inputs: tuple, outs: tuple, extents: tuple) -> None:
    """The call key holds layouts, not addresses: a caller's `out=` may alias an input on a later
    call with the same key, so the replay checks what the first call's full check saw. `extents`
    (from the layouts, so per plan) leaves one data_ptr() per tensor and interval tests per call."""
    in_extents, out_extents = extents
    spans = [(inputs[i].data_ptr(), n) for i, n in in_extents]
    first_out = len(spans)
    spans += [(outs[k].data_ptr(), n) for k, n in out_extents]
    for j in range(first_out, len(spans)):
        lo, n = spans[j]
        hi = lo + n
        for m, (xlo, xn) in enumerate(spans):
            if lo < xlo + xn and xlo < hi and m != j:
                raise AliasingError(f"{spec.name}: an output shares memory with another argument "
                                    "(the port assumes no aliasing)")


@functools.cache
def _raw_stream() -> Callable[[int], int]:
    """device index -> the handle of its current CUDA stream (the capture stream inside
    torch.cuda.graph); torch's internal accessor is much cheaper than the public one."""
    torch = _torch()
    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fast is not None:
        return fast
    return lambda index: torch.cuda.current_stream(index).cuda_stream


# Launches of a cutile-rs plan that try to record a prepared launch (library.ReplayApi): the first
# launch of a new specialization goes through cutile's own launcher (compile, load) and records
# nothing; the next one is resolved and recorded.
PREPARE_ATTEMPTS = 3
MISALIGNED = "{}: an array's base address is not 16-byte aligned"


class _Replay:
    """A prepared launch in the library, freed once nothing holds this object."""

    __slots__ = ("handle", "__weakref__")

    def __init__(self, handle: int, free: Callable[[int], None]):
        import ctypes
        self.handle = ctypes.c_uint64(handle)
        weakref.finalize(self, free, handle)


class RustLaunch:
    """One launch through the generated C ABI. Every value but the array addresses and the stream is
    a function of the call key, so once the library recorded one resolved launch of it (a prepared
    launch: library.ReplayApi), a call passes only the addresses and the stream to
    `tileport_launch_prepared`, which skips the launcher's checks, key and lookup, all of which
    would give the same result. Until then (and with a library that predates prepared launches) it
    calls the entry's launcher with prepared ctypes arguments (library.PreparedLaunch), one copy
    per thread since a call writes the descriptors' pointers. `run(groups, device_index)`
    launches: a closure over what it reads (calling a function costs less than an instance's
    __call__, and each lookup on `self` it avoids is one less per launch)."""

    def __init__(self, recorded: RecordedLaunch, launch: Launch, device_index: int):
        """`launch`: the plan's launch that `recorded` traces (its tensors give the descriptors)."""
        from tileport.ops.backends import library
        from tileport.runtime.tensors import describe
        entry = library()[recorded.kernel]
        arrays = {p: describe(launch.args[p], p).desc for p, a in recorded.args.items() if isinstance(a, ArrayRef)}
        values = {p: v for p, v in recorded.args.items() if p not in arrays}
        prepared = entry.prepare(recorded.grid, device_index, arrays, values)
        order = [p.name for p in entry.params if p.kind == "array"]
        self.sources = [(recorded.args[p].group, recorded.args[p].index, recorded.args[p].offset) for p in order]
        self._prepared = prepared
        self._by_thread = {get_ident(): prepared}
        self._slots = {get_ident(): self._thread_slots(prepared)}
        self._stream = _raw_stream()
        self._raw, self._lib = entry.raw, entry.lib
        self._api = entry.lib.replay
        self._attempts = PREPARE_ATTEMPTS if self._api is not None else 0
        self._replay: _Replay | None = None
        self._fast: dict[int, tuple] = {}  # thread -> (address array, stream slot, C arguments, _Replay)
        self._local = threading.local()  # .fast: this thread's entry of _fast (cheaper to read per call)
        self.kernel = recorded.kernel
        self.run = self._launcher()

    def _thread_slots(self, prepared: Any) -> tuple:
        """(((descriptor, group, index, byte offset), ...), stream slot, C arguments) of one thread's copy."""
        slots = tuple((d, g, i, off) for d, (g, i, off) in zip(prepared.descs, self.sources))
        return slots, prepared.stream, prepared.args

    def _for_this_thread(self) -> tuple:
        prepared = self._by_thread[get_ident()] = self._prepared.copy()
        slots = self._slots[get_ident()] = self._thread_slots(prepared)
        return slots

    def _fast_for_this_thread(self, replay: _Replay) -> tuple:
        """This thread's arguments of the prepared launch (a call writes the addresses and stream)."""
        import ctypes
        addresses = (ctypes.c_uint64 * len(self.sources))()
        stream = ctypes.c_uint64(0)
        fast = self._fast[get_ident()] = self._local.fast = (addresses, stream, (replay.handle, addresses, stream),
                                                              replay)
        return fast

    def _launcher(self) -> Callable[[tuple, int], None]:
        local, stream_of, kernel = self._local, self._stream, self.kernel
        sources = tuple((k, g, i, off) for k, (g, i, off) in enumerate(self.sources))
        replay = self._api.launch if self._api is not None else None
        by_entry = self._launch_entry

        def run(groups: tuple, device_index: int) -> None:
            try:
                addresses, stream, args, _ = local.fast
            except AttributeError:  # no prepared launch yet, or not on this thread
                return by_entry(groups, device_index)
            acc = 0
            for k, g, i, off in sources:
                addresses[k] = ptr = groups[g][i].data_ptr() + off
                acc |= ptr
            if acc & 15:  # the key holds layouts, not addresses: a view of the same layout may sit anywhere
                raise MisalignedError(MISALIGNED.format(kernel))
            stream.value = stream_of(device_index)  # read per launch: the caller's stream (or capture stream) now
            rc = replay(*args)
            if rc:
                raise_for(rc, self._lib.last_error())
        return run

    def _launch_entry(self, groups: tuple, device_index: int) -> None:
        """The launch through the entry's launcher (PreparedLaunch.__call__, inlined), recording a
        prepared launch while attempts remain; a thread that finds one made switches to it."""
        if self._replay is not None:
            self._fast_for_this_thread(self._replay)
            return self.run(groups, device_index)
        slots, stream, args = self._slots.get(get_ident()) or self._for_this_thread()
        acc = 0
        for desc, g, i, off in slots:
            desc.ptr = ptr = groups[g][i].data_ptr() + off
            acc |= ptr
        if acc & 15:  # the key holds layouts, not addresses: a view of the same layout may sit anywhere
            raise MisalignedError(MISALIGNED.format(self.kernel))
        stream.value = self._stream(device_index)
        if self._attempts <= 0:
            rc = self._raw(*args)
            if rc:
                raise_for(rc, self._lib.last_error())
        else:
            self._recording(args, [desc for desc, *_ in slots])

    def _recording(self, args: tuple, descs: list) -> None:
        """The entry's launch with the library recording it; keeps the prepared launch made of it. A failed
        launch raises its own error (read before `take`, whose "nothing recorded" would replace it)."""
        import ctypes
        self._attempts -= 1
        api = self._api
        addresses = (ctypes.c_uint64 * len(descs))(*map(ctypes.addressof, descs))
        api.record_next()
        try:
            rc = self._raw(*args)
        except BaseException:  # end the recording anyway: a recording thread copies every resolved launch
            api.free(api.take(self._prepared.device, addresses, len(descs)))
            raise
        error = self._lib.last_error() if rc else ""
        handle = api.take(self._prepared.device, addresses, len(descs))
        if handle and not rc and self._replay is None:
            self._replay = _Replay(handle, api.free)
        elif handle:
            api.free(handle)
        if rc:
            raise_for(rc, error)

    def __call__(self, groups: tuple, device_index: int) -> None:
        self.run(groups, device_index)


class CutileLaunch:
    """One launch through cuTile Python (`ct.launch`), its positional arguments rebuilt per call
    (views of the call's tensors)."""

    def __init__(self, spec: OpSpec, recorded: RecordedLaunch):
        import cuda.tile as ct

        from tileport.ops.backends_cutile import _grid, _kernel, positional_args
        self.kernel, params = _kernel(spec.kernel_path, recorded.kernel)
        self.args = positional_args(params, Launch(recorded.kernel, recorded.grid, recorded.args))
        self.grid = _grid(Launch(recorded.kernel, recorded.grid, recorded.args))
        self.launch = ct.launch

    def __call__(self, groups: tuple, device_index: int) -> None:
        args = tuple(_view(groups, a) if isinstance(a, ArrayRef) else a for a in self.args)
        self.launch(_torch().cuda.current_stream(device_index), self.grid, self.kernel, args)

    run = __call__


def _view(groups: tuple, a: ArrayRef) -> Any:
    src = groups[a.group][a.index]
    if a.whole:
        return src
    shape, stride, dtype = a.layout
    if dtype != src.dtype:
        src = src.view(dtype)
    return src.as_strided(shape, stride, src.storage_offset() + a.offset // src.element_size())


def record(spec: OpSpec, backend: str, inputs: tuple, outs: tuple, launches: Sequence[Launch],
           allocated: bool, multi_output: bool) -> CachedPlan:
    """The cached form of `launches` (the spec's plan for `inputs` -> `outs`) on a tile backend;
    NotCacheable if it cannot be replayed from the call key alone. `allocated`: the op allocated
    `outs` (a replay allocates them again)."""
    recorded, temps = trace(inputs, outs, launches)
    device = outs[0].device
    if backend == "cutile-rs":
        bound = [RustLaunch(r, launch, device.index or 0) for r, launch in zip(recorded, launches)]
    else:
        bound = [CutileLaunch(spec, r) for r in recorded]
    out_layouts = tuple(_layout(o) for o in outs) if allocated else None
    like = _template_input(inputs, outs[0]) if allocated and len(outs) == 1 else None
    return CachedPlan(spec, device, out_layouts, multi_output, temps, bound, like)


def _template_input(inputs: tuple, out: Any) -> int | None:
    """The index of a plain tensor input of `out`'s device and layout that torch.empty_like turns
    into a tensor of that layout (it keeps the strides of dense tensors only), else None. Found
    from the key's layouts and devices, so it holds for every call with that key."""
    torch = _torch()
    for i, x in enumerate(inputs):
        if type(x) is torch.Tensor and x.device == out.device and _layout(x) == _layout(out) \
                and _layout(torch.empty_like(x)) == _layout(out):
            return i
    return None
