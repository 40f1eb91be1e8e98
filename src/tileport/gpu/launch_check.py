"""GPU differential test and parity timing of a port against its SOURCE cuTile kernel, on the launches of
a launch spec (recorded with `tileport record`, or inferred from the kernel file's host code).

For each launch: random inputs shaped and strided as recorded (floats: standard normal; integers:
uniform in the recorded value range, else in [0, 127]; bools: fair coin), the same values for both
sides; the source kernel runs with `ct.launch` (built by `tileport.capture.kernel_namespace`, the
user's module is not imported) and the port through the generated cdylib (`tileport.runtime.library`);
then EVERY array argument is compared element by element (outputs, in-place updates, and inputs that
must stay unchanged), exactly for integers and bools and within `TOLERANCES` for floats; NaN must
appear at the same places. Parity: median GPU time of each side (`tileport.gpu.timing.gpu_time`, L2
flushed), ratio t(port) / t(source).

Everything up to the launch (planning, input values, comparison) is plain Python + numpy and is
tested on the CPU with a fake device; `TorchDevice` is the GPU part.

Results are GPU evidence (`tileport-gpu-evidence`, read by `tileport port --gpu-results`) keyed by
`launch:<file stem>.<kernel>` with a fingerprint of everything they depend on (`launch_fingerprint`):
the kernel file, the port's module / support code / dependencies / manifest entry, the launches, and
this harness.

    python -m tileport.gpu.launch_check record --spec SPEC --crate CRATE [--lib SO] --out DIR FILE[::kernel]...
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from tileport.launches import LaunchRecord, infer_launches, load_spec, merge, records_hash
from tileport.launches import for_kernel as records_for_kernel

# (rtol, atol) per float dtype: one to two units in the last place. Port and source run the same
# operations (the IR diff checks the structure), so only rounding-order differences remain.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-12), "float32": (1e-5, 1e-6), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2),
    "float8_e4m3fn": (0.125, 0.125), "float8_e5m2": (0.25, 0.25),
}
EXACT = ("int8", "int16", "int32", "int64", "uint8", "bool")
DEFAULT_INT_RANGE = (0, 127)
INT_LIMITS = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
              "int64": (-2**63, 2**63 - 1)}
ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}
MAX_ARRAY_BYTES = 16 << 30  # one replayed array (it exists three times: inputs, source copy, port copy)
HARNESS_FILES = ("gpu/launch_check.py", "runtime/library.py", "runtime/abi.py", "runtime/tensors.py", "capture/ir.py")
PKG = Path(__file__).resolve().parents[1]


def evidence_key(path: Path | str, kernel: str) -> str:
    """How a kernel's launch evidence is keyed (the `op` of its records)."""
    return f"launch:{Path(path).stem}.{kernel}"


def module_of(key: str, kernel: str) -> str | None:
    """The file stem of an evidence key (None for another key)."""
    head, tail = "launch:", f".{kernel}"
    return key[len(head):-len(tail)] if key.startswith(head) and key.endswith(tail) else None


# ------------------------------------------------------------------------------------ planning (CPU)

@dataclass
class ArgPlan:
    name: str
    kind: str                  # array | scalar | const
    dtype: str = ""
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    storage: int = 0           # elements of the buffer the strided view lives in
    low: int | None = None     # integer arrays: inclusive value range of the random inputs
    high: int | None = None
    value: Any = None
    type: str = ""             # const: launches.TRITON_DTYPE for a Triton dtype given by its name
    values: list[int] | None = None  # integer arrays: the recorded values, replayed as they were
    descriptor: tuple | None = None  # (block shape, padding) of an array a Triton kernel takes as a TensorDescriptor


@dataclass
class LaunchPlan:
    key: str
    kernel: str
    grid: tuple[int, int, int]
    args: list[ArgPlan]
    label: str
    dtype: str                 # the case's dtype in the records (first float array, else first array)
    shape: list[int] = field(default_factory=list)


