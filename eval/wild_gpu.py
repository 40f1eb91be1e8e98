"""Stages D and E for the wild corpus: record the packages' own launches on a GPU, port on those launches,
test the ports against their source kernels on the GPU, and tabulate correct / parity per kernel.

The GPU machine has no Rust, and the port library must hold the constant values of the recorded launches,
so the flow has a CPU step between two runs of the same GPU command:

    CPU   python3 -m eval.wild_gpu prepare                    # the drivers' wheels, cutile-stencil's generated
                                                              # kernels (stencil-gen/) into .device/wild
    GPU   bash .device/enter.sh bash scripts/h200.sh wild     # 1: records wild-launches.json
    CPU   python3 -m eval.wild_gpu bundle DIR                 # ports on those launches (to B), packs the library
    GPU   bash .device/enter.sh bash scripts/h200.sh wild     # 2: records again, differential test + parity
    CPU   python3 -m eval.wild_gpu grade DIR                  # tileport port --launches --gpu-results; the table

`device` (what h200.sh runs) installs the pinned wheels (no dependencies, no network) beside the
checkout, runs every driver of eval/wild_drivers/ under `tileport record`, then, when a port library
is bundled, `tileport.gpu.launch_check` on the recorded launches; it writes `wild-gpu.json` (per
kernel: launches, correct, parity) whatever happened, saying why a kernel has no result.

cutile-stencil's kernels exist only as files its compile path writes (xdsl, on the CPU machine: `prepare`
runs it, as `eval/wild.sh --stencil-gen` does); the files and their manifest travel in
.device/wild/stencil-gen, where eval/wild_drivers/stencil_driver.py launches them (torch, no cupy), and
`bundle` / `grade` read the same files under the work directory (the evidence fingerprints their text).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any, Sequence

from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

REPO = Path(__file__).resolve().parents[1]
DRIVERS = REPO / "eval" / "wild_drivers"
BUNDLE = REPO / ".device" / "wild"  # wheels, launches.json, crate/, libwild_port.so.xz
LIB_NAME = "libwild_port.so"
DRIVER_TIMEOUT_S = 300
PORT_TIMEOUT_S = 3600  # `tileport port` of a package's kernels (one crate, cargo included)
TRITON_DRIVERS = ("liger_driver.py",)  # run by eval.wild_triton_gpu
STENCIL_GEN = "stencil-gen"  # cutile-stencil's generated files + manifest: under the work directory and the bundle
STENCIL_DIR_ENV = "WILD_STENCIL_DIR"  # where stencil_driver.py finds them
# drivers of generated kernel files (no package to import: they load the files of this bundle folder)
GENERATED_DRIVERS = {"stencil_driver.py": STENCIL_GEN}


def drivers() -> list[Path]:
    """`<package>_driver.py` files: a driver named like its package would shadow it (the script's folder is
    first on sys.path). The Triton wild set's driver is eval.wild_triton_gpu's, not this flow's.
    $WILD_DRIVERS (comma-separated package names, e.g. `cutile_gpt`) keeps only those."""
    only = set(os.environ.get("WILD_DRIVERS", "").split(",")) - {""}
    return sorted(d for d in DRIVERS.glob("*_driver.py") if d.name not in TRITON_DRIVERS
                  and (not only or package_of(d) in only))


def package_of(driver: Path) -> str:
    return driver.stem.removesuffix("_driver")


# ---------------------------------------------------------------- on the GPU machine

def install_wheels(wheels: Sequence[Path], site: Path) -> str:
    """pip install --no-deps --no-index into `site` (the packages' own code only; their heavy
    dependencies are either on the machine, e.g. torch, or reported missing by the drivers)."""
    if not wheels:
        return "no wheels bundled"
    r = run_tool([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                  "--ignore-requires-python",  # cutile-gpt says >=3.13; the GPU machine has 3.12
                  "--target", str(site), *map(str, wheels)], 300)
    return "" if r.returncode == 0 else (r.stderr or r.stdout)[-1000:]


def record_drivers(out: Path, site: Path, bundle: Path = BUNDLE) -> dict[str, Any]:
    """Every driver under `tileport record`, into one spec (out/wild-launches.json)."""
    spec = out / "wild-launches.json"
    spec.unlink(missing_ok=True)  # every driver appends: one spec for all of them
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO / "src"),
                                                        os.environ.get("PYTHONPATH", "")]))
    env[STENCIL_DIR_ENV] = str(bundle / STENCIL_GEN)
    results = {}
    for drv in drivers():
        summary = out / f"driver-{package_of(drv)}.json"
        env["WILD_DRIVER_OUT"] = str(summary)
        t0 = time.perf_counter()
        try:
            r = run_tool([sys.executable, "-m", "tileport.cli", "record", "--append", "--out", str(spec), "--",
                          sys.executable, str(drv)], DRIVER_TIMEOUT_S, env=env)
            rc, tail = r.returncode, (r.stdout + r.stderr)[-3000:]
        except ToolTimeout:
            rc, tail = None, f"timed out after {DRIVER_TIMEOUT_S} s"
        cases = json.loads(summary.read_text())["cases"] if summary.is_file() else {}
        results[package_of(drv)] = {"rc": rc, "seconds": round(time.perf_counter() - t0, 1), "cases": cases, "tail": tail}
    return {"spec": str(spec) if spec.is_file() else None, "drivers": results}


def device(out: Path, bundle: Path = BUNDLE) -> dict[str, Any]:
    """The GPU step (see the module docstring); writes out/wild-gpu.json and returns it."""
    from eval.wild import write_atomic
    out.mkdir(parents=True, exist_ok=True)
    site = out / "site"
    doc: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": _gpu_name()}
    doc["install"] = install_wheels(sorted(bundle.glob("*.whl")), site) or "ok"
    doc["record"] = record_drivers(out, site, bundle)
    evidence = None
    spec = Path(doc["record"]["spec"]) if doc["record"]["spec"] else None
    lib = _library(bundle, out)
    doc["check"] = "not finished (the step ended during the differential test)"
    # written now too: a time limit during the check keeps what the drivers recorded
    write_atomic(out / "wild-gpu.json", json.dumps(doc, indent=1, default=str))
    if spec is None:
        doc["check"] = "no launch recorded (see the drivers' output)"
    elif lib is None:
        doc["check"] = ("no port library bundled for these launches: bring wild-launches.json back and run "
                        "`python3 -m eval.wild_gpu bundle DIR` where cargo is, then this command again")
    else:
        from tileport.launches import load_spec, records_hash
        built_for = bundle / "launches.json"
        same = built_for.is_file() and records_hash(load_spec(built_for)) == records_hash(load_spec(spec))
        doc["library_matches_launches"] = same
        files = sorted({r.file for r in load_spec(spec)})
        from tileport.gpu.launch_check import record_evidence
        try:
            evidence = record_evidence(files, spec, bundle / "crate", lib, out)
            doc["check"] = "ok"
        except Exception as e:  # noqa: BLE001 - reported in the JSON, which says why
            doc["check"] = f"launch_check failed: {type(e).__name__}: {e}"[:2000]
    doc["kernels"] = kernel_rows(spec, evidence)
    write_atomic(out / "wild-gpu.json", json.dumps(doc, indent=1, default=str))
    return doc


def _library(bundle: Path, out: Path) -> Path | None:
    """The bundled port library (xz-compressed in the bundle), unpacked under `out`; None if not bundled."""
    packed = bundle / f"{LIB_NAME}.xz"
    if not packed.is_file() or not (bundle / "crate" / "kernels.json").is_file():
        return None
    import lzma
    lib = out / LIB_NAME
    lib.write_bytes(lzma.decompress(packed.read_bytes()))
    return lib


def _gpu_name() -> str:
    try:
        import torch
        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    except Exception as e:  # noqa: BLE001
        return f"unknown ({type(e).__name__})"


def kernel_rows(spec: Path | None, evidence: Path | None) -> list[dict[str, Any]]:
    """Per recorded kernel: launches, correct (all launches match the source kernel), parity (median
    t(port)/t(source) over the launches timed)."""
    if spec is None:
        return []
    from tileport.launches import load_spec
    records = load_spec(spec)
    ev = json.loads(evidence.read_text()) if evidence and evidence.is_file() else {}
    rows = []
    for key in dict.fromkeys((Path(r.file).name, r.kernel) for r in records):
        file, kernel = key
        checks = [c for c in ev.get("check", []) if c.get("kernel") == kernel and c["op"].startswith(
            f"launch:{Path(file).stem}.")]
        timed = [b for b in ((ev.get("bench") or {}).get("records") or [])
                 if b.get("kernel") == kernel and b["op"].startswith(f"launch:{Path(file).stem}.")]
        ratios = [b["times_us"]["cutile-rs"] / b["times_us"]["cutile"] for b in timed
                  if {"cutile", "cutile-rs"} <= set(b.get("times_us", {})) and b["times_us"]["cutile"] > 0]
        problems = ev.get("problems", {}).get(f"launch:{Path(file).stem}.{kernel}", [])
        rows.append({"file": file, "kernel": kernel, "launches": sum(r.kernel == kernel and Path(r.file).name == file
                                                                     for r in records),
                     "checked": len(checks), "correct": bool(checks) and all(c["ok"] for c in checks),
                     "failures": [f"{c['launch']}: {c.get('error', '')[:300]}" for c in checks if not c["ok"]],
                     "parity": round(median(ratios), 3) if ratios else None, "timed": len(ratios),
                     "problems": problems})
    return rows


# ---------------------------------------------------------------- on the CPU machine

def kernel_files(spec: Path, roots: dict[str, Path]) -> list[str]:
    """The local copies (under out/wild/src) of the files the recorded launches name, as FILE::kernel."""
    from tileport.launches import load_spec
    local = {p.name: p for root in roots.values() for p in root.rglob("*.py")}
    out = []
    for r in load_spec(spec):
        name = Path(r.file).name
        if name in local:
            out.append(f"{local[name]}::{r.kernel}")
    return list(dict.fromkeys(out))


def local_roots(work: Path) -> dict[str, Path]:
    """Where the kernel files live here: the downloaded packages and, once generated, cutile-stencil's output."""
    from eval.wild import GENERATED, STENCIL_MANIFEST, fetch_all
    roots = {p: r for p, _v, r in fetch_all(work)}
    if (work / STENCIL_GEN / STENCIL_MANIFEST).is_file():
        roots[GENERATED] = work / STENCIL_GEN
    return roots


