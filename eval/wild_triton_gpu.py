"""Stages D and E for the Triton wild set (Liger-Kernel 0.8.5): record Liger's own launches on a GPU,
port the recorded kernels on those launches, test every port against its Liger Triton kernel on the GPU,
and tabulate per kernel: translates, recorded, built, correct, parity t(port)/t(Triton).

The GPU machine has no Rust, and the ports are specialized on the recorded constexpr values, so a CPU
step sits between two GPU runs of the same command:

    CPU   python3 -m eval.wild_triton_gpu prepare                # the pinned wheel into .device/liger/
    GPU   bash .device/enter.sh bash scripts/h200.sh liger       # 1: records liger-launches.json
    CPU   python3 -m eval.wild_triton_gpu bundle DIR             # selection, port to B, pack .device/liger/
    GPU   bash .device/enter.sh bash scripts/h200.sh liger       # 2: every bundled port vs its Liger kernel
    CPU   python3 -m eval.wild_triton_gpu grade DIR              # bench/results/wild-triton-gpu.json / .md

`device` installs the wheel (no dependencies, no network) beside the checkout. Without a port bundle it
runs eval/wild_drivers/liger_driver.py under `tileport record` (liger-launches.json, liger-driver.json).
With one (crate/, libliger_port.so.xz, launches.json: the launches the ports were built for, bundle.json)
it runs `tileport.gpu.triton_check` on those launches: first the differential test of every kernel in a
process of its own (`--jobs` at a time: a port that faults the GPU context takes only its own kernel down),
then the parity timing of the kernels found correct, one process, one kernel after another on an
otherwise idle GPU. liger-gpu.json (per kernel: launches checked, correct, parity, failures) is rewritten
after every phase, whatever happened, saying why a kernel has no result.

`bundle` keeps one launch per kernel and dtype (the first recorded: the ports are specialized on its
constexpr values), because the whole carry of a GPU call, toolchain included, is 64 MiB: the library is
checked against `LIB_BUDGET` and what was left out is listed in bundle.json.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any, Iterable, Sequence

from tileport.launches import LaunchRecord, load_spec, write_spec
from eval.wild import write_atomic
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool
from eval.wild_gpu import PORT_TIMEOUT_S, port_key

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "eval" / "wild_drivers" / "liger_driver.py"
BUNDLE = REPO / ".device" / "liger"   # wheel, launches.json, bundle.json, crate/, libliger_port.so.xz
PACKAGE, VERSION = "liger-kernel", "0.8.5"
ROOT_DIR = "liger_kernel"             # the package folder: record paths are matched from it on
LIB_NAME = "libliger_port.so"
SPEC = "liger-launches.json"
RESULT = "liger-gpu.json"
EVIDENCE = "liger-evidence.json"
SOURCES = "sources.tar.xz"            # the bundled ports' package files (the check run needs no wheel)
CRATE = "crate.tar.xz"                # the port crate (Cargo.toml, kernels.json, src/) under crate/
XZ_FILTERS = [{"id": lzma.FILTER_X86},  # branch conversion first: about 13 % less for a cdylib
              {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 32 << 20}]
LIB_BUDGET = int(2.25 * 2**20)        # xz bytes the port library may take in the carry (64 MiB in all, of
                                      # which the toolchain takes 55, the tree 6, the wheels .device needs 0.6)
RECORD_TIMEOUT_S = 300
KERNEL_CHECK_TIMEOUT_S = 180
EXCLUDED = ("/backends/_ascend/",)    # NPU kernels: not launched on CUDA


# ------------------------------------------------------------------------------------ shared

def package_path(file: str) -> str | None:
    """A recorded kernel file (an absolute path on the GPU machine) as a path inside the wheel,
    `liger_kernel/ops/rms_norm.py`; None for a file outside the package."""
    parts = Path(file).parts
    if ROOT_DIR not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index(ROOT_DIR)
    return "/".join(parts[i:])


def dtype_key(record: LaunchRecord) -> str:
    """The dtypes of a launch's float arrays (`float32`, `bfloat16`, `bfloat16+float32`): one port
    specialization per kernel and key."""
    floats = sorted({a.dtype for a in record.args if a.kind == "array" and a.dtype.startswith(("float", "bfloat"))})
    return "+".join(floats) or "-"


def kernel_id(file: str, kernel: str) -> str:
    return f"{file}::{kernel}"


# ------------------------------------------------------------------------------------ on the GPU machine

def install_wheel(bundle: Path, site: Path) -> str:
    from eval.wild_gpu import install_wheels
    wheels = sorted(bundle.glob(f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"))
    return install_wheels(wheels, site) or "ok"


def record(out: Path, site: Path, timeout_s: float = RECORD_TIMEOUT_S) -> dict[str, Any]:
    """The driver under `tileport record` into out/liger-launches.json; its case summary."""
    spec, summary = out / SPEC, out / "liger-driver.json"
    spec.unlink(missing_ok=True)
    env = dict(os.environ, WILD_DRIVER_OUT=str(summary),
               PYTHONPATH=os.pathsep.join(p for p in (str(site), str(REPO / "src"), os.environ.get("PYTHONPATH"))
                                          if p))
    t0 = time.perf_counter()
    try:
        r = run_tool([sys.executable, "-m", "tileport.cli", "record", "--out", str(spec), "--",
                      sys.executable, str(DRIVER)], timeout_s, env=env)
        rc, tail = r.returncode, (r.stdout + r.stderr)[-4000:]
    except ToolTimeout:
        rc, tail = None, f"timed out after {timeout_s} s"
    cases = json.loads(summary.read_text())["cases"] if summary.is_file() else {}
    return {"rc": rc, "seconds": round(time.perf_counter() - t0, 1), "spec": str(spec) if spec.is_file() else None,
            "cases": {k: {"ok": v["ok"], **({"error": v["error"]} if not v["ok"] else {})} for k, v in cases.items()},
            "tail": tail}


def unpack_sources(bundle: Path, site: Path) -> str:
    """The package files the bundled ports were made from (SOURCES, packed by `bundle` instead of the
    whole wheel: the carry is small), under `site`."""
    import tarfile
    with tarfile.open(bundle / SOURCES) as tar:
        tar.extractall(site, filter="data")
    return f"sources of {len(list(site.rglob('*.py')))} file(s) unpacked from {SOURCES}"


def unpack_library(bundle: Path, out: Path) -> Path | None:
    """The bundled library (out/libliger_port.so) and its crate (out/crate/); None without a bundle."""
    import tarfile
    packed = bundle / f"{LIB_NAME}.xz"
    if not all(p.is_file() for p in (packed, bundle / CRATE, bundle / "bundle.json", bundle / "launches.json",
                                      bundle / SOURCES)):
        return None
    lib = out / LIB_NAME
    lib.write_bytes(lzma.decompress(packed.read_bytes()))
    shutil.rmtree(out / "crate", ignore_errors=True)
    with tarfile.open(bundle / CRATE) as tar:
        tar.extractall(out, filter="data")
    return lib


def _triton_check(files: list[str], bundle: Path, lib: Path, out: Path, timeout_s: float, bench: bool,
                  budget: float) -> dict[str, Any]:
    """One `tileport.gpu.triton_check record` process; its evidence (or why there is none)."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tileport.gpu.triton_check", "record", "--spec", str(bundle / "launches.json"),
           "--crate", str(lib.parent / "crate"), "--lib", str(lib), "--out", str(out), "--no-anchors",
           "--budget", str(budget), *([] if bench else ["--no-bench"]), *files]
    try:
        r = run_tool(cmd, max(timeout_s, 1))
        rc, tail = r.returncode, (r.stdout + r.stderr)[-2000:]
    except ToolTimeout:
        rc, tail = None, f"timed out after {timeout_s:.0f} s"
    evidence = out / "gpu-evidence-triton.json"
    doc = json.loads(evidence.read_text()) if evidence.is_file() else {}
    return {"rc": rc, "tail": tail, "check": doc.get("check", []), "bench": (doc.get("bench") or {}).get("records", []),
            "problems": doc.get("problems", {})}


