"""Load the generated cdylib, build it when its sources changed, and call its entries from Python.

The manifest (`kernels.json`, written next to the crate by the translator) describes every C symbol,
so calls are checked and marshalled without hand-written glue: arrays become zero-copy descriptors,
the current stream is passed, and return codes become typed exceptions.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from tileport import toolchain
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool
from tileport.runtime.abi import ABI_VERSION, TensorDesc, TileportError, WrongDeviceError, raise_for
from tileport.runtime.tensors import check_arrays, describe

REPO_CRATE = Path(__file__).resolve().parents[3] / "rust"
SCALAR_CTYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float, "f64": ctypes.c_double,
                 "bool": ctypes.c_bool, "u32": ctypes.c_uint32}
CONST_CTYPES = {"int": ctypes.c_int32, "bool": ctypes.c_bool, "float": ctypes.c_double,
                "none": ctypes.c_void_p}  # "none": an argument every entry takes as None (a null pointer)
PROFILES = ("release", "dev")  # cargo profiles of the generated crate (Cargo.toml)
PROGRESS_EVERY_S = 30.0  # a build reports that it is still running this often
# A cold release build of the corpus crate (LTO) takes minutes, and a build may first wait for another one's
# lock on the shared target directory.
CARGO_TIMEOUT_S = float(os.environ.get("TILEPORT_CARGO_TIMEOUT_S", 3600))


class BuildError(TileportError):
    """cargo could not build the generated crate."""


class MissingSymbolError(TileportError):
    """The library does not export a launcher its manifest lists (a defect of the crate's host code)."""


def cargo_target_dir() -> Path:
    return Path(os.environ.get("TILEPORT_CARGO_TARGET_DIR")
                or os.environ.get("CARGO_TARGET_DIR")
                or Path.home() / ".cache" / "tileport" / "target")


def cargo_build(crate_dir: Path, profile: str = "release",
                progress: Callable[[float], None] | None = None) -> tuple[Path | None, str, str]:
    """(library path or None, full log, error) of `cargo build --lib` on a crate (incremental:
    up-to-date sources cost a no-op). `progress(seconds)` is called every PROGRESS_EVERY_S while
    cargo runs (a release build with LTO takes minutes)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown cargo profile {profile!r} (one of {', '.join(PROFILES)})")
    crate_dir = Path(crate_dir)
    cmd = ["cargo", "build", "--manifest-path", str(crate_dir / "Cargo.toml"), "--lib"]
    if profile == "release":
        cmd.append("--release")
    if shutil.which("cargo") is None:
        return None, "", ("cargo is not installed: install Rust >= 1.89 with rustup "
                          "(curl https://sh.rustup.rs -sSf | sh -s -- -y), then run: bash scripts/setup.sh")
    env = toolchain.env()
    env["CARGO_TARGET_DIR"] = str(cargo_target_dir())
    returncode, stdout, stderr = _run_reporting(cmd, env, progress)
    log = f"$ {' '.join(cmd)}\n(CARGO_TARGET_DIR={env['CARGO_TARGET_DIR']})\n{stdout}{stderr}\nexit={returncode}\n"
    if returncode != 0:
        errors = [ln for ln in stderr.splitlines() if ln.startswith("error")]
        return None, log, "cargo build failed: " + ("; ".join(errors[:5]) or f"exit {returncode}")
    name = json.loads((crate_dir / "kernels.json").read_text())["crate"].replace("-", "_")  # cargo's lib name
    return cargo_target_dir() / ("release" if profile == "release" else "debug") / f"lib{name}.so", log, ""


def cargo_dependencies(cargo_toml: str) -> str:
    """The [dependencies] section of a Cargo.toml (what a crate's build depends on besides its sources)."""
    m = re.search(r"^\[dependencies\]\n(.*?)(?=^\[|\Z)", cargo_toml, re.S | re.M)
    return "\n".join(line for line in (m.group(1) if m else "").splitlines() if line and not line.startswith("#"))


def _run_reporting(cmd: list[str], env: dict[str, str],
                   progress: Callable[[float], None] | None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `cmd`, calling `progress(seconds)` while it runs; past
    CARGO_TIMEOUT_S, cargo and every compiler it started are stopped (exit code -1, the reason last)."""
    try:
        proc = run_tool(cmd, CARGO_TIMEOUT_S, progress=progress, every=PROGRESS_EVERY_S, env=env)
    except ToolTimeout as e:
        return -1, e.stdout or "", f"{e.stderr or ''}\nerror: {e}\n"
    return proc.returncode, proc.stdout, proc.stderr


def build(crate_dir: Path = REPO_CRATE, profile: str = "release",
          progress: Callable[[float], None] | None = None) -> Path:
    """cargo build the crate and return the .so path; BuildError with cargo's output if it fails."""
    so, log, error = cargo_build(crate_dir, profile, progress)
    if so is None:
        raise BuildError(f"{error} ({crate_dir})" + (f":\n{log}" if log else ""))
    return so


@dataclass
class Param:
    name: str
    kind: str  # array | scalar | const
    dtype: str = ""
    rank: int = 0
    type: str = ""
    codes: dict | None = None  # a string constant (a mode, a dtype) -> the integer the launcher takes


class Entry:
    """One C symbol; call with the kernel's arguments by name or position, plus `grid=`."""

    def __init__(self, lib: "KernelLibrary", spec: dict):
        self.lib, self.spec = lib, spec
        self.symbol = spec["symbol"]
        self.params = [Param(p["name"], p["kind"], p.get("dtype", ""), p.get("rank", 0), p.get("type", ""),
                             p.get("codes")) for p in spec["params"]]
        self.names = [p.name for p in self.params]
        fn = getattr(lib.dll, self.symbol, None)  # missing: MissingSymbolError when called
        if fn is not None:
            argtypes = []
            for p in self.params:
                if p.kind == "array":
                    argtypes.append(ctypes.POINTER(TensorDesc))
                elif p.kind == "scalar":
                    argtypes.append(SCALAR_CTYPES[p.dtype])
                else:
                    argtypes.append(CONST_CTYPES[p.type])
            fn.argtypes = argtypes + [ctypes.c_uint32] * 3 + [ctypes.c_int32, ctypes.c_uint64]
            fn.restype = ctypes.c_int32
        self.fn = fn
        # The same symbol without argtypes, for prepared launches: ctypes then passes the prepared
        # ctypes objects as they are, with no per-argument conversion (measured on CPU into an early
        # validation error of a launcher: 2.0 µs per call, vs 3.6 µs with argtypes).
        self.raw = None
        if fn is not None:
            self.raw = lib.dll[self.symbol]
            self.raw.restype = ctypes.c_int32

    def prepare(self, grid: Sequence[int], device: int, arrays: dict[str, TensorDesc],
                values: dict[str, Any]) -> "PreparedLaunch":
        """A launch of this entry with every argument marshalled once: `arrays` gives each array
        parameter's descriptor (its `ptr` is set per call), `values` each scalar / constant."""
        if self.raw is None:
            raise MissingSymbolError(f"{self.lib.path.name} does not export `{self.symbol}` "
                                     f"(kernel `{self.spec['kernel']}`)")
        bound = self.bind((), {**arrays, **values})
        descs, c_values = [], []
        for p in self.params:
            if p.kind == "array":
                descs.append(TensorDesc.from_buffer_copy(bound[p.name]))
            else:
                ctype = SCALAR_CTYPES[p.dtype] if p.kind == "scalar" else CONST_CTYPES[p.type]
                c_values.append(ctype(bound[p.name]))
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        return PreparedLaunch(self, descs, c_values, grid, device)

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        names = self.names
        if len(args) > len(names):
            raise TypeError(f"{self.spec['kernel']}() takes {len(names)} arguments, got {len(args)}")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{self.spec['kernel']}() has no parameter `{k}`")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"{self.spec['kernel']}() is missing {', '.join(missing)}")
        for p in self.params:  # str(tl.float16) is "fp16": dtypes are coded by their Triton name
            if p.codes:
                bound[p.name] = p.codes.get(str(bound[p.name]), -1)  # -1: no entry; the launcher says so
        return bound

    def __call__(self, *args, grid: Sequence[int], stream: int | None = None, **kwargs) -> None:
        if self.fn is None:
            raise MissingSymbolError(f"{self.lib.path.name} does not export `{self.symbol}` "
                                     f"(kernel `{self.spec['kernel']}`)")
        bound = self.bind(args, kwargs)
        c_args, keep, devices = [], {}, set()
        for p in self.params:
            value = bound[p.name]
            if p.kind == "array":
                if value is None:
                    c_args.append(None)  # a null descriptor: the launcher reports it
                    continue
                d = describe(value, p.name)
                keep[p.name] = d
                if d.device is not None:
                    devices.add(d.device)
                c_args.append(ctypes.byref(d.desc))
            else:
                c_args.append(value)
        if len(devices) > 1:
            raise WrongDeviceError(f"{self.spec['kernel']}: arrays are on different devices {sorted(devices)}")
        check_arrays(self.spec, bound, keep)  # alignment, aliasing, strides the port assumes
        device = devices.pop() if devices else _current_device()
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        if stream is None:
            stream = _current_stream(device)
        rc = self.fn(*c_args, *grid, device, stream)
        if rc:
            raise_for(rc, self.lib.last_error())


class PreparedLaunch:
    """One entry's launch with its arguments as ready ctypes objects: a call sets the array
    addresses and the stream, then calls the C symbol (no argument conversion, no allocation).

    A call mutates the launch's own descriptors, so each thread uses its own `copy()`."""

    __slots__ = ("entry", "descs", "values", "grid", "device", "stream", "args")

    def __init__(self, entry: Entry, descs: list[TensorDesc], values: list, grid: tuple, device: int):
        self.entry, self.descs, self.values, self.grid, self.device = entry, descs, values, grid, device
        self.stream = ctypes.c_uint64(0)
        refs, vals, c_args = iter(descs), iter(values), []
        for p in entry.params:
            c_args.append(ctypes.byref(next(refs)) if p.kind == "array" else next(vals))
        self.args = (*c_args, *(ctypes.c_uint32(g) for g in grid), ctypes.c_int32(device), self.stream)

    def copy(self) -> "PreparedLaunch":
        return PreparedLaunch(self.entry, [TensorDesc.from_buffer_copy(d) for d in self.descs], self.values,
                              self.grid, self.device)

    def __call__(self, ptrs: Sequence[int], stream: int) -> None:
        """Launch with the arrays at `ptrs` (one device address per array parameter, in order)."""
        for desc, ptr in zip(self.descs, ptrs):
            desc.ptr = ptr
        self.stream.value = stream
        rc = self.entry.raw(*self.args)
        if rc:
            raise_for(rc, self.entry.lib.last_error())


def _current_device() -> int:
    try:
        import torch
        return torch.cuda.current_device()
    except (ImportError, RuntimeError, AssertionError):
        return 0


def _current_stream(device: int) -> int:
    try:
        import torch
        return torch.cuda.current_stream(device).cuda_stream
    except (ImportError, RuntimeError, AssertionError):
        return 0  # the legacy default stream


@dataclass(frozen=True)
class ReplayApi:
    """The library's prepared launches (support.rs): `record_next()` before a launcher call records
    the resolved launch it makes; `take(device, descriptor addresses, n)` turns it into a handle (0:
    none; the reason is the last error); `launch(handle, addresses, stream)` replays it with new
    array addresses (ctypes objects as they are, no conversion); `free(handle)`."""

    record_next: Any
    take: Any
    launch: Any
    free: Any

    @staticmethod
    def of(dll: Any) -> "ReplayApi | None":
        """The API of `dll`, or None when it predates prepared launches (a launch then always goes
        through the entry's own launcher)."""
        names = ("tileport_record_next", "tileport_take_prepared", "tileport_launch_prepared",
                 "tileport_free_prepared")
        fns = [getattr(dll, name, None) for name in names]
        if any(fn is None for fn in fns):
            return None
        record_next, take, launch, free = fns
        record_next.restype, record_next.argtypes = None, []
        take.restype, take.argtypes = ctypes.c_uint64, [ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t]
        launch.restype = ctypes.c_int32  # no argtypes: the caller passes ready ctypes objects
        free.restype, free.argtypes = None, [ctypes.c_uint64]
        return ReplayApi(record_next, take, launch, free)


class KernelLibrary:
    """The generated cdylib plus its manifest."""

    def __init__(self, so_path: Path, manifest_path: Path):
        self.path = Path(so_path)
        self.manifest = json.loads(Path(manifest_path).read_text())
        self.dll = ctypes.CDLL(str(self.path))
        self.dll.tileport_last_error.restype = ctypes.c_char_p
        self.dll.tileport_abi_version.restype = ctypes.c_int32
        if self.dll.tileport_abi_version() != ABI_VERSION or self.manifest["abi_version"] != ABI_VERSION:
            raise TileportError(f"{self.path} uses ABI {self.dll.tileport_abi_version()}, expected {ABI_VERSION}")
        every = [Entry(self, e) for e in self.manifest["entries"]]
        self.entries = {e.spec["kernel"]: e for e in every}
        # kernels of the same name in several source files (a batch crate) differ by module
        self.module_entries = {(e.spec.get("module"), e.spec["kernel"]): e for e in every}
        self.replay = ReplayApi.of(self.dll)
        if os.environ.get("TILEPORT_JIT_CACHE", "1") != "0":
            rc = self.dll.tileport_enable_jit_cache()
            if rc:
                raise_for(rc, self.last_error())

    def last_error(self) -> str:
        msg = self.dll.tileport_last_error()
        return msg.decode(errors="replace") if msg else ""

    def __getitem__(self, kernel: str) -> Entry:
        try:
            return self.entries[kernel]
        except KeyError:
            raise KeyError(f"no kernel `{kernel}` in {self.path.name}") from None

    def entry(self, kernel: str, module: str | None) -> Entry:
        """The kernel `kernel` of the source module `module` (its file's stem); a kernel whose name no other
        module has is found by name alone (a module named otherwise than its file: `support.py` -> `support_`)."""
        if (module, kernel) in self.module_entries:
            return self.module_entries[(module, kernel)]
        if sum(k == kernel for _m, k in self.module_entries) == 1:
            return self.entries[kernel]
        raise KeyError(f"no kernel `{kernel}` of module `{module}` in {self.path.name}")

    def ir(self, entry: str, generics: Sequence[str], target: str = "sm_90") -> tuple[str, bytes]:
        """Tile IR of one entry, compiled on the CPU by the cutile compiler inside the library."""
        fn = self.dll.tileport_ir
        fn.restype = ctypes.c_int32
        text_p, text_n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
        bc_p, bc_n = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
        rc = fn(entry.encode(), ",".join(generics).encode(), target.encode(), ctypes.byref(text_p),
                ctypes.byref(text_n), ctypes.byref(bc_p), ctypes.byref(bc_n))
        if rc:
            raise_for(rc, self.last_error())
        try:
            text = ctypes.string_at(text_p, text_n.value).decode()
            bytecode = ctypes.string_at(bc_p, bc_n.value)
        finally:
            self.dll.tileport_free(text_p, text_n)
            self.dll.tileport_free(bc_p, bc_n)
        return text, bytecode


_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str, str], KernelLibrary] = {}


def load(crate_dir: Path = REPO_CRATE, so_path: Path | None = None, profile: str = "release",
         progress: Callable[[float], None] | None = None) -> KernelLibrary:
    """The library for `crate_dir`: `so_path` or $TILEPORT_LIB if given, else built with cargo on first use.

    A process loads one build per crate and profile (or library file): later calls return it without
    running cargo; rebuilding while loaded needs a new process (`build()` builds without loading).
    """
    path = so_path or os.environ.get("TILEPORT_LIB") or None
    with _LOCK:
        crate = os.fspath(crate_dir)  # as given: another spelling of the directory only costs a no-op build
        key = (crate, "file", str(path)) if path else (crate, "cargo", profile)
        lib = _LOADED.get(key)
        if lib is None:
            so = Path(path) if path else build(crate_dir, profile, progress)
            lib = _LOADED[key] = KernelLibrary(so, Path(crate_dir) / "kernels.json")
        return lib