def port_key(target: str, targets: Sequence[str]) -> str:
    """The directory `tileport port` gives the FILE::kernel `target` among `targets` (the rule of
    pipeline.targets.dedupe_keys: the kernel's name, with the file's stem when several files have it)."""
    path, kernel = target.rsplit("::", 1)
    same = sum(t.rsplit("::", 1)[1] == kernel for t in dict.fromkeys(targets))
    return kernel if same == 1 else f"{Path(path).stem}.{kernel}"


def copy_stencil_gen(gen: Path, dest: Path) -> list[str]:
    """cutile-stencil's generated files and their manifest into dest/stencil-gen (the GPU machine cannot
    generate them: no xdsl); [] when they were not generated."""
    from eval.wild import STENCIL_MANIFEST
    if not (gen / STENCIL_MANIFEST).is_file():
        return []
    target = dest / STENCIL_GEN
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    names = sorted(p.name for p in gen.glob("*.py")) + [STENCIL_MANIFEST]
    for name in names:
        shutil.copy(gen / name, target / name)
    return names


def copy_wheels(wheels: Path, dest: Path) -> list[str]:
    """The pinned wheels of the packages a driver runs, into the bundle (the others stay here: the carry is small)."""
    dest.mkdir(parents=True, exist_ok=True)
    driven = {package_of(d) for d in drivers()}
    out = []
    for w in sorted(wheels.glob("*.whl")):
        if w.name.split("-")[0] in driven:
            shutil.copy(w, dest / w.name)
            out.append(w.name)
    return out


