"""Tuned launch configurations: the on-disk cache the GPU search (`tileport.gpu.autotune`) writes and
the plans read.

An op with a `ConfigSpace` (`spec.tune`) plans with `resolve(spec, x, config)`:

| situation                                             | configuration used                         |
|-------------------------------------------------------|--------------------------------------------|
| `config=` given (the search, tests)                   | that one, checked to be a candidate        |
| a CUDA input and a cached entry for its key           | the cached one (checked to be a candidate) |
| otherwise (no entry, CPU / meta device, TILEPORT_AUTOTUNE=0) | `spec.tune.default(shape, dtype)`   |

Key of an entry: (GPU name, op, backend, dtype, shape class, fingerprint of the space). The backend is
the one the caller plans for (`planning_for(backend)`, set by the call path); the fingerprint hashes
the declared axes and the kernel file, so an entry tuned for other kernels or another space is never
used (a miss, not an error). One JSON file per GPU name under the cache directory:
$TILEPORT_AUTOTUNE_DIR, else $XDG_CACHE_HOME/tileport/autotune, else ~/.cache/tileport/autotune;
written atomically. Nothing here imports torch at module import time.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator, Mapping

from tileport.atomic import write_text_atomic
from tileport.cache import user_cache_dir
from tileport.ops.spec import ConfigSpace, OpSpec

DIR_ENV = "TILEPORT_AUTOTUNE_DIR"
ENABLE_ENV = "TILEPORT_AUTOTUNE"  # "0": plans ignore the cache (deterministic defaults)
FORMAT = 1

_backend: contextvars.ContextVar[str | None] = contextvars.ContextVar("tileport_planning_backend",
                                                                     default=None)
_loaded: dict[Path, dict] = {}


class TuneCacheError(ValueError):
    """A cache file that cannot be used (unreadable, or an entry that is not a candidate)."""


@contextlib.contextmanager
def planning_for(backend: str) -> Iterator[None]:
    """Plans made inside the block are for `backend` (selects the tuned entry)."""
    token = _backend.set(backend)
    try:
        yield
    finally:
        _backend.reset(token)


def cache_dir() -> Path:
    return user_cache_dir(DIR_ENV, "autotune")


def cache_path(gpu: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu).strip("_") or "gpu"
    return cache_dir() / f"{slug}.json"


@functools.lru_cache(maxsize=64)
def _file_digest(path: Path, mtime_ns: int) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def fingerprint(spec: OpSpec) -> str:
    """Hash of the declared axes and the kernel source: a cached entry is valid for these only."""
    assert spec.tune is not None
    h = hashlib.sha256(json.dumps({k: list(v) for k, v in sorted(spec.tune.axes.items())},
                                  sort_keys=True).encode())
    h.update(_file_digest(spec.kernel_path, spec.kernel_path.stat().st_mtime_ns))
    return h.hexdigest()[:16]


def entry_key(spec: OpSpec, backend: str, dtype: str, shape: tuple[int, ...]) -> str:
    assert spec.tune is not None
    return "|".join((spec.name, backend, dtype, spec.tune.shape_class(tuple(shape)), fingerprint(spec)))


def check_config(space: ConfigSpace, config: Mapping[str, Any], shape: tuple[int, ...], dtype: str,
                 what: str) -> dict:
    """`config` as a dict, if it is one of the candidates of (shape, dtype); else TuneCacheError."""
    config = dict(config)
    if config not in space.candidates(tuple(shape), dtype):
        raise TuneCacheError(f"{what}: {config} is not a candidate for shape {tuple(shape)} {dtype} "
                             f"(axes: {dict(space.axes)})")
    return config


def load(gpu: str) -> dict:
    """The entries cached for `gpu` (empty when there is no file); memoized per process."""
    path = cache_path(gpu)
    if path not in _loaded:
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise TuneCacheError(f"{path}: unreadable autotune cache ({e}); delete it or re-run "
                                 "`python3 -m tileport.gpu.autotune`") from e
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
            raise TuneCacheError(f"{path}: not an autotune cache of format {FORMAT}; delete it or re-run "
                                 "`python3 -m tileport.gpu.autotune`")
        _loaded[path] = data["entries"]
    return _loaded[path]


def store(gpu: str, key: str, entry: dict) -> Path:
    """Add or replace one entry (read, update, atomic rewrite of the GPU's file)."""
    path = cache_path(gpu)
    _loaded.pop(path, None)
    entries = dict(load(gpu))
    entries[key] = entry
    write_text_atomic(path, json.dumps({"format": FORMAT, "gpu": gpu, "entries": entries},
                                       indent=1, sort_keys=True))
    _loaded[path] = entries
    return path


def forget_loaded() -> None:
    """Drop the memoized files (the next lookup reads the disk again)."""
    _loaded.clear()


def _gpu_name(device: Any) -> str | None:
    """Name of the CUDA device of a tensor (None for any other device)."""
    dev = getattr(device, "type", None)
    if dev != "cuda":
        return None
    import torch
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.get_device_name(index)


def cached_config(spec: OpSpec, gpu: str, backend: str, dtype: str, shape: tuple[int, ...]) -> dict | None:
    entry = load(gpu).get(entry_key(spec, backend, dtype, shape))
    if entry is None:
        return None
    assert spec.tune is not None
    return check_config(spec.tune, entry["config"], shape, dtype, f"{cache_path(gpu)} [{spec.name}]")


def resolve(spec: OpSpec, x: Any, config: Mapping[str, Any] | None) -> dict:
    """The configuration a plan of `spec` uses for its first input `x` (see the module table)."""
    space = spec.tune
    assert space is not None, f"{spec.name} declares no configuration space"
    shape, dtype = tuple(int(s) for s in x.shape), str(x.dtype).removeprefix("torch.")
    if config is not None:
        return check_config(space, config, shape, dtype, f"{spec.name} config=")
    backend = _backend.get()
    if backend is not None and os.environ.get(ENABLE_ENV, "1") != "0":
        gpu = _gpu_name(getattr(x, "device", None))
        if gpu is not None:
            tuned = cached_config(spec, gpu, backend, dtype, shape)
            if tuned is not None:
                return tuned
    return dict(space.default(shape, dtype))