def storage_elements(shape, strides) -> int:
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def plan_launches(key: str, records: list[LaunchRecord], params: list[dict]) -> tuple[list[LaunchPlan], list[str]]:
    """Plans for the records, and why a record cannot be replayed (it does not fit the kernel's
    parameters `params` [{name, kind, rank}], a negative stride, a dtype without tolerance...)."""
    from tileport.launches import fit_problems
    plans, problems = [], []
    for r in records:
        bad = fit_problems(r, params)
        args = []
        for a in r.args:
            if a.kind == "array":
                if any(s < 0 for s in a.strides or []):
                    bad.append(f"`{a.name}`: negative strides are not replayed")
                if a.dtype not in TOLERANCES and a.dtype not in EXACT:
                    bad.append(f"`{a.name}`: no comparison rule for dtype {a.dtype}")
                size = storage_elements(a.shape or (), a.strides or ()) * ITEMSIZE.get(a.dtype, 8)
                if size > MAX_ARRAY_BYTES:
                    bad.append(f"`{a.name}`: {size / 2**30:.1f} GiB exceeds the {MAX_ARRAY_BYTES >> 30} GiB a replayed "
                               "array may take")
                low, high = _int_range(a.dtype, a.range)
                storage = storage_elements(a.shape or (), a.strides or ())
                values = a.values if a.values is not None and len(a.values) == storage and low is not None else None
                args.append(ArgPlan(a.name, "array", a.dtype, tuple(a.shape or ()), tuple(a.strides or ()),
                                    storage, low, high, values=values,
                                    descriptor=None if a.block is None else (tuple(a.block), a.padding or "zero")))
            else:
                args.append(ArgPlan(a.name, a.kind, a.dtype, value=a.value, type=a.type))
        if bad:
            problems += [f"{r.label}: {p}" for p in bad]
            continue
        arrays = [a for a in args if a.kind == "array"]
        main = next((a for a in arrays if a.dtype in TOLERANCES), arrays[0] if arrays else None)
        plans.append(LaunchPlan(key, r.kernel, r.grid, args, r.label, main.dtype if main else "-",
                                list(main.shape) if main else []))
    return plans, problems


def _int_range(dtype: str, recorded: list | None) -> tuple[int | None, int | None]:
    if dtype not in INT_LIMITS:
        return None, None
    lo, hi = (int(recorded[0]), int(recorded[1])) if recorded else DEFAULT_INT_RANGE
    lim = INT_LIMITS[dtype]
    return max(lo, lim[0]), min(hi, lim[1])


def host_values(arg: ArgPlan, rng: np.random.Generator) -> np.ndarray:
    """The buffer behind one array argument, on the host (float32/float64, int64 or bool)."""
    n = arg.storage
    if arg.dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if arg.values is not None:  # a routing table: random values would break what the kernel assumes
        return np.asarray(arg.values, dtype=np.int64)
    if arg.low is not None:
        return rng.integers(arg.low, arg.high + 1, n, dtype=np.int64)
    return rng.standard_normal(n).astype(np.float64 if arg.dtype == "float64" else np.float32)


def compare_arrays(got: np.ndarray, ref: np.ndarray, dtype: str,
                   tolerance: tuple[float, float] | None = None) -> tuple[bool, float, float, str]:
    """(ok, max |error|, max error / allowed, message): exact for integers and bools, else `tolerance`
    (rtol, atol), by default TOLERANCES[dtype]."""
    if got.shape != ref.shape:
        return False, math.inf, math.inf, f"shape {got.shape} vs {ref.shape}"
    if dtype in EXACT:
        diff = got != ref
        n = int(diff.sum())
        if n:
            i = np.argwhere(diff)[0]
            return False, math.inf, math.inf, (f"{n} element(s) differ (exact comparison for {dtype}); first at "
                                               f"{tuple(int(x) for x in i)}: {got[tuple(i)]} vs {ref[tuple(i)]}")
        return True, 0.0, 0.0, ""
    rtol, atol = tolerance or TOLERANCES[dtype]
    g, r = got.astype(np.float64), ref.astype(np.float64)
    if (np.isnan(g) != np.isnan(r)).any():
        return False, math.inf, math.inf, "NaN where the source kernel has none (or the reverse)"
    finite = np.isfinite(r)
    if (g[~finite & ~np.isnan(r)] != r[~finite & ~np.isnan(r)]).any():
        return False, math.inf, math.inf, "an infinity differs from the source kernel's"
    if not finite.any():
        return True, 0.0, 0.0, ""
    err = np.abs(g[finite] - r[finite])
    ratio = err / (atol + rtol * np.abs(r[finite]))
    worst_abs, worst = float(np.nan_to_num(err, nan=np.inf).max()), float(np.nan_to_num(ratio, nan=np.inf).max())
    if worst > 1.0:
        return False, worst_abs, worst, f"max |error| {worst_abs:.3g} exceeds atol {atol} + rtol {rtol} * |ref| (x{worst:.2f})"
    return True, worst_abs, worst, ""


