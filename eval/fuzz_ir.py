#!/usr/bin/env python3
"""Fuzz the Tile IR reader and differ with corrupted real bytecode.

Seeds are real bytecode files: the cuTile Python exports of the test kernels (tests/tileir/tir_kernels.py,
at bytecode versions 13.1 to 13.4, exported on the CPU), the reference captures of the product's operator
library (tileport.ops.capture_ref, as the pipeline exports them) and the cutile-rs compiler outputs kept
under tests/tileir/data/cutile_rs. Each corrupted file (bit flips, byte changes, truncation, byte insertion
and deletion, section-length and varint mutations, section shuffles/drops/duplicates) goes through
read -> canonicalize -> to_text -> diff against the original -> report JSON. What is allowed: a
`BytecodeError` from the reader, or a clean run. What is counted as a defect: any other exception
(a traceback), a case that takes more than `--hang` seconds, or one that runs out of the memory cap.

    nice python3 eval/fuzz_ir.py --n 5000 --out bench/results/<date>-fuzz-ir.json

Cases run in worker processes under a memory cap (RLIMIT_AS) and a per-case watchdog: a hung or
exploding case is killed and recorded, and the run goes on. The figures (files, typed errors,
warnings, tracebacks, hangs, max RSS, time, commit) are written atomically to `--out`.
The fast CI run (tests/tileir/test_ir_fuzz.py) uses the same mutators in-process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
TESTS_TILEIR = REPO / "tests" / "tileir"
# Measure this checkout's tileport (not another install the environment may point at); spawned
# workers run this too when they import the script.
sys.path.insert(0, str(REPO / "src"))
SEED_VERSIONS = (("13.4", None), ("13.3", None), ("13.2", "sm_90"), ("13.1", "sm_100"))


# -- seeds ------------------------------------------------------------------------------------------

def seeds(versions=SEED_VERSIONS, corpus: bool = True) -> list[tuple[str, bytes]]:
    """(name, bytecode) of every real seed file; `corpus`: also the reference captures of the
    product's operator library (exported on the CPU as the pipeline does)."""
    out = [(f"cutile_rs/{p.name}", p.read_bytes())
           for p in sorted((TESTS_TILEIR / "data" / "cutile_rs").glob("*.tileirbc"))]
    if str(TESTS_TILEIR) not in sys.path:
        sys.path.insert(0, str(TESTS_TILEIR))
    import tir_export
    import tir_kernels
    for case in sorted(tir_kernels.CASES):
        for version, gpu in versions:
            out.append((f"{case}@{version}", tir_export.case(case, version, gpu)))
    if corpus:
        from tileport.ops.capture_ref import reference_bytecode
        from tileport.ops.specs import all_specs
        for spec in all_specs().values():
            for capture in spec.captures:
                out.append((f"corpus/{spec.name}:{capture.label}", reference_bytecode(spec, capture)))
    return out


# -- mutators ---------------------------------------------------------------------------------------

HEADER = 12  # magic + version + tag: mutated only by the header mutator


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    v = shift = 0
    while pos < len(data):
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return v, pos


def section_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """(header start, length-field start, payload start, payload end) of each section, as far as
    the data parses (its own parser: the fuzzer must not depend on the reader it tests)."""
    spans, pos = [], HEADER
    while pos < len(data) and data[pos] & 0x7F:
        start, head = pos, data[pos]
        length_at = pos + 1
        length, pos = _read_varint(data, length_at)
        if head & 0x80:
            align, pos = _read_varint(data, pos)
            if align:
                pos += -pos % align
        end = pos + length
        if end > len(data):
            break
        spans.append((start, length_at, pos, end))
        pos = end
    return spans


def _pos(rng: random.Random, data: bytes) -> int:
    return rng.randrange(HEADER, max(HEADER + 1, len(data)))


def bit_flip(rng, data):
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4))):
        p = _pos(rng, b)
        if p < len(b):
            b[p] ^= 1 << rng.randrange(8)
    return bytes(b)


def byte_set(rng, data):
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        p = _pos(rng, b)
        if p < len(b):
            b[p] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, 0xCB, rng.randrange(256)))
    return bytes(b)


def truncate(rng, data):
    return data[:rng.randrange(0, max(1, len(data)))]


def insert_bytes(rng, data):
    p = _pos(rng, data)
    junk = bytes(rng.randrange(256) for _ in range(rng.choice((1, 1, 2, 8, 64))))
    return data[:p] + junk + data[p:]