def prepare(work: Path = Path("out/wild"), dest: Path = BUNDLE, stencil: bool = True) -> int:
    """Before the first GPU run: the wheels the drivers import and (unless `stencil` is false) the kernels
    cutile-stencil generates, in .device/wild (no port library yet)."""
    from eval.wild import WildError, fetch_all, generate_stencils
    fetch_all(work)
    names = copy_wheels(work / "wheels", dest)
    print(f"wild_gpu prepare: {', '.join(names) or 'no wheel'} in {dest}")
    if not stencil:
        return 0 if names else 1
    try:
        gen, _outcome, versions = generate_stencils(work)
    except WildError as e:
        print(f"wild_gpu prepare: cutile-stencil's compile path: {e}", file=sys.stderr)
        return 1
    files = copy_stencil_gen(gen, dest)
    print(f"wild_gpu prepare: {len(files) - 1} kernel file(s) generated by {versions} in {dest / STENCIL_GEN}")
    return 0 if names and len(files) > 1 else 1


def bundle(results: Path, work: Path = Path("out/wild"), dest: Path = BUNDLE, profile: str = "release") -> int:
    """Port the recorded kernels to stage B on their launches and pack crate, library, wheels, launches."""
    spec = results / "wild-launches.json"
    targets = kernel_files(spec, local_roots(work))
    if not targets:
        print(f"wild_gpu bundle: {spec} names no kernel of the wild packages", file=sys.stderr)
        return 2
    out = work / "gpu-bundle"
    run_tool([sys.executable, "-m", "tileport.cli", "port", *targets, "--launches", str(spec), "--until", "B",
              "--no-gpu", "--profile", profile, "--out", str(out)], PORT_TIMEOUT_S, capture=False)
    libs = {}
    for t in targets:
        v = out / port_key(t, targets) / "B" / "verdict.json"
        if v.is_file():
            lib = json.loads(v.read_text()).get("details", {}).get("library", {})
            if lib.get("crate") and lib.get("library"):
                libs.setdefault((lib["crate"], lib["library"]), []).append(t)
    if not libs:
        print("wild_gpu bundle: no kernel built at stage B", file=sys.stderr)
        return 1
    (crate, so), kernels = max(libs.items(), key=lambda kv: len(kv[1]))  # the batch crate holds most
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "crate").mkdir(parents=True)
    for part in ("Cargo.toml", "kernels.json"):
        shutil.copy(Path(crate) / part, dest / "crate" / part)
    shutil.copytree(Path(crate) / "src", dest / "crate" / "src")
    xz = run_tool(f"xz -9 -T2 -c {so} > {dest / (LIB_NAME + '.xz')}", 600, capture=False, shell=True)
    if xz.returncode != 0:
        raise RuntimeError(f"xz exited with {xz.returncode} compressing {so}")
    shutil.copy(spec, dest / "launches.json")
    copy_wheels(work / "wheels", dest)
    copy_stencil_gen(work / STENCIL_GEN, dest)  # the very files the port was made from
    left = sorted(set(targets) - set(kernels))
    size = sum(f.stat().st_size for f in dest.parent.rglob("*") if f.is_file())
    print(f"wild_gpu bundle: {len(kernels)} kernel(s) in {dest}; not in the bundled library: {left or 'none'}; "
          f"{dest.parent} is {size / 2**20:.1f} MiB (the carry limit is 64 MiB)")
    return 0 if size <= 64 * 2**20 else 3