def check_ports(bundle: Path, lib: Path, site: Path, out: Path, jobs: int, deadline: float,
                budget: float, on_progress=None, known: dict[str, dict] | None = None) -> dict[str, dict]:
    """Differential test of every bundled kernel (one process each, `jobs` at once), then the parity
    timing of the correct ones (one process, serially). kernel id -> {check, bench, problems, rc, tail}.
    `known`: verdicts of an earlier check run of this bundle; a kernel found correct there is not checked
    again (its verdict is carried, marked so) and is timed only if that run did not time it."""
    kernels = [k for k in json.loads((bundle / "bundle.json").read_text())["kernels"] if k["built"]]
    results: dict[str, dict] = {}
    carried = {kid: v for kid, v in (known or {}).items() if v.get("correct")}
    for kid, v in carried.items():
        results[kid] = {"carried": v, "check": [], "bench": [], "problems": {}, "rc": 0}
    fresh = [k for k in kernels if kernel_id(k["file"], k["kernel"]) not in carried]

    def one(k: dict) -> None:
        kid = kernel_id(k["file"], k["kernel"])
        left = deadline - time.monotonic()
        if left < 10:
            results[kid] = {"rc": None, "tail": "not run: the step's time was spent", "check": [], "bench": [],
                            "problems": {}}
            return
        results[kid] = _triton_check([f"{site / k['file']}::{k['kernel']}"], bundle, lib,
                                     out / "check" / k["kernel"], min(KERNEL_CHECK_TIMEOUT_S, left - 5), False, budget)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, fresh))
    if on_progress:
        on_progress(results)
    verdicts = {kernel_id(k["file"], k["kernel"]): verdict(results.get(kernel_id(k["file"], k["kernel"])))
                for k in kernels}
    correct = [k for k in kernels if (v := verdicts[kernel_id(k["file"], k["kernel"])])["correct"] and v["parity"] is None]
    left = deadline - time.monotonic()
    if correct and left > 20:
        timed = _triton_check([f"{site / k['file']}::{k['kernel']}" for k in correct], bundle, lib, out / "time",
                              left - 10, True, budget)
        for k in correct:
            mine = [b for b in timed["bench"] if b.get("kernel") == k["kernel"]]
            results[kernel_id(k["file"], k["kernel"])]["bench"] = mine
        results["(timing)"] = {"rc": timed["rc"], "tail": timed["tail"]}
    return results


