"""Wild driver for the kernels cutile-stencil==0.3.0 generates: each generated file's own launcher on the
package's benchmark domains, with torch tensors (float64, as the package's benchmark).

    tileport record --out launches.json -- python3 eval/wild_drivers/stencil_driver.py

The files are written on the CPU machine by the package's own compile path (`python3 -m eval.wild_gpu
prepare`, or `eval/wild.sh --stencil-gen`), with `stencils.json` beside them: per file, the compile
result's metadata (name, rank, halo widths) and the benchmark domains of its rank (BENCHMARK_DOMAINS of
cutile.benchmarks.stencils). They are carried in .device/wild/stencil-gen ($WILD_STENCIL_DIR overrides).

What the package's benchmark does (CompileResult.benchmark): `u = cp.asarray(np.random.rand(*full))` with
full = domain + 2 * halo on each side, then `launch_<name>(u, cp.zeros_like(u))`. Here the same launcher of
the generated file runs, with three stand-ins because the GPU machine has no cupy:
- the file imports `cupy`: it is loaded with `CupyStandIn` bound to that name, which provides exactly what
  the generated host code calls (zeros, zeros_like, cuda.get_current_stream) over torch for device tensors
  and over numpy for host arrays; anything else raises an AttributeError naming it;
- `_temporal_buffers` (temporal blocking's scratch arrays) keys its cache by cupy's `device.id`, which torch
  tensors lack: it is replaced by the same thing over torch (`count` zero arrays shaped like the input);
- bricked files: `launch_<name>_bricked` runs as written on host numpy arrays (its layout round trip uses
  numpy-only methods), and its call of `launch_<name>` on the flat view is moved to the GPU with the
  view's shape and strides (a slice of the brick-padded array, as the package passes it) and back.
Domains: the smallest and the largest benchmark domain of each rank ($WILD_STENCIL_DOMAINS: `ends`, the
default; `all`; `largest`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_cases, sync  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / ".device" / "wild" / "stencil-gen"
MANIFEST = "stencils.json"  # eval.wild.STENCIL_MANIFEST (the driver does not import tileport)


class StencilSetupError(RuntimeError):
    """The generated files or their manifest are missing or unusable (the message says what to run)."""


# ---------------------------------------------------------------- what to launch (no GPU needed)

def stencil_dir() -> Path:
    return Path(os.environ.get("WILD_STENCIL_DIR") or DEFAULT_DIR)


def load_manifest(folder: Path) -> list[dict]:
    """The generated files the manifest lists as compiled, each present in `folder`."""
    path = folder / MANIFEST
    if not path.is_file():
        raise StencilSetupError(f"{path} is missing: run `python3 -m eval.wild_gpu prepare` where the network "
                                "is, then carry .device/")
    entries = [e for e in json.loads(path.read_text())["files"] if e.get("ok")]
    missing = [e["file"] for e in entries if not (folder / e["file"]).is_file()]
    if missing:
        raise StencilSetupError(f"{folder}: the manifest lists files that are not there: {', '.join(missing)}")
    if not entries:
        raise StencilSetupError(f"{path} lists no generated file")
    return entries


DOMAIN_CHOICES = ("ends", "all", "largest")


def domains(entry: dict, which: str = "ends") -> list[tuple[int, ...]]:
    """The benchmark domains to launch: the smallest and the largest (`ends`), every one (`all`), or the
    largest only (`largest`: the shortest GPU run)."""
    if which not in DOMAIN_CHOICES:
        raise StencilSetupError(f"WILD_STENCIL_DOMAINS={which!r}: one of {', '.join(DOMAIN_CHOICES)}")
    found = [tuple(int(n) for n in d) for d in entry.get("benchmark_domains") or []]
    if not found:
        raise StencilSetupError(f"{entry['file']}: no benchmark domain for rank {entry.get('ndim')} in the manifest")
    if which == "all":
        return found
    ordered = sorted(found, key=lambda d: (int(np.prod(d)), d))
    return [ordered[-1]] if which == "largest" else list(dict.fromkeys([ordered[0], ordered[-1]]))


def full_shape(domain: tuple[int, ...], halo_widths: list[int]) -> tuple[int, ...]:
    """The benchmark's input shape: the domain plus the halo on each side."""
    if len(domain) != len(halo_widths):
        raise StencilSetupError(f"domain {domain} and halo widths {halo_widths} differ in rank")
    return tuple(d + 2 * h for d, h in zip(domain, halo_widths))


def element_strides(a: np.ndarray) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