def grade(results: Path, work: Path = Path("out/wild"), table: Path = Path("bench/results")) -> int:
    """`tileport port --launches --gpu-results` on the GPU run's results, then bench/results/wild-gpu.*."""
    from eval.wild import write_atomic
    spec = results / "wild-launches.json"
    gpu = json.loads((results / "wild-gpu.json").read_text())
    targets = kernel_files(spec, local_roots(work)) if spec.is_file() else []
    verdicts = {}
    if targets:
        out = work / "gpu-grade"
        run_tool([sys.executable, "-m", "tileport.cli", "port", *targets, "--launches", str(spec),
                  "--gpu-results", str(results), "--no-gpu", "--out", str(out)], PORT_TIMEOUT_S, capture=False)
        try:
            summary = json.loads((out / "summary.json").read_text())
            by_key = {k["key"]: k for k in summary["kernels"]}
        except (OSError, ValueError, KeyError):
            by_key = {}
        verdicts = {(Path(t.rsplit("::", 1)[0]).name, t.rsplit("::", 1)[1]): by_key.get(port_key(t, targets), {})
                    for t in targets}
    for row in gpu.get("kernels", []):
        ported = verdicts.get((row["file"], row["kernel"]), {})
        row["port_verdicts"] = {s["stage"]: s["verdict"] for s in ported.get("route", [])}
        row["port_why"] = stopped_why(ported)
    write_atomic(table / "wild-gpu.json", json.dumps(gpu, indent=1, default=str) + "\n")
    write_atomic(table / "wild-gpu.md", render(gpu))
    print(f"wild_gpu grade: {table / 'wild-gpu.md'}")
    return 0


