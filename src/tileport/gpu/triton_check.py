"""GPU differential test and parity timing of a port against its SOURCE Triton kernel, on the launches
of a launch spec (`tileport record` captures Triton launches), with the cuTile Python op of the same
semantics as a second timing anchor for the kernels of tileport's own Triton corpus.

Triton has no Tile IR to compare with, so this is the proof of a Triton port: for each launch, random
inputs shaped and strided as recorded (`tileport.gpu.launch_check`: same planning, same input values
for both sides, every array compared afterwards, exactly for integers and bools), the source kernel
run as Triton runs it (`kernel[grid](*args, **options)`, rebuilt from the file's AST by
`tileport.gpu.triton_source`, nothing of the file runs) and the port through the generated cdylib.
Float tolerances (rtol, atol) are `TRITON_TOLERANCES`, with `TF32_TOLERANCE` for f32 arrays of a
kernel that calls `tl.dot` (f32 dots run as TF32 on both sides, possibly with different operand
rounding), its atol scaled by the RMS of the source kernel's array (`tolerance`). Reductions and float
atomics fix no order, in Triton as in the port: the source kernel also runs a second time with another
num_warps (another order inside each program; atomics arrive in another order), and each float array's
atol grows by SPREAD_FACTOR times the largest difference between the two Triton results (`source_spread`;
zero for a kernel whose results do not depend on the order, so its tolerance stays as it is). A Triton
pointer is the first element of the recorded tensor's buffer; the port receives the array its manifest
describes over that buffer: the pointer's view contract (`view`: strides and
mask extents as expressions of the kernel's parameters, evaluated on the launch), else, for a rank-1
array, the whole flat buffer (`port_layouts`).

Parity: median GPU time of each side (L2 flushed, `tileport.gpu.timing`), ratio t(cutile-rs) /
t(Triton) (`times_us` {"triton", "cutile-rs"}). For a corpus kernel (`tileport.ops.triton_kernels`)
the library op of the same semantics runs on cuTile Python on the shape the launch implies
(`ANCHOR_SHAPES`) and its time is reported beside (`anchor`), not graded.

Results are GPU evidence (read by `tileport port --gpu-results`), keyed `launch:<file stem>.<kernel>`
like launch_check's, plus a summary per kernel:

    python -m tileport.gpu.triton_check record --spec SPEC --crate CRATE [--lib SO] --out DIR FILE[::kernel]...
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tileport.gpu.launch_check import (PKG, ArgPlan, KernelLaunches, LaunchPlan, TorchDevice, _copy, _inputs,
                                       _values, compare_arrays, evidence_document, evidence_key, kernels_of,
                                       launch_components, launch_fingerprint, plan_launches, storage_elements,
                                       write_evidence)
from tileport.launches import TRITON_DTYPE, LaunchRecord, load_spec

TRITON_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-12), "float32": (1e-4, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2),
    "float8_e4m3fn": (0.125, 0.125), "float8_e5m2": (0.25, 0.25),
}
TF32_TOLERANCE = (1e-2, 1e-2)
# A float array's atol grows by this many times the source's own spread (`source_spread`): the port is one
# more reduction order, as far from the launch's as the source's second order is, within sampling.
SPREAD_FACTOR = 2.0
HARNESS_FILES = ("gpu/triton_check.py", "gpu/triton_source.py")
EVIDENCE_FILE = "gpu-evidence-triton.json"
SUMMARY_FILE = "triton-summary.json"


# ------------------------------------------------------------------------------------ planning (CPU)

@dataclass
class TritonPlan(LaunchPlan):
    options: dict = field(default_factory=dict)   # Triton launch options recorded (num_warps, num_stages...)
    layouts: dict = field(default_factory=dict)   # array param -> (shape, strides) the port receives over its buffer
    tf32: bool = False                            # the kernel calls tl.dot: f32 arrays get TF32_TOLERANCE


def _evaluate(expr: str, values: dict[str, Any]) -> int:
    """A view stride / extent of the port's manifest (an integer expression over the kernel's scalar and
    constant parameters) for one launch."""
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name) and isinstance(values.get(n.id), int):
            return values[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        raise ValueError(f"`{ast.unparse(n)}` is not an integer of this launch")
    return ev(ast.parse(str(expr), mode="eval").body)


def view_layout(view: dict, arg: Any, storage: int, values: dict[str, Any]) -> tuple[tuple, tuple]:
    """(shape, strides) of the array a port with this pointer view contract receives: strides and
    mask-given extents evaluated on the launch; an extent the masks leave open comes from the recorded
    tensor's dimension of the same stride, and the outermost open one from the buffer's size (the
    launch covers the buffer). ValueError when the view cannot be sized or leaves the buffer."""
    strides = [_evaluate(x, values) for x in view["strides"]]
    extents = [None if e is None else _evaluate(e, values) for e in view["extents"]]
    if any(st <= 0 for st in strides):
        raise ValueError(f"view strides {strides}: only positive strides are replayed")
    open_dims = [i for i, e in enumerate(extents) if e is None]
    outer = max(open_dims, key=lambda i: strides[i]) if open_dims else None
    unused = list(zip(arg.shape, arg.strides))
    for i in open_dims:
        if i == outer:
            continue
        match = next((dim for dim in unused if dim[1] == strides[i]), None)
        if match is None:
            raise ValueError(f"view dimension {i} (stride {strides[i]}) has no extent: no mask bounds it and the "
                             f"recorded tensor {list(arg.shape)} / {list(arg.strides)} has no dimension of that stride")
        unused.remove(match)
        extents[i] = match[0]
    if outer is not None:
        rest = sum((e - 1) * st for i, (e, st) in enumerate(zip(extents, strides)) if i != outer)
        extents[outer] = max(0, (storage - 1 - rest) // strides[outer] + 1)
    reach = sum((e - 1) * st for e, st in zip(extents, strides)) + 1 if all(extents) else 0
    if reach > storage:
        raise ValueError(f"the view {extents} / strides {strides} reaches element {reach - 1} of a buffer of "
                         f"{storage} elements")
    return tuple(extents), tuple(strides)


def port_layouts(record: LaunchRecord, params: list[dict]) -> tuple[list[dict], dict, list[str]]:
    """The port's parameters as the record sees them, the layout each pointer parameter gets, and why a
    pointer cannot be given to the port. A pointer with a view contract (manifest `view`) gets that
    view over the recorded tensor's buffer; a rank-1 pointer without one gets the flat buffer; either is
    planned at the recorded rank."""
    values = {a.name: a.value for a in record.args if a.kind in ("scalar", "const")}
    recorded = {a.name: a for a in record.args if a.kind == "array"}
    out, layouts, problems = [], {}, []
    for p in params:
        arg = recorded.get(p["name"])
        if p.get("kind") != "array" or arg is None:
            out.append(p)
            continue
        if arg.block is not None:  # a tensor descriptor: the port takes the array it describes, as it is
            out.append(p)
            continue
        storage = storage_elements(arg.shape or (), arg.strides or ())
        if p.get("view"):
            try:
                layouts[p["name"]] = view_layout(p["view"], arg, storage, values)
            except ValueError as e:
                problems.append(f"{record.label}: `{p['name']}`: {e}")
            p = {**p, "rank": len(arg.shape or [])}
        elif p.get("rank") == 1 and len(arg.shape or []) != 1:
            layouts[p["name"]] = ((storage,), (1,))
            p = {**p, "rank": len(arg.shape or [])}
        out.append(p)
    return out, layouts, problems


def plan_triton_launches(key: str, records: list[LaunchRecord], params: list[dict],
                         tf32: bool = False) -> tuple[list[TritonPlan], list[str]]:
    """launch_check's planning, per record, with the port's pointer layouts and Triton's options."""
    plans, problems = [], []
    for r in records:
        adjusted, layouts, bad = port_layouts(r, params)
        done, more = plan_launches(key, [r], adjusted)
        if bad or more:
            problems += bad + more
            continue
        plans += [TritonPlan(**vars(p), options=dict(r.options), layouts=layouts, tf32=tf32) for p in done]
    return plans, problems