def delete_bytes(rng, data):
    p = _pos(rng, data)
    return data[:p] + data[p + rng.choice((1, 1, 2, 8, 64)):]


def append_garbage(rng, data):
    return data + bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 32))))


_BIG = (0, 1, 2, 127, 128, 255, 1 << 16, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 40, (1 << 63) - 1,
        1 << 63, (1 << 64) - 1)


def section_length(rng, data):
    """Replace a section's length field with a nearby or a huge value (re-encoded: its width changes)."""
    spans = section_spans(data)
    if not spans:
        return byte_set(rng, data)
    _, at, _, _ = rng.choice(spans)
    old, after = _read_varint(data, at)
    new = rng.choice((old + 1, max(0, old - 1), old * 2, old // 2, rng.choice(_BIG)))
    return data[:at] + _varint(new) + data[after:]


def varint_splice(rng, data):
    """Replace the varint at a random position (a count, id, length or opcode) with another value."""
    p = _pos(rng, data)
    old, after = _read_varint(data, p)
    new = rng.choice((old + 1, max(0, old - 1), rng.choice(_BIG), rng.randrange(64)))
    return data[:p] + _varint(new) + data[after:]


def fixed_int(rng, data):
    """Overwrite an aligned 4- or 8-byte word (table offsets, debug ids, int lists) with an extreme value."""
    width = rng.choice((4, 8))
    p = _pos(rng, data)
    p -= p % width
    if p < HEADER or p + width > len(data):
        return byte_set(rng, data)
    value = rng.choice(_BIG) & ((1 << (8 * width)) - 1)
    return data[:p] + value.to_bytes(width, "little") + data[p + width:]


def section_shuffle(rng, data):
    """Reorder, drop or duplicate whole sections (payloads kept byte-exact)."""
    spans = section_spans(data)
    if len(spans) < 2:
        return truncate(rng, data)
    parts = [data[s:e] for s, _, _, e in spans]
    end = spans[-1][3]
    how = rng.choice(("swap", "drop", "dup"))
    if how == "swap":
        i, j = rng.sample(range(len(parts)), 2)
        parts[i], parts[j] = parts[j], parts[i]
    elif how == "drop":
        parts.pop(rng.randrange(len(parts)))
    else:
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(parts))
    return data[:HEADER] + b"".join(parts) + data[end:]


def in_section(rng, data):
    """A varint or byte change inside one section's payload (the function body, a type, a constant,
    debug info...): mostly still well-formed around it, so it reaches the deeper decoders."""
    spans = [sp for sp in section_spans(data) if sp[3] > sp[2]]
    if not spans:
        return byte_set(rng, data)
    _, _, lo, hi = rng.choice(spans)
    p = rng.randrange(lo, hi)
    if rng.random() < 0.5:
        old, after = _read_varint(data, p)
        new = rng.choice((old + 1, max(0, old - 1), rng.randrange(16), rng.choice(_BIG)))
        return data[:p] + _varint(new) + data[after:]
    return data[:p] + bytes([rng.randrange(256)]) + data[p + 1:]


def splice_seeds(rng, data, other):
    """Head of one real file + tail of another (a plausible-looking but inconsistent module)."""
    return data[:_pos(rng, data)] + other[_pos(rng, other):]


def header(rng, data):
    b = bytearray(data)
    p = rng.randrange(0, HEADER)
    b[p] = rng.randrange(256)
    return bytes(b)


MUTATORS: dict[str, Callable] = {
    "bit_flip": bit_flip, "byte_set": byte_set, "truncate": truncate, "insert": insert_bytes,
    "delete": delete_bytes, "append_garbage": append_garbage, "section_length": section_length,
    "varint": varint_splice, "fixed_int": fixed_int, "section_shuffle": section_shuffle,
    "splice": splice_seeds, "header": header, "in_section": in_section,
}
# Most weight on changes that keep the file almost valid (they reach deepest into the reader).
WEIGHTS = {"in_section": 6, "bit_flip": 4, "byte_set": 4, "varint": 4, "fixed_int": 2, "section_length": 2, "insert": 2,
           "delete": 2, "truncate": 1, "append_garbage": 1, "section_shuffle": 1, "splice": 1, "header": 1}


def mutate(rng: random.Random, seed_list: list[tuple[str, bytes]]) -> tuple[str, str, bytes]:
    """(seed name, mutator name, corrupted bytes); one to three stacked mutations."""
    name, data = rng.choice(seed_list)
    names = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=rng.choice((1, 1, 1, 2, 3)))
    for m in names:
        data = (splice_seeds(rng, data, rng.choice(seed_list)[1]) if m == "splice"
                else MUTATORS[m](rng, data))
    return name, "+".join(names), data