# ---------------------------------------------------------------- loading a generated file

def _is_device(a: Any) -> bool:
    return type(a).__module__.startswith("torch")


class CupyStandIn(types.ModuleType):
    """`cupy` as the generated host code uses it: torch for device tensors, numpy for host arrays."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.cuda = types.SimpleNamespace(get_current_stream=self._current_stream)

    @staticmethod
    def _current_stream():
        import torch
        return torch.cuda.current_stream()

    @staticmethod
    def zeros_like(a):
        if _is_device(a):
            import torch
            return torch.zeros_like(a)
        return np.zeros_like(a)

    @staticmethod
    def zeros(shape, dtype=float):
        return np.zeros(shape, dtype=dtype)  # called on host arrays' dtypes only (to_bricks)

    def __getattr__(self, name: str):
        raise AttributeError(f"the stencil driver's cupy stand-in has no `{name}` (the generated host code uses "
                             "zeros, zeros_like and cuda.get_current_stream only)")


def load_generated(path: Path) -> types.ModuleType:
    """Import one generated file with `CupyStandIn` as its `cupy` (the name is restored afterwards)."""
    spec = importlib.util.spec_from_file_location(f"stencil_gen_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("cupy")
    sys.modules["cupy"] = CupyStandIn()
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved
    if hasattr(module, "_temporal_buffers"):
        module._temporal_buffers = _temporal_buffers
    return module


def _temporal_buffers(ref, count: int) -> list:
    """The generated helper's contract (`count` zero arrays shaped like `ref`), over torch."""
    import torch
    return [torch.zeros_like(ref) for _ in range(count)]


def launcher_of(module: types.ModuleType, entry: dict) -> Callable:
    name = f"launch_{entry['name']}"
    fn = getattr(module, name, None)
    if not callable(fn):
        raise StencilSetupError(f"{entry['file']}: no launcher `{name}`")
    return fn


# ---------------------------------------------------------------- launching (GPU)

def to_device(a: np.ndarray):
    """A device tensor with the shape and strides of the host view `a`, holding its values."""
    import torch
    t = torch.empty_strided(a.shape, element_strides(a), dtype=getattr(torch, a.dtype.name), device="cuda")
    t.copy_(torch.from_numpy(a))
    return t


def run_bricked(module: types.ModuleType, entry: dict, u_host: np.ndarray) -> np.ndarray:
    """`launch_<name>_bricked` as written, on host arrays, its `launch_<name>` call moved to the GPU."""
    wrapper = getattr(module, f"launch_{entry['name']}_bricked")
    flat_launch = launcher_of(module, entry)

    def on_device(u_flat: np.ndarray, out_flat: np.ndarray, stream=None) -> None:
        u_dev, out_dev = to_device(u_flat), to_device(out_flat)
        flat_launch(u_dev, out_dev, stream)
        np.copyto(out_flat, out_dev.cpu().numpy())

    setattr(module, flat_launch.__name__, on_device)
    try:
        out = np.zeros_like(u_host)
        wrapper(u_host, out)
        return out
    finally:
        setattr(module, flat_launch.__name__, flat_launch)


def launch_file(folder: Path, entry: dict, which: str) -> None:
    """Every chosen benchmark domain through the generated file's own launcher, as the benchmark calls it."""
    import torch
    module = load_generated(folder / entry["file"])
    launch = launcher_of(module, entry)
    bricked = hasattr(module, f"launch_{entry['name']}_bricked")
    rng = np.random.default_rng(0)
    for domain in domains(entry, which):
        shape = full_shape(domain, entry["halo_widths"])
        if bricked:
            run_bricked(module, entry, rng.random(shape))
        else:
            u = torch.rand(shape, dtype=torch.float64, device="cuda")
            launch(u, torch.zeros_like(u))
        sync()


def cases(folder: Path, which: str) -> dict[str, Callable[[], None]]:
    """One case per generated file; a missing setup is one failing case saying what to run."""
    try:
        entries = load_manifest(folder)
    except (StencilSetupError, OSError, ValueError, KeyError) as e:
        message = f"{type(e).__name__}: {e}"

        def setup() -> None:
            raise StencilSetupError(message)
        return {"setup": setup}
    return {Path(e["file"]).stem: (lambda e=e: launch_file(folder, e, which)) for e in entries}


if __name__ == "__main__":
    sys.exit(run_cases("cutile_stencil", cases(stencil_dir(), os.environ.get("WILD_STENCIL_DOMAINS", "ends"))))