# ------------------------------------------------------------------------------------ running

class Device(Protocol):
    """What the harness needs from a device: buffers, the two kernels, timing."""

    def make(self, arg: ArgPlan, host: np.ndarray) -> Any: ...
    def clone(self, arg: ArgPlan, handle: Any) -> Any: ...
    def value(self, handle: Any) -> Any: ...
    def to_host(self, arg: ArgPlan, handle: Any) -> np.ndarray: ...
    def run_source(self, plan: LaunchPlan, values: list) -> None: ...
    def run_port(self, plan: LaunchPlan, values: list) -> None: ...
    def sync(self) -> None: ...
    def time_us(self, fn: Callable[[], None]) -> float: ...
    def name(self) -> str: ...


def _inputs(plan: LaunchPlan, device: Device, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {a.name: device.make(a, host_values(a, rng)) for a in plan.args if a.kind == "array"}


def _values(plan: LaunchPlan, device: Device, handles: dict[str, Any]) -> list:
    return [device.value(handles[a.name]) if a.kind == "array" else a.value for a in plan.args]


def _copy(plan: LaunchPlan, device: Device, handles: dict[str, Any]) -> dict[str, Any]:
    return {a.name: device.clone(a, handles[a.name]) for a in plan.args if a.kind == "array"}


def check_launch(plan: LaunchPlan, device: Device, seed: int = 0) -> dict:
    """One differential case: the record D grades (`backend` cutile-rs: the port against its source)."""
    rec: dict[str, Any] = {"op": plan.key, "backend": "cutile-rs", "kernel": plan.kernel, "launch": plan.label,
                           "dtype": plan.dtype, "shape": plan.shape, "grid": list(plan.grid), "seed": seed}
    t0 = time.perf_counter()
    try:
        start = _inputs(plan, device, seed)
        src, port = _copy(plan, device, start), _copy(plan, device, start)
        try:
            device.run_source(plan, _values(plan, device, src))
            device.sync()
        except Exception as e:  # noqa: BLE001 - the reference itself cannot run this launch
            raise RuntimeError(f"the source cuTile kernel failed on this launch: {type(e).__name__}: {e}") from e
        device.run_port(plan, _values(plan, device, port))
        device.sync()
        worst_abs, worst, errors = 0.0, 0.0, []
        for a in (a for a in plan.args if a.kind == "array"):
            ok, m_abs, ratio, msg = compare_arrays(device.to_host(a, port[a.name]), device.to_host(a, src[a.name]),
                                                   a.dtype)
            worst_abs, worst = max(worst_abs, m_abs), max(worst, ratio)
            if not ok:
                errors.append(f"`{a.name}`: {msg}")
        rec.update(ok=not errors, max_abs_err=worst_abs, err_over_tol=worst, error="; ".join(errors))
    except Exception as e:  # noqa: BLE001 - a crash of one case is that case's failure, with its message
        rec.update(ok=False, max_abs_err=None, err_over_tol=None, error=f"{type(e).__name__}: {e}"[:2000])
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


def time_launch(plan: LaunchPlan, device: Device, seed: int = 0) -> dict:
    """Parity record (E): median GPU time of the port and of the source kernel on the same inputs."""
    rec: dict[str, Any] = {"op": plan.key, "kernel": plan.kernel, "launch": plan.label, "dtype": plan.dtype,
                           "shape": plan.shape, "grid": list(plan.grid), "times_us": {}, "errors": {}}
    handles = _inputs(plan, device, seed)
    for backend, run in (("cutile", device.run_source), ("cutile-rs", device.run_port)):
        values = _values(plan, device, _copy(plan, device, handles))
        try:
            rec["times_us"][backend] = device.time_us(lambda: run(plan, values))
        except Exception as e:  # noqa: BLE001 - recorded per side: E grades what was timed
            rec["errors"][backend] = f"{type(e).__name__}: {e}"[:1000]
    if not rec["errors"]:
        del rec["errors"]
    return rec


class TorchDevice:
    """The GPU: torch buffers, the source kernel through `ct.launch`, the port through the cdylib."""

    def __init__(self, source_kernels: dict[str, Any], port_library: Any, budget_s: float = 0.2):
        import torch

        from tileport.gpu.timing import make_flush
        self.torch = torch
        self.source, self.library, self.budget = source_kernels, port_library, budget_s
        self.flush = make_flush("cuda")

    def _dtype(self, name: str):
        return getattr(self.torch, name)

    def make(self, arg: ArgPlan, host: np.ndarray):
        base = self.torch.from_numpy(host).to("cuda").to(self._dtype(arg.dtype))
        return base, base.as_strided(arg.shape, arg.strides) if arg.storage else base.new_empty(arg.shape)

    def clone(self, arg: ArgPlan, handle):
        base = handle[0].clone()
        return base, base.as_strided(arg.shape, arg.strides) if arg.storage else base.new_empty(arg.shape)

    def value(self, handle):
        return handle[1]

    def to_host(self, arg: ArgPlan, handle) -> np.ndarray:
        view = handle[1]
        if arg.dtype == "bool":
            return view.cpu().numpy()
        if arg.dtype in EXACT:
            return view.long().cpu().numpy()
        return view.double().cpu().numpy()

    def run_source(self, plan: LaunchPlan, values: list) -> None:
        import cuda.tile as ct
        ct.launch(self.torch.cuda.current_stream(), plan.grid, self.source[plan.kernel], tuple(values))

    def run_port(self, plan: LaunchPlan, values: list) -> None:
        port = self.library.entry(plan.kernel, module_of(plan.key, plan.kernel))  # the name may be in other files
        port(*values, grid=plan.grid, stream=self.torch.cuda.current_stream().cuda_stream)

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def name(self) -> str:
        return self.torch.cuda.get_device_name(0)

    def time_us(self, fn) -> float:
        from tileport.gpu.timing import gpu_time
        return gpu_time(fn, self.flush, budget_s=self.budget).median_us


# ------------------------------------------------------------------------------------ fingerprints

def _h(text: str | bytes | None) -> str | None:
    if text is None:
        return None
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest()[:16]


def _read(p: Path) -> str | None:
    try:
        return p.read_text()
    except OSError:
        return None


def launch_components(source_text: str, crate_dir: Path, module: str, kernel: str,
                      records: list[LaunchRecord]) -> dict[str, str | None]:
    """What the GPU results of one kernel's launches depend on, file by file (hashes)."""
    from tileport.runtime.library import cargo_dependencies
    crate_dir = Path(crate_dir)
    manifest = json.loads(_read(crate_dir / "kernels.json") or "{}")
    entry = next((e for e in manifest.get("entries", []) if e.get("kernel") == kernel and e.get("module") == module),
                 None)
    entry = {k: v for k, v in entry.items() if k != "source"} if entry else None
    harness = "".join(f"{f}\n{_read(PKG / f)}" for f in HARNESS_FILES)
    return {"source": _h(source_text), f"crate:src/{module}.rs": _h(_read(crate_dir / "src" / f"{module}.rs")),
            "crate:src/support.rs": _h(_read(crate_dir / "src" / "support.rs")),
            "crate:dependencies": _h(cargo_dependencies(_read(crate_dir / "Cargo.toml") or "")),
            "crate:manifest entry": _h(json.dumps(entry, sort_keys=True)) if entry else None,
            "launches": records_hash(records)[:16], "harness": _h(harness)}


def launch_fingerprint(components: dict[str, str | None]) -> str:
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()[:24]


# ------------------------------------------------------------------------------------ recording evidence

@dataclass
class KernelLaunches:
    """One kernel of one file, with its launches and the port that runs them."""

    path: Path
    kernel: str
    records: list[LaunchRecord]
    params: list[dict]

    @property
    def key(self) -> str:
        return evidence_key(self.path, self.kernel)


def kernels_of(files: list[str], spec_records: list[LaunchRecord], manifest: dict) -> list[KernelLaunches]:
    """FILE[::kernel] -> each kernel with its launches (the spec's, else the ones its host code fixes)
    and its parameters (from the port's manifest)."""
    out = []
    for arg in files:
        path, _, only = arg.partition("::")
        path_p = Path(path)
        module = path_p.stem
        entries = [e for e in manifest["entries"] if e["module"] == module and (not only or e["kernel"] == only)]
        inferred = infer_launches(path_p).records
        for e in entries:
            recs = records_for_kernel(spec_records, path_p, e["kernel"]) or records_for_kernel(inferred, path_p,
                                                                                               e["kernel"])
            out.append(KernelLaunches(path_p, e["kernel"], merge(recs), e["params"]))
    return out


def record_evidence(files: list[str], spec: Path | None, crate_dir: Path, so: Path | None, out_dir: Path,
                    budget_s: float = 0.2, bench: bool = True) -> Path:
    """Run the differential test (and the parity timing) of every kernel of `files` here, on the GPU,
    and write `out_dir/gpu-evidence-launches.json`."""
    from tileport.capture import kernel_namespace
    from tileport.runtime.library import load
    crate_dir = Path(crate_dir)
    manifest = json.loads((crate_dir / "kernels.json").read_text())
    spec_records = load_spec(spec) if spec else []
    device = TorchDevice({}, load(crate_dir, so), budget_s)
    fps, comps, check, timed, problems = {}, {}, [], [], {}
    for k in kernels_of(files, spec_records, manifest):
        comps[k.key] = launch_components(k.path.read_text(), crate_dir, k.path.stem, k.kernel, k.records)
        fps[k.key] = launch_fingerprint(comps[k.key])
        plans, bad = plan_launches(k.key, k.records, k.params)
        if bad or not plans:
            problems[k.key] = bad or ["no launches"]
        if not plans:
            continue
        device.source[k.kernel] = kernel_namespace(k.path)[k.kernel]  # set before this kernel's plans run
        for i, p in enumerate(plans):
            check.append(check_launch(p, device, seed=i))
            if bench:
                timed.append(time_launch(p, device, seed=i))
    doc = evidence_document(fps, comps, check, timed if bench else None, gpu=device.name(),
                            library=str(so or os.environ.get("TILEPORT_LIB") or ""), problems=problems)
    return write_evidence(out_dir / "gpu-evidence-launches.json", doc)


def evidence_document(fps: dict, comps: dict, check: list[dict], bench: list[dict] | None, *, gpu: str = "",
                      library: str = "", problems: dict | None = None, synthetic: bool = False,
                      note: str = "launch differential test: port vs source cuTile kernel") -> dict:
    """GPU evidence (the format `tileport port --gpu-results` reads) of launch checks and timings."""
    from tileport.gpu.provenance import EVIDENCE_KIND, current_commit
    commit, dirty = current_commit()
    return {"kind": EVIDENCE_KIND,
            "provenance": {"commit": commit, "dirty": dirty, "fingerprints": fps, "components": comps,
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": gpu,
                           "library": library, "command": " ".join(sys.argv), "synthetic": synthetic, "note": note},
            "check": check, "bench": {"records": bench} if bench is not None else None, "problems": problems or {}}


def write_evidence(path: Path, doc: dict) -> Path:
    """Atomic write of an evidence document."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tileport.gpu.launch_check",
                                 description="GPU differential test + parity of ports against their source kernels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run on a GPU machine; writes gpu-evidence-launches.json")
    rec.add_argument("files", nargs="+", help="FILE.py[::kernel]")
    rec.add_argument("--spec", type=Path, help="launch spec (tileport record); else launches inferred from host code")
    rec.add_argument("--crate", type=Path, required=True, help="the port's crate (kernels.json, src/)")
    rec.add_argument("--lib", type=Path, help="the built library (default: $TILEPORT_LIB, else cargo build)")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--budget", type=float, default=0.2)
    rec.add_argument("--no-bench", action="store_true")
    args = ap.parse_args(argv)
    path = record_evidence(args.files, args.spec, args.crate, args.lib, args.out, args.budget, not args.no_bench)
    data = json.loads(path.read_text())
    bad = [r for r in data["check"] if not r["ok"]]
    print(f"wrote {path}: {len(data['check']) - len(bad)}/{len(data['check'])} launches match the source kernel")
    for r in bad:
        print(f"  FAIL {r['launch']}: {r['error'][:300]}")
    for key, probs in data["problems"].items():
        print(f"  {key}: {'; '.join(probs)[:300]}")
    return 0 if data["check"] and not bad and not data["problems"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
