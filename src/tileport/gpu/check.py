"""Differential correctness on the GPU: every op x backend x dtype x shape against PyTorch.

Each record says what ran, the largest error, the tolerance it was held to, and why it failed (an
exception is a failure with its message, never a skip). Ops can run in separate processes (`jobs`)
so the JIT compilations of different ops overlap; kernels compiled once are cached on disk.
"""

from __future__ import annotations

import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from tileport.ops.spec import OpSpec
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

TILE_BACKENDS = ("cutile", "cutile-rs")
OP_TIMEOUT_S = 1800.0  # one operator's checker process (every dtype, shape and backend, JIT compiles included)


def _tensors(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def compare(got: Any, ref: Any, rtol: float, atol: float) -> tuple[bool, float, float, str]:
    """(ok, max abs error, max error relative to the tolerance, message)."""
    import torch
    worst_abs, worst_ratio, msg = 0.0, 0.0, ""
    gots, refs = _tensors(got), _tensors(ref)
    if len(gots) != len(refs):
        return False, math.inf, math.inf, f"{len(gots)} outputs, reference has {len(refs)}"
    for i, (g, r) in enumerate(zip(gots, refs)):
        if g.shape != r.shape or g.dtype != r.dtype:
            return False, math.inf, math.inf, f"output {i}: {tuple(g.shape)} {g.dtype} vs {tuple(r.shape)} {r.dtype}"
        if not r.is_floating_point():  # ids, counts, offsets: exact (rtol * |ref| could pass an off-by-one)
            wrong = g.ne(r)
            if wrong.any():
                bad = float((g.double() - r.double()).abs().max())
                return False, bad, math.inf, f"output {i}: {int(wrong.sum())} integer values differ (max |error| {bad:g})"
            continue
        gf, rf = g.float(), r.float()
        if torch.isnan(gf).ne(torch.isnan(rf)).any():
            return False, math.inf, math.inf, f"output {i}: NaN where the reference has none (or vice versa)"
        if (torch.isinf(rf) & (gf != rf)).any():  # |err| / (atol + rtol * inf) is NaN: it would pass
            return False, math.inf, math.inf, f"output {i}: an infinite reference value is not matched"
        finite = ~torch.isnan(rf)
        # equal values (also equal infinities, e.g. the -inf logsumexp of an empty row) are exact;
        # inf - inf would be NaN, and a NaN error would hide every other error of the tensor
        err = torch.where(gf == rf, 0.0, (gf - rf).abs())[finite]
        if err.numel():
            allowed = atol + rtol * rf.abs()[finite]
            worst_abs = max(worst_abs, float(err.max()))
            worst_ratio = max(worst_ratio, float((err / allowed).max()))
    ok = worst_ratio <= 1.0
    if not ok:
        msg = f"max |error| {worst_abs:.3g} exceeds atol {atol} + rtol {rtol} * |ref| (x{worst_ratio:.2f})"
    return ok, worst_abs, worst_ratio, msg


def run_case(spec: OpSpec, backend: str, dtype: str, shape: tuple, seed: int = 0, device: str = "cuda") -> dict:
    """One differential case through the public API (`call` with `out=`), raising on any error.

    The outputs are allocated here and poisoned (NaN; an integer output with its largest value) before the
    call, so an element the kernel does not write fails the comparison; the inputs must come back
    unmodified, and the op must return the `out=` tensors themselves. Returns the record (ok, max_abs_err, err_over_tol, error)."""
    import torch

    from tileport.ops.api import call
    rec: dict[str, Any] = {"op": spec.name, "backend": backend, "dtype": dtype, "shape": list(shape)}
    tol = spec.tolerances[dtype]
    rec.update(rtol=tol.rtol, atol=tol.atol)
    inputs = spec.make_inputs(shape, dtype, device, seed)
    before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    ref = spec.reference(*inputs)
    outs = spec.allocate(*inputs)
    for o in _tensors(outs):  # integer outputs (ids, counts) with their largest value, as bench poisons them
        o.fill_(float("nan") if o.is_floating_point() else torch.iinfo(o.dtype).max)
    got = call(spec, *inputs, out=outs, backend=backend)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    ok, max_abs, ratio, msg = compare(got, ref, tol.rtol, tol.atol)
    if ok and any(g is not o for g, o in zip(_tensors(got), _tensors(outs))):
        ok, msg = False, "the op did not return the out= tensors"
    changed = [i for i, (b, a) in enumerate(zip(before, inputs))
               if isinstance(b, torch.Tensor) and not torch.equal(b, a)]
    if ok and changed:
        ok, msg = False, f"input(s) {changed} were modified"
    rec.update(ok=ok, max_abs_err=max_abs, err_over_tol=ratio, error=msg)
    return rec


def check_case(spec: OpSpec, backend: str, dtype: str, shape: tuple, seed: int = 0) -> dict:
    """`run_case`, with an exception recorded as the case's failure (never a skip)."""
    t0 = time.perf_counter()
    try:
        rec = run_case(spec, backend, dtype, shape, seed)
    except Exception as e:  # noqa: BLE001 - a crash of one case is that case's failure
        tol = spec.tolerances.get(dtype)
        rec = {"op": spec.name, "backend": backend, "dtype": dtype, "shape": list(shape),
               "rtol": tol.rtol if tol else None, "atol": tol.atol if tol else None,
               "ok": False, "max_abs_err": None, "err_over_tol": None, "error": f"{type(e).__name__}: {e}"[:2000]}
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


def check_op(spec: OpSpec, backends: Iterable[str] = TILE_BACKENDS, dtypes: Iterable[str] | None = None,
             shapes: Iterable[tuple] | None = None) -> list[dict]:
    out = []
    for dtype in dtypes or spec.dtypes:
        for shape in shapes or spec.shapes:
            for backend in backends:
                out.append(check_case(spec, backend, dtype, tuple(shape)))
    return out


def run_parallel(ops: list[str], jobs: int, out_dir: Path, backends: Iterable[str] = TILE_BACKENDS) -> list[dict]:
    """One process per op (at most `jobs` at a time); returns every record."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(op: str) -> list[dict]:
        path = out_dir / f"check-{op}.json"
        cmd = [sys.executable, "-m", "tileport.gpu.check", op, "--json", str(path), "--backends", *backends]
        try:
            proc = run_tool(cmd, OP_TIMEOUT_S)
        except ToolTimeout as e:
            return [{"op": op, "backend": "*", "dtype": "*", "shape": [], "ok": False, "error": str(e)}]
        if proc.returncode != 0 or not path.exists():
            return [{"op": op, "backend": "*", "dtype": "*", "shape": [], "ok": False,
                     "error": f"checker process failed: {proc.stderr[-2000:]}"}]
        return json.loads(path.read_text())
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, ops))
    return [r for rs in results for r in rs]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from tileport.ops.specs import get_spec
    ap = argparse.ArgumentParser(description="GPU correctness of one operator")
    ap.add_argument("op")
    ap.add_argument("--json", required=True)
    ap.add_argument("--backends", nargs="+", default=list(TILE_BACKENDS))
    args = ap.parse_args(argv)
    records = check_op(get_spec(args.op), args.backends)
    Path(args.json).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