# -- one case ---------------------------------------------------------------------------------------

def check(data: bytes, original) -> dict:
    """Run one corrupted file through the reader and the differ. `outcome`: "typed_error" (the reader
    refused it with a BytecodeError), "ok" (it read, canonicalized and diffed), or "traceback"
    (anything else: a defect). `warnings`: Python warnings raised on the way."""
    from tileport.tileir import BytecodeError, canonicalize, diff, read_module, to_text
    rec: dict = {"outcome": "ok"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = read_module(data)
        except BytecodeError as e:
            rec["outcome"] = "typed_error"
            rec["offset_known"] = getattr(e, "offset", None) is not None
        except BaseException as e:  # noqa: BLE001 - every other exception is what we look for
            rec.update(outcome="traceback", stage="read", error=_describe(e))
        else:
            stage = "canonicalize"
            try:
                to_text(canonicalize(module))
                stage = "diff"
                report = diff(original, module)
                stage = "report"
                json.dumps(report.to_dict())
                report.to_markdown()
                rec["verdict"] = report.verdict
            except BaseException as e:  # noqa: BLE001
                rec.update(outcome="traceback", stage=stage, error=_describe(e))
    rec["warnings"] = [str(w.message)[:200] for w in caught]
    return rec


def _describe(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    return f"{type(e).__name__} at {where}: {str(e)[:300]}"


# -- the long run: workers with a watchdog ----------------------------------------------------------

def disasm_refuses(data: bytes, disasm: str) -> bool:
    """True if tileirdisasm refuses the bytes (it also verifies op semantics the reader leaves to
    the diff, so this counts the reader's remaining leniency; it is no defect by itself)."""
    with tempfile.NamedTemporaryFile(suffix=".tileirbc") as f:
        f.write(data)
        f.flush()
        proc = subprocess.run([disasm, f.name], capture_output=True, timeout=60)
    return proc.returncode != 0


def _worker(conn, mem_bytes: int, disasm: str | None) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    sys.setrecursionlimit(10_000)
    from tileport.tileir import read_module
    originals: dict[str, object] = {}
    seed_data = dict(conn.recv())
    while True:
        msg = conn.recv()
        if msg is None:
            return
        seed_name, data = msg
        if seed_name not in originals:
            originals[seed_name] = read_module(seed_data[seed_name])
        start = time.perf_counter()
        rec = check(data, originals[seed_name])
        rec["seconds"] = time.perf_counter() - start
        if disasm and rec["outcome"] == "ok" and data[8:10] <= bytes([13, 4]):  # tileirdisasm reads <= 13.4
            rec["disasm_refuses"] = disasm_refuses(data, disasm)
        rec["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        conn.send(rec)


class _Pool:
    """One worker process; restarted after a hang or a crash."""

    def __init__(self, seed_list, mem_bytes: int, disasm: str | None):
        self.seed_list, self.mem_bytes, self.disasm = seed_list, mem_bytes, disasm
        self.proc = None
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.mem_bytes, self.disasm), daemon=True)
        self.proc.start()
        self.conn.send(self.seed_list)

    def run(self, seed_name: str, data: bytes, timeout: float) -> dict:
        self.conn.send((seed_name, data))
        if self.conn.poll(timeout):
            try:
                return self.conn.recv()
            except EOFError:
                pass
            self.restart()
            return {"outcome": "crash", "error": f"worker died (exit code {self.proc.exitcode})"}
        self.restart()
        return {"outcome": "hang", "error": f"no result within {timeout} s"}

    def restart(self) -> None:
        self.proc.kill()
        self.proc.join()
        self._start()

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def _commit() -> str:
    """HEAD, with "+dirty" when tracked files differ from it (the figures then are not of HEAD)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "src", "eval"]).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def run(n: int, seed: int, hang_s: float, mem_mib: int, keep: Path | None, disasm: str | None = None,
        corpus: bool = True) -> dict:
    seed_list = seeds(corpus=corpus)
    rng = random.Random(seed)
    pool = _Pool(seed_list, mem_mib << 20, disasm)
    counts = {"ok": 0, "typed_error": 0, "traceback": 0, "hang": 0, "crash": 0}
    by_mutator: dict[str, dict[str, int]] = {}
    verdicts: dict[str, int] = {}
    defects: list[dict] = []
    n_warnings = offsets_unknown = disasm_refused = 0
    max_rss = 0
    slowest = 0.0
    start = time.perf_counter()
    try:
        for i in range(n):
            seed_name, how, data = mutate(rng, seed_list)
            rec = pool.run(seed_name, data, hang_s)
            outcome = rec["outcome"]
            counts[outcome] += 1
            for m in how.split("+"):
                by_mutator.setdefault(m, {}).setdefault(outcome, 0)
                by_mutator[m][outcome] += 1
            n_warnings += len(rec.get("warnings", []))
            offsets_unknown += outcome == "typed_error" and not rec.get("offset_known")
            disasm_refused += bool(rec.get("disasm_refuses"))
            if "verdict" in rec:
                verdicts[rec["verdict"]] = verdicts.get(rec["verdict"], 0) + 1
            max_rss = max(max_rss, rec.get("max_rss_kib", 0))
            slowest = max(slowest, rec.get("seconds", hang_s if outcome == "hang" else 0.0))
            if outcome in ("traceback", "hang", "crash"):
                defect = {"case": i, "seed": seed_name, "mutators": how, "outcome": outcome,
                          "stage": rec.get("stage"), "error": rec.get("error")}
                if keep is not None:
                    keep.mkdir(parents=True, exist_ok=True)
                    path = keep / f"case{i:05d}.tileirbc"
                    path.write_bytes(data)
                    defect["file"] = str(path)
                defects.append(defect)
            if (i + 1) % 500 == 0:
                print(f"{i + 1}/{n}: {counts}", flush=True)
    finally:
        pool.close()
    return {
        "what": "corrupted real Tile IR bytecode through read -> canonicalize -> to_text -> diff -> report",
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tileport": str(Path(sys.modules["tileport"].__file__).parent) if "tileport" in sys.modules else None,
        "rng_seed": seed,
        "seed_files": len(seed_list),
        "files": n,
        "typed_errors": counts["typed_error"],
        "typed_errors_without_offset": offsets_unknown,
        "read_and_diffed": counts["ok"],
        "warnings": n_warnings,
        "tracebacks": counts["traceback"],
        "hangs": counts["hang"],
        "crashes": counts["crash"],
        "hang_limit_s": hang_s,
        "memory_cap_mib": mem_mib,
        "max_rss_mib": round(max_rss / 1024, 1),
        "slowest_case_s": round(slowest, 3),
        "seconds": round(time.perf_counter() - start, 1),
        "verdicts_of_read_files": verdicts,
        "read_but_refused_by_tileirdisasm": disasm_refused if disasm else None,
        "by_mutator": by_mutator,
        "defects": defects[:50],
    }


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=5000, help="corrupted files to run (default 5000)")
    p.add_argument("--out", type=Path, required=True, help="JSON file for the figures")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--hang", type=float, default=10.0, help="seconds after which a case is a hang")
    p.add_argument("--mem-mib", type=int, default=2048, help="address-space cap of a worker (MiB)")
    p.add_argument("--keep", type=Path, default=None, help="folder for the files that found a defect")
    p.add_argument("--disasm", action="store_true",
                   help="also count files the reader accepts but tileirdisasm refuses (needs tileirdisasm)")
    p.add_argument("--no-corpus", action="store_true", help="leave out the product corpus's captures as seeds")
    args = p.parse_args(argv)
    if args.n <= 0:
        p.error("--n must be positive")
    disasm = None
    if args.disasm:
        from tileport import toolchain
        found = toolchain.tileirdisasm()
        if found is None:
            p.error("--disasm: tileirdisasm is not installed")
        disasm = str(found)
    figures = run(args.n, args.seed, args.hang, args.mem_mib, args.keep, disasm, corpus=not args.no_corpus)
    write_atomic(args.out, json.dumps(figures, indent=2) + "\n")
    bad = figures["tracebacks"] + figures["hangs"] + figures["crashes"]
    print(f"{figures['files']} files: {figures['typed_errors']} typed errors, {figures['read_and_diffed']} read "
          f"and diffed, {figures['tracebacks']} tracebacks, {figures['hangs']} hangs, {figures['crashes']} "
          f"crashes, max RSS {figures['max_rss_mib']} MiB, {figures['seconds']} s -> {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