def tolerance(plan: TritonPlan, arg: ArgPlan, ref: np.ndarray | None = None) -> tuple[float, float] | None:
    """(rtol, atol) for `arg`; None: exact. For the f32 arrays of a kernel calling `tl.dot` the atol is
    TF32_TOLERANCE's times the RMS of the source kernel's array (when given, and above 1): a TF32 dot of
    length K errs in proportion to the dot's magnitude (~sqrt(K) for random inputs), not to the element's,
    so two TF32 products that round their operands differently differ near zero by far more than a fixed
    atol, while a wrong port differs by the RMS itself."""
    if arg.dtype not in TRITON_TOLERANCES:
        return None  # integers and bools: exact
    if not (plan.tf32 and arg.dtype == "float32"):
        return TRITON_TOLERANCES[arg.dtype]
    rtol, atol = TF32_TOLERANCE
    if ref is not None:
        finite = ref[np.isfinite(ref)].astype(np.float64)
        atol *= max(1.0, float(np.sqrt(np.mean(finite * finite)))) if finite.size else 1.0
    return rtol, atol


def calls_dot(text: str, kernel: str) -> bool:
    """Whether `kernel` or a function of the same file it calls uses `*.dot(...)` (ast only)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, todo = set(), [kernel]
    while todo:
        name = todo.pop()
        if name in seen or name not in fns:
            continue
        seen.add(name)
        for n in ast.walk(fns[name]):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "dot":
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                todo.append(n.func.id)
    return False


# ------------------------------------------------------------------------------------ running

def check_triton_launch(plan: TritonPlan, device: Any, seed: int = 0) -> dict:
    """One differential case (the record D grades: backend cutile-rs against the source Triton kernel)."""
    rec: dict[str, Any] = {"op": plan.key, "backend": "cutile-rs", "source": "triton", "kernel": plan.kernel,
                           "launch": plan.label, "dtype": plan.dtype, "shape": plan.shape, "grid": list(plan.grid),
                           "options": plan.options, "seed": seed}
    t0 = time.perf_counter()
    try:
        start = _inputs(plan, device, seed)
        src, port = _copy(plan, device, start), _copy(plan, device, start)
        try:
            device.run_source(plan, _values(plan, device, src))
            device.sync()
        except Exception as e:  # noqa: BLE001 - the reference itself cannot run this launch
            raise RuntimeError(f"the source Triton kernel failed on this launch: {type(e).__name__}: {e}") from e
        spread = source_spread(plan, device, start, src, rec)
        device.run_port(plan, _values(plan, device, port))
        device.sync()
        worst_abs, worst, errors = 0.0, 0.0, []
        for a in (a for a in plan.args if a.kind == "array"):
            ref = device.to_host(a, src[a.name])
            tol = tolerance(plan, a, ref)
            if tol is not None and spread.get(a.name):
                tol = (tol[0], tol[1] + SPREAD_FACTOR * spread[a.name])
            ok, m_abs, ratio, msg = compare_arrays(device.to_host(a, port[a.name]), ref, a.dtype, tol)
            worst_abs, worst = max(worst_abs, m_abs), max(worst, ratio)
            if not ok:
                errors.append(f"`{a.name}`: {msg}")
        rec.update(ok=not errors, max_abs_err=worst_abs, err_over_tol=worst, error="; ".join(errors))
    except Exception as e:  # noqa: BLE001 - a crash of one case is that case's failure, with its message
        rec.update(ok=False, max_abs_err=None, err_over_tol=None, error=f"{type(e).__name__}: {e}"[:2000])
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


def other_warps(plan: TritonPlan) -> TritonPlan:
    """The launch with another num_warps (half, or 2 for one warp): another reduction order, same semantics."""
    warps = int(plan.options.get("num_warps", 4))
    return replace(plan, options={**plan.options, "num_warps": warps // 2 if warps > 1 else 2})


def source_spread(plan: TritonPlan, device: Any, start: dict, src: dict, rec: dict) -> dict[str, float]:
    """Per float array, max |difference| between the source kernel's result (`src`) and the source kernel's
    with another num_warps on the same inputs (`start`), recorded in `rec` ("source_spread"). A second launch
    that fails leaves no spread (the plain tolerances) and says why in `rec` ("source_spread_error")."""
    alt = _copy(plan, device, start)
    other = other_warps(plan)
    try:
        device.run_source(other, _values(other, device, alt))
        device.sync()
    except Exception as e:  # noqa: BLE001 - e.g. the tile does not fit fewer warps: no spread, plain tolerances
        rec["source_spread_error"] = f"num_warps={other.options['num_warps']}: {type(e).__name__}: {e}"[:500]
        return {}
    spread = {}
    for a in (a for a in plan.args if a.kind == "array" and a.dtype in TRITON_TOLERANCES):
        ref, again = (device.to_host(a, h[a.name]).astype(np.float64) for h in (src, alt))
        both = np.isfinite(ref) & np.isfinite(again)
        spread[a.name] = float(np.abs(ref[both] - again[both]).max()) if both.any() else 0.0
    rec["source_spread"] = {k: v for k, v in spread.items() if v}
    return spread


def time_triton_launch(plan: TritonPlan, device: Any, seed: int = 0) -> dict:
    """Parity record (E): median GPU time of the port and of the source Triton kernel on the same inputs."""
    rec: dict[str, Any] = {"op": plan.key, "kernel": plan.kernel, "launch": plan.label, "dtype": plan.dtype,
                           "shape": plan.shape, "grid": list(plan.grid), "times_us": {}, "errors": {}}
    handles = _inputs(plan, device, seed)
    for backend, run in (("triton", device.run_source), ("cutile-rs", device.run_port)):
        values = _values(plan, device, _copy(plan, device, handles))
        try:
            rec["times_us"][backend] = device.time_us(lambda: run(plan, values))
        except Exception as e:  # noqa: BLE001 - recorded per side: E grades what was timed
            rec["errors"][backend] = f"{type(e).__name__}: {e}"[:1000]
    if not rec["errors"]:
        del rec["errors"]
    return rec


class TritonDevice(TorchDevice):
    """The GPU: torch buffers, the source kernel as Triton launches it, the port through the cdylib."""

    def run_source(self, plan: TritonPlan, values: list) -> None:
        self.source[plan.kernel][plan.grid](*source_arguments(plan, values), **plan.options)

    def run_port(self, plan: TritonPlan, values: list) -> None:
        super().run_port(plan, port_arguments(plan, values, lambda v, shape, strides: v.as_strided(shape, strides)))


def source_arguments(plan: TritonPlan, values: list) -> list:
    """The values the Triton kernel receives: a Triton dtype constant as the dtype (the spec keeps its name,
    which the port's entries are pinned to; `.to("fp32")` does not compile in Triton); an array recorded as a
    host-side tensor descriptor wrapped again in one, with its recorded block shape and padding."""
    import triton.language as tl
    out = []
    for a, v in zip(plan.args, values):
        if a.kind == "const" and a.type == TRITON_DTYPE:
            v = tl.dtype(v)
        elif a.kind == "array" and a.descriptor is not None:
            from triton.tools.tensor_descriptor import TensorDescriptor
            block, padding = a.descriptor
            v = TensorDescriptor(v, list(v.shape), list(v.stride()), list(block), padding)
        out.append(v)
    return out


def port_arguments(plan: TritonPlan, values: list, restride: Callable[[Any, tuple, tuple], Any]) -> list:
    """The values the port receives: a pointer parameter with a layout gets that (shape, strides) over
    the recorded tensor's buffer (`restride(view, shape, strides)`, from the tensor's first element)."""
    return [restride(v, *plan.layouts[a.name]) if a.name in plan.layouts else v for a, v in zip(plan.args, values)]


# ------------------------------------------------------------------------------------ the cuTile anchor

def _elementwise(name: str) -> Callable[[dict], tuple]:
    return lambda a: tuple(a[name].shape)


# kernel of the corpus -> the library op's shape (spec convention) from the launch's arrays
ANCHOR_SHAPES: dict[str, Callable[[dict[str, ArgPlan]], tuple]] = {
    "vector_add_kernel": _elementwise("a_ptr"), "relu_kernel": _elementwise("x_ptr"),
    "gelu_tanh_kernel": _elementwise("x_ptr"), "swiglu_kernel": _elementwise("a_ptr"),
    "geglu_kernel": _elementwise("a_ptr"),
    "silu_and_mul_kernel": lambda a: (a["x_ptr"].shape[0], a["x_ptr"].shape[1] // 2),
    "softmax_kernel": _elementwise("x_ptr"), "layer_norm_fwd_kernel": _elementwise("x_ptr"),
    "rms_norm_kernel": _elementwise("x_ptr"), "rope_kernel": _elementwise("x_ptr"),
    "matmul_kernel": lambda a: (a["a_ptr"].shape[0], a["b_ptr"].shape[1], a["a_ptr"].shape[1]),
    "matmul_block_ptr_kernel": lambda a: (a["a_ptr"].shape[0], a["b_ptr"].shape[1], a["a_ptr"].shape[1]),
    "attention_fwd_kernel": lambda a: (a["q_ptr"].shape[0], a["q_ptr"].shape[1], a["k_ptr"].shape[1],
                                       a["q_ptr"].shape[2], a["q_ptr"].shape[3], int(bool(a["CAUSAL"].value))),
    "flash_decode_partial_kernel": lambda a: (a["q_ptr"].shape[0], a["q_ptr"].shape[1], a["k_ptr"].shape[1],
                                              a["k_ptr"].shape[2], a["k_ptr"].shape[3]),
}


def anchor_op(path: Path, kernel: str) -> str | None:
    """The library op that anchors a kernel of tileport's own Triton corpus (None for other files)."""
    from tileport.ops.triton_kernels import CORPUS
    resolved = Path(path).resolve()
    return next((k.anchor for k in CORPUS if k.kernel == kernel and k.path.resolve() == resolved), None)