def verdict(result: dict | None) -> dict[str, Any]:
    """correct (every launch checked matches the Liger kernel, at least one, no planning problem) and
    parity (median t(port)/t(Triton) over the launches timed) of one kernel's check results."""
    if not result:
        return {"checked": 0, "correct": False, "parity": None, "timed": 0, "failures": [], "problems": []}
    if "carried" in result:  # checked by an earlier run of the bundle; timed now unless it was then
        mine = verdict({"check": [{"ok": True, "launch": ""}], "bench": result.get("bench", [])})
        timed = {"parity": mine["parity"], "timed": mine["timed"]} if mine["timed"] else {}
        return {**result["carried"], **timed, "carried": True}
    checks = result.get("check", [])
    problems = [p for v in (result.get("problems") or {}).values() for p in v]
    ratios = [b["times_us"]["cutile-rs"] / b["times_us"]["triton"] for b in result.get("bench", [])
              if {"triton", "cutile-rs"} <= set(b.get("times_us", {})) and b["times_us"]["triton"] > 0]
    failures = [f"{c['launch']}: {str(c.get('error', ''))[:300]}" for c in checks if not c["ok"]]
    if not checks and not problems and result.get("rc") != 0:
        failures.append(f"triton_check rc {result.get('rc')}: {result.get('tail', '')[-300:]}")
    return {"checked": len(checks), "correct": bool(checks) and not failures and not problems,
            "parity": round(median(ratios), 3) if ratios else None, "timed": len(ratios), "failures": failures,
            "problems": problems}


def device(out: Path, bundle: Path = BUNDLE, jobs: int = 8, timeout_s: float = 520, budget: float = 0.05,
           force_record: bool = False, previous: Path | None = None) -> dict:
    """The GPU step (see the module docstring); writes out/liger-gpu.json and returns it. `force_record`:
    record even when a port bundle is there (and check nothing). `previous`: an earlier check run's
    liger-gpu.json of the same bundle, whose correct kernels are carried (see check_ports)."""
    deadline = time.monotonic() + timeout_s
    out.mkdir(parents=True, exist_ok=True)
    site = out / "site"
    doc: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": _gpu_name(),
                           "package": f"{PACKAGE}=={VERSION}"}
    lib = None if force_record else unpack_library(bundle, out)
    doc["install"] = install_wheel(bundle, site) if lib is None else unpack_sources(bundle, site)

    def write() -> None:
        write_atomic(out / RESULT, json.dumps(doc, indent=1, default=str) + "\n")
    if lib is None:
        doc["mode"] = "record"
        doc["record"] = record(out, site, max(timeout_s - 15, 30))
        doc["check"] = ("no port bundle in .device/liger: bring liger-launches.json back and run `python3 -m "
                        "eval.wild_triton_gpu bundle DIR` where cargo is, then this step again")
        write()
        return doc
    doc["mode"] = "check"
    doc["bundle"] = json.loads((bundle / "bundle.json").read_text())

    def progress(results: dict[str, dict]) -> None:
        doc["kernels"] = {kid: {**verdict(r), "rc": r.get("rc")} for kid, r in results.items() if "::" in kid}
        write()
    known = None
    if previous is not None:
        before = json.loads(previous.read_text())
        if before.get("bundle") != doc["bundle"]:
            raise SystemExit(f"{previous}: checked another bundle than .device/liger: nothing can be carried")
        known, doc["carried_from"] = before.get("kernels") or {}, {"date": before.get("date"), "gpu": before.get("gpu")}
    results = check_ports(bundle, lib, site, out, jobs, deadline, budget, progress, known)
    progress(results)
    doc["timing"] = results.get("(timing)", "no kernel correct: nothing timed")
    doc["check"] = "ok"
    write()
    evidence = {"check": [c for kid, r in results.items() if "::" in kid for c in r.get("check", [])],
                "bench": [b for kid, r in results.items() if "::" in kid for b in r.get("bench", [])],
                "problems": {k: v for r in results.values() for k, v in (r.get("problems") or {}).items()}}
    write_atomic(out / EVIDENCE, json.dumps(evidence, indent=1, default=str) + "\n")
    return doc


