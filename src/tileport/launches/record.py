"""`tileport record -- <command>`: run the user's own program (or tests) and record every kernel launch
into a launch spec (tileport.launches.spec; schema in docs/pipeline.md, "Launch specs").

This is the one tileport command that executes user code, because the user asks it to run their
program. It starts the command with a bootstrap directory first on PYTHONPATH whose `sitecustomize`
calls `install_hooks()` in every Python process the command starts. The hooks are a registry keyed by
framework (`HOOKS`): each names the module whose import triggers it and a function that wraps that
framework's launch entry point: `cutile` wraps `cuda.tile.launch`; `triton` wraps
`triton.runtime.jit.JITFunction.run`, which every `kernel[grid](...)` launch (and the autotuner, for
each configuration it launches, benchmark runs included) goes through; warm-up compiles are not launches
and are not recorded.

Each wrapped launch describes its kernel (name, qualname, source file), grid and arguments (arrays:
dtype, shape, strides in elements, value range of integer arrays and the values of small ones; scalars:
dtype and value; `ct.Constant` / `tl.constexpr` parameters: value; Triton launch options such as
num_warps) before calling the real launch, which is never altered: a failure to describe or to write is
reported once on stderr and the program runs on. A new launch is merged into the spec at once (under a
file lock, written atomically, so several processes can record into one spec), within the caps per kernel
of `tileport.launches.bounds`; repeats are counted in memory and merged every second and at exit, so a
process that dies loses at most its last second of counts. `run` shows the progress line
(`tileport.launches.progress`).
"""

from __future__ import annotations

import atexit
import fcntl
import importlib.util
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tileport.launches.bounds import DEFAULT_LAUNCHES, DEFAULT_SPECIALIZATIONS, Caps, Fill, fill_of, merge_capped
from tileport.launches.progress import run_with_progress
from tileport.launches.spec import (DTYPE_NAMES, TRITON_DTYPE, Dropped, LaunchArg, LaunchRecord, absorb,
                                    dropped_from_dict, grid3, load_spec, record_from_dict, write_spec)

SPEC_ENV = "TILEPORT_RECORD_SPEC"
HOME_ENV = "TILEPORT_RECORD_HOME"
MAX_SPECIALIZATIONS_ENV = "TILEPORT_RECORD_MAX_SPECIALIZATIONS"
MAX_LAUNCHES_ENV = "TILEPORT_RECORD_MAX_LAUNCHES"
FLUSH_ENV = "TILEPORT_RECORD_FLUSH_SECONDS"
BOOT_DIR = Path(__file__).parent / "record_boot"


# ------------------------------------------------------------------------------------ the recorder

class Recorder:
    """Launch records of this process, merged into the spec file named by $TILEPORT_RECORD_SPEC.

    A launch not seen before is merged at once, with every pending count; repeats, and new launches the
    caps would drop, are counted in memory and merged by a flusher thread every `flush_every` seconds and
    at exit, so a process that dies (SIGKILL, os._exit) loses at most the counts of its last interval."""

    def __init__(self, path: Path, caps: Caps = Caps(), flush_every: float = 1.0):
        self.path, self.caps, self.flush_every = path, caps, flush_every
        self.seen: set[str] = set()
        self.pending: dict[str, LaunchRecord]  # counts (and value ranges) not yet in the spec
        self.fill = Fill()                          # the spec's fill as of this process's last merge
        self.warned = False
        self.closed = False
        self._fresh_state()
        os.register_at_fork(after_in_child=self._fresh_state)

    def _fresh_state(self) -> None:
        """No pending counts, locks or thread of a parent: a forked child counts its own launches."""
        self.lock = threading.Lock()     # seen / pending / fill
        self.writing = threading.Lock()  # one merge into the spec at a time (exit waits for the flusher's)
        self.flusher: threading.Thread | None = None
        self.pending = {}

    def add(self, record: LaunchRecord) -> None:
        key = record.key()
        with self.lock:
            if key in self.seen or self.fill.drops(record, self.caps):
                self.seen.add(key)
                if key in self.pending:
                    absorb(self.pending[key], record)
                else:
                    self.pending[key] = record
                self._start_flusher()
                return
            self.seen.add(key)
        self.flush([record])

    def _start_flusher(self) -> None:
        if self.flusher is None:
            self.flusher = threading.Thread(target=self._flush_periodically, name="tileport-record", daemon=True)
            self.flusher.start()

    def _flush_periodically(self) -> None:
        while not self.closed:
            time.sleep(self.flush_every)
            self.flush()

    def close(self) -> None:
        self.flush()
        self.closed = True

    def flush(self, records: list[LaunchRecord] = ()) -> None:
        with self.writing:
            with self.lock:
                todo = list(self.pending.values()) + list(records)
                self.pending.clear()
            if not todo:
                return
            try:
                fill = merge_into(self.path, todo, self.caps)
            except Exception as e:  # noqa: BLE001 - recording must never break the user's program
                self.warn(f"could not write {self.path}: {type(e).__name__}: {e}")
                return
            with self.lock:
                self.fill = fill

    def warn(self, message: str) -> None:
        if not self.warned:
            self.warned = True
            print(f"tileport record: {message}", file=sys.stderr)