def anchor_case(plan: TritonPlan, op: str) -> tuple[tuple, str]:
    """(op shape, dtype) of the anchor run of one launch."""
    args = {a.name: a for a in plan.args}
    return ANCHOR_SHAPES[plan.kernel](args), plan.dtype


def time_anchor(plan: TritonPlan, op: str, device: TorchDevice) -> dict:
    """The cuTile Python op of the same semantics on the launch's shape: {op, shape, dtype, times_us}."""
    from tileport.gpu.bench import case_inputs, column_runner
    from tileport.ops.api import library_spec
    out: dict[str, Any] = {"op": op}
    try:
        shape, dtype = anchor_case(plan, op)
        out.update(shape=list(shape), dtype=dtype)
        spec = library_spec(op)
        run = column_runner(spec, "cutile", case_inputs(spec, dtype, shape, "randn"))
        out["times_us"] = {"cutile": device.time_us(run)}
    except Exception as e:  # noqa: BLE001 - an anchor that cannot run is reported, it grades nothing
        out["error"] = f"{type(e).__name__}: {e}"[:1000]
    return out


# ------------------------------------------------------------------------------------ fingerprints, summary

def triton_launch_components(source_text: str, crate_dir: Path, module: str, kernel: str,
                             records: list[LaunchRecord]) -> dict[str, str | None]:
    """launch_check's components of a kernel's launch evidence, plus this harness."""
    comps = launch_components(source_text, crate_dir, module, kernel, records)
    text = "".join(f"{f}\n{(PKG / f).read_text()}" for f in HARNESS_FILES)
    comps["triton harness"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return comps


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def summarize(check: list[dict], bench: list[dict], problems: dict[str, list[str]]) -> dict:
    """Per kernel: launches passed / failed, geomean t(cutile-rs)/t(Triton), geomean t(cutile-rs)/t(cuTile op)."""
    keys = sorted({r["op"] for r in check} | {r["op"] for r in bench} | set(problems))
    kernels = {}
    for key in keys:
        c = [r for r in check if r["op"] == key]
        b = [r for r in bench if r["op"] == key and {"triton", "cutile-rs"} <= set(r.get("times_us", {}))]
        anchors = [r for r in bench if r["op"] == key and "cutile-rs" in r.get("times_us", {})
                   and "cutile" in (r.get("anchor") or {}).get("times_us", {})]
        kernels[key] = {
            "launches": len(c), "passed": sum(1 for r in c if r["ok"]), "failed": sum(1 for r in c if not r["ok"]),
            "ratio_vs_triton": geomean([r["times_us"]["cutile-rs"] / r["times_us"]["triton"] for r in b]),
            "ratio_vs_cutile_op": geomean([r["times_us"]["cutile-rs"] / r["anchor"]["times_us"]["cutile"]
                                           for r in anchors]),
            "anchor_op": next((r["anchor"]["op"] for r in bench if r["op"] == key and r.get("anchor")), None),
            "problems": problems.get(key, []),
            "first_failure": next((r["error"][:300] for r in c if not r["ok"]), None)}
    correct = [k for k, v in kernels.items() if v["launches"] and not v["failed"] and not v["problems"]]
    return {"kernels": kernels, "kernels_total": len(kernels), "kernels_correct": len(correct),
            "geomean_ratio_vs_triton": geomean([v["ratio_vs_triton"] for v in kernels.values()
                                                if v["ratio_vs_triton"]]),
            "geomean_ratio_vs_cutile_op": geomean([v["ratio_vs_cutile_op"] for v in kernels.values()
                                                   if v["ratio_vs_cutile_op"]])}


# ------------------------------------------------------------------------------------ recording evidence

def _selected(files: list[str], spec_records: list[LaunchRecord], manifest: dict) -> tuple[list[KernelLaunches],
                                                                                          dict[str, list[str]]]:
    """The kernels to test, and the ones named on the command line that the crate has no port of."""
    found = kernels_of(files, spec_records, manifest)
    problems = {}
    for arg in files:
        path, _, only = arg.partition("::")
        if only and not any(k.kernel == only and k.path == Path(path) for k in found):
            problems[evidence_key(path, only)] = [f"the crate has no port of `{only}` ({Path(path).name})"]
        elif not only and not any(k.path == Path(path) for k in found):
            problems[f"launch:{Path(path).stem}"] = [f"the crate has no port of any kernel of {Path(path).name}"]
    return found, problems


def record_evidence(files: list[str], spec: Path | None, crate_dir: Path, so: Path | None, out_dir: Path,
                    budget_s: float = 0.2, bench: bool = True, anchors: bool = True) -> Path:
    """Run the differential test (and the parity timing) of every kernel of `files` here, on the GPU;
    write `out_dir/gpu-evidence-triton.json` (evidence) and `out_dir/triton-summary.json`, rewritten
    after every kernel so that a run stopped by a time limit keeps what finished."""
    from tileport.gpu.triton_source import source_kernel
    from tileport.runtime.library import load
    crate_dir = Path(crate_dir)
    manifest = json.loads((crate_dir / "kernels.json").read_text())
    spec_records = load_spec(spec) if spec else []
    device = TritonDevice({}, load(crate_dir, so), budget_s)
    found, problems = _selected(files, spec_records, manifest)
    fps, comps, check, timed = {}, {}, [], []

    def write() -> Path:
        doc = evidence_document(fps, comps, check, timed if bench else None, gpu=device.name(),
                                library=str(so or os.environ.get("TILEPORT_LIB") or ""), problems=problems,
                                note="launch differential test: port vs source Triton kernel")
        path = write_evidence(Path(out_dir) / EVIDENCE_FILE, doc)
        write_evidence(Path(out_dir) / SUMMARY_FILE, {**summarize(check, timed, problems), "gpu": device.name(),
                                                      "provenance": doc["provenance"]})
        return path
    for k in found:
        text = k.path.read_text()
        comps[k.key] = triton_launch_components(text, crate_dir, k.path.stem, k.kernel, k.records)
        fps[k.key] = launch_fingerprint(comps[k.key])
        plans, bad = plan_triton_launches(k.key, k.records, k.params, calls_dot(text, k.kernel))
        if bad or not plans:
            problems[k.key] = bad or ["no launches of this kernel in the spec"]
        try:
            device.source[k.kernel] = source_kernel(k.path, k.kernel)
        except Exception as e:  # noqa: BLE001 - the source cannot be rebuilt: that kernel's problem
            problems.setdefault(k.key, []).append(f"source kernel: {type(e).__name__}: {e}")
            plans = []
        op = anchor_op(k.path, k.kernel) if anchors else None
        for i, p in enumerate(plans):
            check.append(check_triton_launch(p, device, seed=i))
            if bench:
                timed.append(time_triton_launch(p, device, seed=i))
                if op and ANCHOR_SHAPES.get(p.kernel):
                    timed[-1]["anchor"] = time_anchor(p, op, device)
        write()
    return write()


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tileport.gpu.triton_check",
                                 description="GPU differential test + parity of ports against their source Triton "
                                             "kernels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help=f"run on a GPU machine; writes {EVIDENCE_FILE} and {SUMMARY_FILE}")
    rec.add_argument("files", nargs="+", help="FILE.py[::kernel]")
    rec.add_argument("--spec", type=Path, required=True, help="launch spec (tileport record)")
    rec.add_argument("--crate", type=Path, required=True, help="the port's crate (kernels.json, src/)")
    rec.add_argument("--lib", type=Path, help="the built library (default: $TILEPORT_LIB, else cargo build)")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--budget", type=float, default=0.2)
    rec.add_argument("--no-bench", action="store_true")
    rec.add_argument("--no-anchors", action="store_true", help="do not time the cuTile Python op beside")
    args = ap.parse_args(argv)
    path = record_evidence(args.files, args.spec, args.crate, args.lib, args.out, args.budget, not args.no_bench,
                           not args.no_anchors)
    data = json.loads(path.read_text())
    summary = json.loads((args.out / SUMMARY_FILE).read_text())
    bad = [r for r in data["check"] if not r["ok"]]
    print(f"wrote {path}: {len(data['check']) - len(bad)}/{len(data['check'])} launches match the source Triton "
          f"kernel; {summary['kernels_correct']}/{summary['kernels_total']} kernels correct; geomean "
          f"t(cutile-rs)/t(Triton) {summary['geomean_ratio_vs_triton']}, vs the cuTile Python op "
          f"{summary['geomean_ratio_vs_cutile_op']}")
    for r in bad:
        print(f"  FAIL {r['launch']}: {r['error'][:300]}")
    for key, probs in data["problems"].items():
        print(f"  {key}: {'; '.join(probs)[:300]}")
    return 0 if data["check"] and not bad and not data["problems"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