def _gpu_name() -> str:
    from eval.wild_gpu import _gpu_name as name
    return name()


# ------------------------------------------------------------------------------------ on the CPU machine

def select_launches(records: Iterable[LaunchRecord], exclude: Sequence[str] = ()) -> tuple[list[LaunchRecord],
                                                                                          list[dict]]:
    """One launch per kernel and dtype key (the first recorded), kernels of the package's CUDA files
    only, none of the kernels named in `exclude`; what was left out, with why."""
    chosen: dict[tuple[str, str, str], LaunchRecord] = {}
    left: list[dict] = []
    for r in records:
        rel = package_path(r.file)
        if r.framework != "triton" or rel is None or any(x in f"/{rel}" for x in EXCLUDED):
            left.append({"kernel": r.kernel, "file": r.file, "why": "not a Triton launch of the package's CUDA "
                                                                    "kernels"})
            continue
        key = (rel, r.kernel, dtype_key(r))
        if r.kernel in exclude:
            left.append({"kernel": r.kernel, "file": rel, "launch": r.label, "why": "excluded (--exclude)"})
            continue
        if key in chosen:
            left.append({"kernel": r.kernel, "file": rel, "launch": r.label,
                         "why": f"another launch of this kernel in {key[2]} is bundled (one specialization per "
                                "kernel and dtype)"})
            continue
        chosen[key] = r
    return list(chosen.values()), left