def merge_into(path: Path, records: list[LaunchRecord], caps: Caps = Caps()) -> Fill:
    """Merge records into the spec at `path` (created if absent) within `caps`, under an exclusive file
    lock; returns the spec's fill after the merge."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old: list[LaunchRecord] = []
        dropped: list[Dropped] = []
        if path.is_file() and path.stat().st_size:
            data = json.loads(path.read_text())
            old = [record_from_dict(d) for d in data["launches"]]
            dropped = [dropped_from_dict(d) for d in data.get("dropped", [])]
        merged, dropped = merge_capped(old, dropped, records, caps)
        write_spec(path, merged, dropped)
        return fill_of(merged)


_RECORDER: Recorder | None = None


def recorder() -> Recorder | None:
    global _RECORDER
    if _RECORDER is None and os.environ.get(SPEC_ENV):
        _RECORDER = Recorder(Path(os.environ[SPEC_ENV]), caps_from_env(), _env_number(FLUSH_ENV, 1.0, float))
        atexit.register(_RECORDER.close)
    return _RECORDER


def caps_from_env() -> Caps:
    return Caps(_env_number(MAX_SPECIALIZATIONS_ENV, DEFAULT_SPECIALIZATIONS, int),
                _env_number(MAX_LAUNCHES_ENV, DEFAULT_LAUNCHES, int))


def _env_number(name: str, default, kind):
    try:
        value = kind(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


# ------------------------------------------------------------------------------------ describing values

def dtype_name(dtype: Any) -> str:
    """torch.float16 / numpy dtype('float16') / ct.float16 -> 'float16'."""
    name = getattr(dtype, "name", None) or str(dtype)
    return str(name).rsplit(".", 1)[-1]


def const_value(value: Any) -> tuple[Any, str]:
    """(value, type) of a constant as the spec keeps it: numbers, bools and strings as they are; a Triton
    dtype by the name Triton gives it (`str(tl.float32)` is "fp32", what the Triton frontend's entries are
    pinned to; its repr is "triton.language.float32"), typed TRITON_DTYPE so that a replay passes the dtype
    again, not the string; anything else by its repr."""
    if isinstance(value, (bool, int, float, str)):
        return value, ""
    if type(value).__module__.startswith("triton.language") and hasattr(value, "primitive_bitwidth"):
        return str(value), TRITON_DTYPE
    return repr(value), ""


def describe_value(name: str, value: Any, is_const: bool) -> LaunchArg:
    """One launch argument as a spec entry (arrays by dtype / shape / strides, never by content)."""
    if is_const:
        value, type_ = const_value(value)
        return LaunchArg(name, "const", value=value, type=type_)
    if isinstance(value, bool):
        return LaunchArg(name, "scalar", "bool", value=value)
    if isinstance(value, int):
        return LaunchArg(name, "scalar", "int32" if -2**31 <= value < 2**31 else "int64", value=value)
    if isinstance(value, float):
        return LaunchArg(name, "scalar", "float32", value=value)
    if _is_tensor_descriptor(value):
        return describe_descriptor(name, value)
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        dt = dtype_name(value.dtype)
        if dt not in DTYPE_NAMES:
            return LaunchArg(name, "other", type=f"{type(value).__name__} of {dt}")
        dt = DTYPE_NAMES[dt]
        if len(tuple(shape)) == 0 and not hasattr(value, "__cuda_array_interface__") and not hasattr(value, "data_ptr"):
            return LaunchArg(name, "scalar", dt, value=value.item())  # a numpy scalar
        return LaunchArg(name, "array", dt, [int(n) for n in shape], _strides(value), _range(value, dt),
                         values=_values(value, dt))
    return LaunchArg(name, "other", type=type(value).__name__)


def _is_tensor_descriptor(value: Any) -> bool:
    """Triton's host-side `TensorDescriptor` (base tensor, shape, strides, block_shape, padding)."""
    return type(value).__name__ == "TensorDescriptor" and all(
        hasattr(value, f) for f in ("base", "shape", "strides", "block_shape"))