def stopped_why(kernel: dict[str, Any]) -> str:
    """Why a port stopped before D/E: the failing stage and the first line of its reason ('' when it did not)."""
    route = kernel.get("route") or []
    if kernel.get("terminal") != "STOPPED" or not route:
        return ""
    last = route[-1]
    reason = (last.get("reason") or "").splitlines()
    return f"{last['stage']} {last['verdict']}: {reason[0] if reason else ''}"


def render(doc: dict[str, Any]) -> str:
    rows = doc.get("kernels", [])
    correct = sum(r["correct"] for r in rows)
    lines = [f"# Wild corpus on the GPU: stages D and E ({doc.get('date', '?')}, {doc.get('gpu', '?')})", "",
             f"- kernels launched by the drivers (eval/wild_drivers/, the packages' own host functions): "
             f"**{len(rows)}**; correct on every recorded launch: **{correct}/{len(rows)}**",
             f"- differential test and parity: {doc.get('check', '-')}", "",
             "| file | kernel | launches | checked | correct | parity t(port)/t(source) | D / E | why not |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pv = r.get("port_verdicts") or {}
        why = "; ".join(r["failures"] + r["problems"] + ([r["port_why"]] if r.get("port_why") else []))
        why = why[:240].replace("|", "/")
        parity = "-" if r["parity"] is None else f"{r['parity']:.2f}"
        lines.append(f"| {r['file']} | `{r['kernel']}` | {r['launches']} | {r['checked']} | "
                     f"{'yes' if r['correct'] else 'no'} | {parity} | {pv.get('D', '-')} / {pv.get('E', '-')} | "
                     f"{why} |")
    lines += ["", "Drivers:", ""]
    for name, d in (doc.get("record", {}).get("drivers") or {}).items():
        cases = d.get("cases", {})
        bad = {c: v["error"] for c, v in cases.items() if not v["ok"]}
        lines.append(f"- {name}: {len(cases) - len(bad)}/{len(cases)} cases ran (rc {d.get('rc')})"
                     + ("; " + "; ".join(f"{c}: {e[:120]}" for c, e in bad.items()) if bad else ""))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m eval.wild_gpu", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("device", help="on the GPU machine: record the drivers, check the ports")
    d.add_argument("--out", type=Path, required=True)
    pr = sub.add_parser("prepare", help="on the CPU machine, before the first GPU run: the wheels and "
                                        "cutile-stencil's generated kernels into .device/wild")
    pr.add_argument("--no-stencil", action="store_true", help="skip cutile-stencil's generated kernels")
    b = sub.add_parser("bundle", help="on the CPU machine: port on the recorded launches, pack .device/wild")
    b.add_argument("results", type=Path, help="the folder with the GPU run's wild-launches.json")
    b.add_argument("--profile", default="release")
    g = sub.add_parser("grade", help="on the CPU machine: grade D/E and write bench/results/wild-gpu.*")
    g.add_argument("results", type=Path, help="the folder with the GPU run's wild-gpu.json, evidence, launches")
    args = ap.parse_args(argv)
    if args.cmd == "device":
        doc = device(args.out)
        print(render(doc))
        return 0
    if args.cmd == "prepare":
        return prepare(stencil=not args.no_stencil)
    if args.cmd == "bundle":
        return bundle(args.results, profile=args.profile)
    return grade(args.results)


if __name__ == "__main__":
    sys.exit(main())