def recorded_counts(records: Iterable[LaunchRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        rel = package_path(r.file)
        if rel is not None:
            counts[kernel_id(rel, r.kernel)] = counts.get(kernel_id(rel, r.kernel), 0) + 1
    return counts


def prepare(work: Path = Path("out/wild-triton"), dest: Path = BUNDLE, wheel_dir: Path | None = None) -> int:
    """Before the first GPU run: the pinned wheel in .device/liger (no port library yet)."""
    from eval.wild_triton import fetch
    fetch(work, wheel_dir)
    return 0 if copy_wheel(work / "wheels" if wheel_dir is None else wheel_dir, dest) else 1


def copy_wheel(wheels: Path, dest: Path) -> str | None:
    found = sorted(wheels.glob(f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"))
    if not found:
        print(f"wild_triton_gpu: no {PACKAGE}=={VERSION} wheel in {wheels}", file=sys.stderr)
        return None
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(found[0], dest / found[0].name)
    print(f"wild_triton_gpu: {found[0].name} in {dest}")
    return found[0].name


def carry_report(dest: Path) -> str:
    """Sizes that decide whether a GPU call can carry the bundle (64 MiB in all)."""
    def mib(files: Iterable[Path]) -> float:
        return sum(f.stat().st_size for f in files if f.is_file()) / 2**20
    tracked = run_tool(["git", "ls-files", "-z"], 60, cwd=REPO).stdout
    tree = mib(REPO / f for f in tracked.split("\0") if f)
    device = dest.parent
    others = {f.name: f.stat().st_size / 2**20 for f in device.glob("*") if f.is_file()}
    beside = ", ".join(f"{n} {v:.2f} MiB" for n, v in sorted(others.items())) or "nothing"
    return f"{dest} is {mib(dest.rglob('*')):.2f} MiB; tracked tree {tree:.2f} MiB; beside it in {device}: {beside}"


def pack_files(files: dict[str, Path], dest: Path) -> None:
    """{name in the archive: file} as an xz tar, atomically."""
    import tarfile
    tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
    with tarfile.open(tmp, "w:xz", preset=9) as tar:
        for name, path in files.items():
            tar.add(path, arcname=name)
    tmp.replace(dest)


def target_id(target: str) -> str:
    """The kernel id (`liger_kernel/ops/x.py::kernel`) of a FILE::KERNEL target."""
    path, kernel = target.rsplit("::", 1)
    return kernel_id(package_path(path), kernel)


def b_verdicts(port_out: Path, targets: Sequence[str]) -> dict[str, dict]:
    """kernel id -> {verdict, reason, library (crate, so) when built} of `tileport port --until B` of
    `targets` (each under the folder port gives it: its name, with its file's stem when files share it)."""
    out = {}
    for t in targets:
        d = port_out / port_key(t, targets)
        v, a = d / "B" / "verdict.json", d / "A" / "verdict.json"
        if v.is_file():
            doc = json.loads(v.read_text())
            lib = (doc.get("details") or {}).get("library") or {}
            out[target_id(t)] = {"verdict": doc["verdict"], "reason": doc.get("reason", ""),
                                 "crate": lib.get("crate"), "so": lib.get("library")}
        elif a.is_file():
            doc = json.loads(a.read_text())
            out[target_id(t)] = {"verdict": f"A {doc['verdict']}", "reason": doc.get("reason", "")}
        else:
            out[target_id(t)] = {"verdict": "not run", "reason": "tileport port wrote no verdict for this kernel"}
    return out


def port_to_b(targets: list[str], launches: Path, port_out: Path, profile: str, jobs: int) -> dict[str, dict]:
    """`tileport port --until B` of `targets` (FILE::KERNEL) on `launches`, into `port_out` (reused: the
    run locks it and skips the stages whose inputs did not change); the kernels' B verdicts."""
    run_tool([sys.executable, "-m", "tileport.cli", "port", *targets, "--launches", str(launches), "--until", "B",
              "--no-gpu", "--profile", profile, "-j", str(jobs), "--out", str(port_out)], PORT_TIMEOUT_S, capture=False)
    return b_verdicts(port_out, targets)


def compiled_crates(verdicts: dict[str, dict]) -> dict[tuple[str, str], int]:
    """(crate, library) -> how many COMPILED kernels it holds."""
    crates: dict[tuple[str, str], int] = {}
    for v in verdicts.values():
        if v["verdict"] == "COMPILED" and v.get("crate") and v.get("so"):
            crates[(v["crate"], v["so"])] = crates.get((v["crate"], v["so"]), 0) + 1
    return crates


def bundle_manifest(selected: list[LaunchRecord], counts: dict[str, int], verdicts: dict[str, dict],
                    crate_kernels: set[str], left: list[dict], lib_bytes: int | None) -> dict[str, Any]:
    """bundle.json: per recorded kernel, its selected launches, whether the bundled library holds its port
    (built) and why not."""
    rows: dict[str, dict] = {}
    for r in selected:
        rel = package_path(r.file)
        kid = kernel_id(rel, r.kernel)
        row = rows.setdefault(kid, {"file": rel, "kernel": r.kernel, "recorded": counts.get(kid, 0),
                                    "dtypes": [], "launches": []})
        row["dtypes"].append(dtype_key(r))
        row["launches"].append(r.label)
    for row in rows.values():
        v = verdicts.get(kernel_id(row["file"], row["kernel"]), {"verdict": "not run", "reason": ""})
        row["b_verdict"] = v["verdict"]
        row["built"] = v["verdict"] == "COMPILED" and row["kernel"] in crate_kernels
        row["why_not"] = "" if row["built"] else (v.get("reason") or f"B {v['verdict']}")[:500]
        if v["verdict"] == "COMPILED" and row["kernel"] not in crate_kernels:
            row["why_not"] = "compiled in a crate other than the bundled one"
    return {"package": f"{PACKAGE}=={VERSION}", "kernels": sorted(rows.values(), key=lambda r: (r["file"], r["kernel"])),
            "left_out": left, "library_xz_bytes": lib_bytes, "library_budget_bytes": LIB_BUDGET}


def bundle(results: Path, work: Path = Path("out/wild-triton"), dest: Path = BUNDLE, profile: str = "release",
           wheel_dir: Path | None = None, jobs: int = 2, root: Path | None = None,
           exclude: Sequence[str] = ()) -> int:
    """Select the recorded launches, port their kernels to stage B on them, pack crate, library, launches.
    `root`: the extracted package (holding liger_kernel/), else the pinned wheel's (downloaded or in
    `wheel_dir`). `exclude`: kernel names left out of the library (e.g. to meet LIB_BUDGET), listed as such."""
    spec = results / SPEC
    records = load_spec(spec)
    if root is None:
        from eval.wild_triton import fetch
        (_pkg, _ver, root), = fetch(work, wheel_dir)
    selected, left = select_launches(records, exclude)
    selected = [r for r in selected if (root / package_path(r.file)).is_file()]
    if not selected:
        print(f"wild_triton_gpu bundle: {spec} has no launch of {PACKAGE}'s CUDA kernels", file=sys.stderr)
        return 2
    chosen = work / "selected-launches.json"
    write_spec(chosen, selected)
    targets = list(dict.fromkeys(f"{root / package_path(r.file)}::{r.kernel}" for r in selected))
    verdicts = port_to_b(targets, chosen, work / "gpu-bundle", profile, jobs)
    crates = compiled_crates(verdicts)
    if len(crates) > 1:  # the kernels of a file cargo rejected built alone: a run of the compiled ones joins them
        compiled = [t for t in targets if verdicts[target_id(t)]["verdict"] == "COMPILED"]
        verdicts |= port_to_b(compiled, chosen, work / "gpu-bundle-compiled", profile, jobs)
        crates = compiled_crates(verdicts)
    if not crates:
        print("wild_triton_gpu bundle: no kernel compiled at stage B (see out/wild-triton/gpu-bundle)", file=sys.stderr)
        return 1
    crate, so = max(crates, key=crates.get)  # the run's batch crate holds every translator-made port
    dest.mkdir(parents=True, exist_ok=True)
    pack_files({f"crate/{part}": Path(crate) / part for part in ("Cargo.toml", "kernels.json")}
               | {f"crate/src/{p.name}": p for p in sorted((Path(crate) / "src").glob("*.rs"))}, dest / CRATE)
    packed = lzma.compress(Path(so).read_bytes(), format=lzma.FORMAT_XZ, filters=XZ_FILTERS)
    (dest / f"{LIB_NAME}.xz").write_bytes(packed)
    crate_kernels = {e["kernel"] for e in json.loads((Path(crate) / "kernels.json").read_text())["entries"]}
    manifest = bundle_manifest(selected, recorded_counts(records), verdicts, crate_kernels, left, len(packed))
    record_run = results / RESULT  # the record run's driver cases travel with the bundle, to the table
    manifest["driver_cases"] = (json.loads(record_run.read_text()).get("record") or {}).get("cases") \
        if record_run.is_file() else None
    built = [k for k in manifest["kernels"] if k["built"]]
    write_spec(dest / "launches.json", [r for r in selected if kernel_id(package_path(r.file), r.kernel)
                                        in {kernel_id(k["file"], k["kernel"]) for k in built}])
    write_atomic(dest / "bundle.json", json.dumps(manifest, indent=1) + "\n")
    pack_files({f: root / f for f in sorted({k["file"] for k in built})}, dest / SOURCES)
    for wheel in dest.glob("*.whl"):  # the record run's; `prepare` brings it back for another one
        wheel.unlink()
    print(f"wild_triton_gpu bundle: {len(built)}/{len(manifest['kernels'])} recorded kernels built into "
          f"{dest / (LIB_NAME + '.xz')} ({len(packed) / 2**20:.2f} MiB xz, budget {LIB_BUDGET / 2**20:.2f} MiB); "
          f"{len(left)} launch(es) left out (bundle.json); {carry_report(dest)}")
    for k in manifest["kernels"]:
        if not k["built"]:
            print(f"  not built: {k['file']}::{k['kernel']}: {k['why_not'][:160]}")
    if len(packed) > LIB_BUDGET:
        print(f"wild_triton_gpu bundle: the library is over its budget: carry it if the whole call stays under 64 MiB, "
              f"else bundle again with --exclude KERNEL (about 12 KiB of xz each; the runtime takes about 1.65 MiB)")
        return 3
    return 0


# ------------------------------------------------------------------------------------ grading

def grade_rows(translate: dict, gpu: dict, record_doc: dict | None = None) -> list[dict]:
    """Per CUDA kernel of the package (wild-triton.json rows, role kernel): translate, recorded, built,
    correct, parity, and why a column is empty."""
    bundled = {kernel_id(k["file"], k["kernel"]): k for k in (gpu.get("bundle") or {}).get("kernels", [])}
    checked = gpu.get("kernels") or {}
    recorded = {}
    for kid, k in bundled.items():
        recorded[kid] = k["recorded"]
    for kid, n in (record_doc or {}).items():
        recorded.setdefault(kid, n)
    rows = []
    for t in translate.get("kernels", []):
        if t["role"] != "kernel" or any(x in f"/{t['file']}" for x in EXCLUDED):
            continue
        kid = kernel_id(t["file"], t["kernel"])
        b, c = bundled.get(kid), checked.get(kid)
        row = {"file": t["file"], "kernel": t["kernel"], "translate": bool(t["translate_ok"]),
               "recorded": recorded.get(kid, 0), "built": bool(b and b["built"]),
               "checked": c["checked"] if c else 0, "correct": bool(c and c["correct"]),
               "parity": c.get("parity") if c else None}
        row["why"] = why_not(t, row, b, c)
        rows.append(row)
    return rows


def why_not(t: dict, row: dict, b: dict | None, c: dict | None) -> str:
    """Why a kernel is not GPU-verified (or not timed); empty when it is both."""
    if row["built"]:  # the launches' values can make a kernel translate that did not unattended
        if c is None:
            return "built, not checked (no result from the GPU run)"
        if not row["correct"]:
            return "; ".join(c.get("failures", []) + c.get("problems", []))[:300] or "no launch checked"
        return "" if row["parity"] is not None else "correct; not timed"
    if row["recorded"]:
        return f"not built: {(b or {}).get('why_not') or 'not in the bundle'}"
    launched = "not launched by the driver"
    return f"{launched}; translate: {t.get('first_diagnostic', '')}" if not row["translate"] else launched


def totals(rows: list[dict]) -> dict[str, Any]:
    from tileport.gpu.triton_check import geomean
    parity = [r["parity"] for r in rows if r["correct"] and r["parity"]]
    g = geomean(parity)
    return {"kernels": len(rows), "translate": sum(r["translate"] for r in rows),
            "recorded": sum(bool(r["recorded"]) for r in rows), "built": sum(r["built"] for r in rows),
            "checked": sum(bool(r["checked"]) for r in rows), "h200_verified": sum(r["correct"] for r in rows),
            "timed": len(parity), "geomean_parity": round(g, 3) if g else None}


def render(doc: dict) -> str:
    t = doc["totals"]
    parity = "-" if t["geomean_parity"] is None else f"{t['geomean_parity']:.2f}"
    lines = [f"# Liger-Kernel on the GPU: ports vs the Liger Triton kernels ({doc.get('date', '?')}, "
             f"{doc.get('gpu', '?')})", "",
             f"Package `{doc.get('package')}`, its CUDA kernels (role kernel in wild-triton.json; Ascend excluded): "
             f"**{t['kernels']}**.", "",
             f"- translate unattended: **{t['translate']}/{t['kernels']}**",
             f"- launched by eval/wild_drivers/liger_driver.py (recorded): **{t['recorded']}/{t['kernels']}**",
             f"- built into the port library (stage B on the recorded launches, one per kernel and dtype): "
             f"**{t['built']}**",
             f"- **GPU-verified** (every bundled launch matches the Liger kernel): **{t['h200_verified']}** of "
             f"{t['built']} built ({t['checked']} with a launch checked)",
             f"- parity t(port)/t(Triton), geomean over {t['timed']} correct kernels timed: {parity}", "",
             "| file | kernel | translate | recorded | built | checked | correct | parity | why not |",
             "|---|---|---|---|---|---|---|---|---|"]
    yn = {True: "yes", False: "no"}
    for r in doc["kernels"]:
        parity = "-" if r["parity"] is None else f"{r['parity']:.2f}"
        lines.append(f"| {r['file'].removeprefix('liger_kernel/')} | `{r['kernel']}` | {yn[r['translate']]} | "
                     f"{r['recorded']} | {yn[r['built']]} | {r['checked']} | {yn[r['correct']]} | {parity} | "
                     f"{r['why'][:160].replace('|', '/')} |")
    cases = doc.get("driver_cases") or {}
    if cases:
        bad = {k: v.get("error", "") for k, v in cases.items() if not v["ok"]}
        lines += ["", f"Driver: {len(cases) - len(bad)}/{len(cases)} cases ran"
                  + ("; " + "; ".join(f"{k}: {e[:120]}" for k, e in bad.items()) if bad else "")]
    lines += ["", "Reproduce: `python3 -m eval.wild_triton_gpu prepare`, `bash scripts/h200.sh liger` on the GPU, "
              "`... bundle DIR`, `bash scripts/h200.sh liger` again, `... grade DIR` (docstring of "
              "eval/wild_triton_gpu.py)."]
    return "\n".join(lines) + "\n"


def grade(results: Path, table: Path = Path("bench/results")) -> int:
    """bench/results/wild-triton-gpu.json / .md from a GPU run's liger-gpu.json: the check run's (the
    bundle it carried says what was recorded and built), or a record run's (with its liger-launches.json)."""
    gpu = json.loads((results / RESULT).read_text())
    translate = json.loads((table / "wild-triton.json").read_text())
    counts = recorded_counts(load_spec(results / SPEC)) if (results / SPEC).is_file() else None
    rows = grade_rows(translate, gpu, counts)
    cases = (gpu.get("record") or {}).get("cases") or (gpu.get("bundle") or {}).get("driver_cases")
    doc = {"date": gpu.get("date"), "gpu": gpu.get("gpu"), "package": gpu.get("package"), "totals": totals(rows),
           "kernels": rows, "driver_cases": cases, "mode": gpu.get("mode"), "timing": gpu.get("timing"),
           "left_out": (gpu.get("bundle") or {}).get("left_out", [])}
    write_atomic(table / "wild-triton-gpu.json", json.dumps(doc, indent=1, default=str) + "\n")
    write_atomic(table / "wild-triton-gpu.md", render(doc))
    t = doc["totals"]
    print(f"wild_triton_gpu grade: {t['h200_verified']} GPU-verified of {t['kernels']} kernels "
          f"({t['translate']} translate, {t['recorded']} recorded, {t['built']} built); {table / 'wild-triton-gpu.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m eval.wild_triton_gpu", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("device", help="on the GPU machine: record the driver, or check the bundled ports")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--jobs", type=int, default=8, help="kernels checked at once (differential test)")
    d.add_argument("--timeout", type=float, default=520, help="seconds for the whole step")
    d.add_argument("--budget", type=float, default=0.05, help="timing budget per launch and side (s)")
    d.add_argument("--record", action="store_true", help="record the driver's launches even with a bundle")
    d.add_argument("--previous", type=Path, metavar="LIGER_GPU_JSON",
                   help="an earlier check run of this bundle: its correct kernels are not checked again, and "
                        "timed only where it did not time them")
    p = sub.add_parser("prepare", help="on the CPU machine, before the first GPU run: the wheel into .device/liger")
    p.add_argument("--wheel-dir", type=Path, help="take the pinned wheel from here instead of downloading it")
    b = sub.add_parser("bundle", help="on the CPU machine: port on the recorded launches, pack .device/liger")
    b.add_argument("results", type=Path, help="the folder with the record run's liger-launches.json")
    b.add_argument("--profile", default="release")
    b.add_argument("--wheel-dir", type=Path)
    b.add_argument("-j", "--jobs", type=int, default=2, help="kernels ported in parallel")
    b.add_argument("--exclude", action="append", default=[], metavar="KERNEL",
                   help="leave this kernel out of the library (repeatable; listed in bundle.json)")
    g = sub.add_parser("grade", help="on the CPU machine: bench/results/wild-triton-gpu.json / .md")
    g.add_argument("results", type=Path, help="the folder with the check run's liger-gpu.json")
    args = ap.parse_args(argv)
    if args.cmd == "device":
        doc = device(args.out, jobs=args.jobs, timeout_s=args.timeout, budget=args.budget, force_record=args.record,
                     previous=args.previous)
        print(json.dumps({k: doc.get(k) for k in ("mode", "install", "check")}, indent=1))
        cases = (doc.get("record") or {}).get("cases") or {}
        print(f"driver: {sum(v['ok'] for v in cases.values())}/{len(cases)} cases ran" if cases else "")
        ks = doc.get("kernels") or {}
        print(f"kernels correct: {sum(v['correct'] for v in ks.values())}/{len(ks)} checked" if ks else "")
        return 0
    if args.cmd == "prepare":
        return prepare(wheel_dir=args.wheel_dir)
    if args.cmd == "bundle":
        return bundle(args.results, profile=args.profile, wheel_dir=args.wheel_dir, jobs=args.jobs,
                      exclude=args.exclude)
    return grade(args.results)


if __name__ == "__main__":
    sys.exit(main())