def describe_descriptor(name: str, value: Any) -> LaunchArg:
    """A tensor descriptor as the array it describes (its shape and strides over its base's elements) with
    its block shape and padding, read when the kernel runs (an autotune pre_hook sets the block shape)."""
    dt = DTYPE_NAMES.get(dtype_name(getattr(value.base, "dtype", "")))
    if dt is None:
        return LaunchArg(name, "other", type=f"TensorDescriptor of {dtype_name(getattr(value.base, 'dtype', ''))}")
    return LaunchArg(name, "array", dt, [int(n) for n in value.shape], [int(s) for s in value.strides],
                     block=[int(n) for n in value.block_shape], padding=str(getattr(value, "padding", "zero")))


def _strides(value: Any) -> list[int]:
    if callable(getattr(value, "stride", None)):  # torch: elements
        return [int(s) for s in value.stride()]
    strides = getattr(value, "strides", None)  # numpy / cupy: bytes
    if strides is None:
        cai = getattr(value, "__cuda_array_interface__", {}) or {}
        strides = cai.get("strides")
    itemsize = getattr(getattr(value, "dtype", None), "itemsize", None) or getattr(value, "itemsize", 1)
    if strides is None:  # C-contiguous
        return _contiguous_strides([int(n) for n in value.shape])
    return [int(s) // int(itemsize) for s in strides]


def _range(value: Any, dt: str) -> list | None:
    """[min, max] of an integer array (the differential test draws its inputs in it)."""
    if not dt.startswith(("int", "uint")) or not all(int(n) for n in value.shape):
        return None
    try:
        return [int(value.min()), int(value.max())]
    except Exception:  # noqa: BLE001 - an array type without min/max: the range stays unknown
        return None


# Integer arrays up to this many elements keep their values: routing tables (offsets per expert, the row
# and expert of each tile) only mean something as recorded; drawn at random inside their range they break
# the invariants the kernel relies on (disjoint output rows) and its own result depends on the block order.
MAX_RECORDED_VALUES = 4096


def _values(value: Any, dt: str) -> list[int] | None:
    """The values of a small C-contiguous integer array, in memory order (else None)."""
    shape = [int(n) for n in value.shape]
    if not dt.startswith(("int", "uint")) or math.prod(shape) > MAX_RECORDED_VALUES:
        return None
    if _strides(value) != _contiguous_strides(shape):
        return None
    try:
        return [int(v) for v in value.reshape(-1).tolist()]
    except Exception:  # noqa: BLE001 - an array type that cannot list its values: they stay unknown
        return None


def _contiguous_strides(shape: list[int]) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return out[::-1]


# ------------------------------------------------------------------------------------ framework hooks

@dataclass(frozen=True)
class Hook:
    framework: str
    module: str                       # importing this module installs the hook
    install: Callable[[Any], None]    # wraps the framework's launch entry point in that module


def _is_constant(annotation: Any) -> bool:
    return any(type(m).__name__ == "ConstantAnnotation" for m in getattr(annotation, "__metadata__", ()))


def _constant_flags(kernel: Any, params: list) -> list[bool]:
    """Which parameters are `ct.Constant`: cuTile's own reading of the annotations (it resolves
    aliases and string annotations), else the annotation objects."""
    nodes = getattr(getattr(kernel, "_annotated_function", None), "parameter_annotations", None)
    if nodes is not None and len(nodes) == len(params) and all(hasattr(n, "constant") for n in nodes):
        return [bool(n.constant) for n in nodes]
    return [_is_constant(p.annotation) for p in params]


def describe_cutile_launch(grid: Any, kernel: Any, args: Any) -> LaunchRecord:
    import inspect
    fn = getattr(kernel, "_pyfunc", None) or kernel._annotated_function.pyfunc
    params = list(inspect.signature(fn).parameters.values())
    values = list(args)
    if len(values) != len(params):
        raise ValueError(f"{fn.__name__}: {len(values)} arguments for {len(params)} parameters")
    consts = _constant_flags(kernel, params)
    described = [describe_value(p.name, v, c) for p, v, c in zip(params, values, consts)]
    g = grid if isinstance(grid, (tuple, list)) else (grid,)
    return LaunchRecord("cutile", fn.__name__, os.path.abspath(fn.__code__.co_filename), grid3(g), described,
                        fn.__qualname__, "recorded")


def _install_cutile(module: Any) -> None:
    original = module.launch
    if getattr(original, "__tileport_recording__", False):
        return

    def launch(stream, grid, kernel, kernel_args, /, *args, **kwargs):
        rec = recorder()
        if rec is not None:
            try:
                rec.add(describe_cutile_launch(grid, kernel, kernel_args))
            except Exception as e:  # noqa: BLE001 - never break the user's launch
                rec.warn(f"could not describe a launch: {type(e).__name__}: {e}")
        return original(stream, grid, kernel, kernel_args, *args, **kwargs)
    launch.__tileport_recording__ = True
    launch.__wrapped__ = original
    module.launch = launch


TRITON_SCALARS = (bool, int, float, str, type(None))  # launch options kept in a record (JSON values)


def _triton_bound(jit_fn: Any, args: tuple, kwargs: dict) -> tuple[list, dict[str, Any], dict[str, Any]]:
    """(parameters, their values by name, the launch options): positional arguments, then keywords,
    then parameter defaults; a keyword that is no parameter is a launch option (num_warps...)."""
    params = list(jit_fn.params)
    names = [p.name for p in params]
    if len(args) > len(names):
        raise ValueError(f"{len(args)} arguments for {len(names)} parameters")
    bound = dict(zip(names, args))
    options = {}
    for k, v in kwargs.items():
        if k in names:
            bound[k] = v
        elif isinstance(v, TRITON_SCALARS):
            options[k] = v
    for p in params:
        if p.name not in bound:
            if not p.has_default:
                raise ValueError(f"parameter `{p.name}` is not given")
            bound[p.name] = p.default
    return params, bound, options


def describe_triton_launch(jit_fn: Any, args: tuple, kwargs: dict, grid: Any) -> LaunchRecord:
    """A `kernel[grid](*args, **kwargs)` launch of a Triton JITFunction: tensors as arrays, Python
    numbers as scalars (int32 / int64 as they fit, float32, bool), `tl.constexpr` parameters and
    `None` (Triton specializes it) as constants; a callable grid is evaluated on the bound arguments,
    as Triton does."""
    fn = jit_fn.fn
    params, bound, options = _triton_bound(jit_fn, args, kwargs)
    described = [LaunchArg(p.name, "const", value=None) if bound[p.name] is None
                 else describe_value(p.name, bound[p.name], bool(p.is_constexpr)) for p in params]
    g = grid(dict(bound)) if callable(grid) else grid
    g = g if isinstance(g, (tuple, list)) else (g,)
    return LaunchRecord("triton", fn.__name__, os.path.abspath(fn.__code__.co_filename), grid3(g), described,
                        fn.__qualname__, "recorded", options=options)


def _install_triton(module: Any) -> None:
    cls = module.JITFunction
    original = cls.run
    if getattr(original, "__tileport_recording__", False):
        return

    def run(self, *args, grid, warmup, **kwargs):
        rec = recorder()
        if rec is not None and not warmup:
            try:
                rec.add(describe_triton_launch(self, args, kwargs, grid))
            except Exception as e:  # noqa: BLE001 - never break the user's launch
                rec.warn(f"could not describe a Triton launch: {type(e).__name__}: {e}")
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    run.__tileport_recording__ = True
    run.__wrapped__ = original
    cls.run = run


HOOKS: dict[str, Hook] = {"cutile": Hook("cutile", "cuda.tile", _install_cutile),
                          "triton": Hook("triton", "triton.runtime.jit", _install_triton)}


class _PostImportFinder:
    """Installs a hook right after its module is imported (before the importer sees the module)."""

    def __init__(self):
        self.busy: set[str] = set()
        self.by_module = {h.module: h for h in HOOKS.values()}

    def find_spec(self, fullname, path=None, target=None):
        hook = self.by_module.get(fullname)
        if hook is None or fullname in self.busy:
            return None
        self.busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy.discard(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _HookedLoader(spec.loader, hook)
        return spec


class _HookedLoader:
    def __init__(self, loader, hook: Hook):
        self.loader, self.hook = loader, hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.hook.install(module)

    def __getattr__(self, name):  # everything else (resource readers, get_code...) is the real loader's
        return getattr(self.loader, name)


def install_hooks() -> None:
    """Hook every framework of the registry: now if its module is loaded, else when it is imported."""
    if recorder() is None:
        return
    for hook in HOOKS.values():
        if hook.module in sys.modules:
            hook.install(sys.modules[hook.module])
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


# ------------------------------------------------------------------------------------ the command

def child_env(spec: Path, base: dict[str, str] | None = None, caps: Caps = Caps(),
              flush_every: float = 1.0) -> dict[str, str]:
    """The command's environment: the bootstrap first on PYTHONPATH (nothing else is added to it),
    where this tileport lives, the spec to write, its caps and how often counts are flushed."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env[HOME_ENV] = str(Path(__file__).resolve().parents[2])  # the directory holding the tileport package
    env[SPEC_ENV] = str(spec.resolve())
    env[MAX_SPECIALIZATIONS_ENV] = str(caps.specializations)
    env[MAX_LAUNCHES_ENV] = str(caps.launches)
    env[FLUSH_ENV] = str(flush_every)
    return env


def run(command: list[str], out: Path, append: bool = False, caps: Caps = Caps(), flush_every: float = 1.0,
        progress_every: float | None = None) -> tuple[int, list[LaunchRecord]]:
    """Run `command` with the launch hooks and the progress line on stderr; returns (its exit code, the
    spec's records)."""
    out = Path(out)
    if not append and out.exists():
        out.unlink()  # the spec describes this run only
    try:
        rc = run_with_progress(command, child_env(out, caps=caps, flush_every=flush_every), out, progress_every)
    except OSError as e:
        print(f"tileport record: cannot run {command[0]!r}: {e}", file=sys.stderr)
        return 127, []
    lock = out.with_name(out.name + ".lock")
    if lock.exists():
        lock.unlink()
    return rc, load_spec(out) if out.is_file() else []


__all__ = ["HOOKS", "Hook", "Recorder", "install_hooks", "run", "describe_value", "describe_cutile_launch",
           "describe_triton_launch",
           "merge_into", "child_env", "caps_from_env", "SPEC_ENV", "BOOT_DIR"]
