"""Package mode at scale: a generated 100-kernel library (eval/synthetic_library.py) translated once, its progress
lines and its time; rustfmt's runs over the crate. Translate-only (no cargo)."""

from __future__ import annotations

import io
import json
import re
import resource
import time

import pytest

from eval import synthetic_library
from tileport.emit.rust import crate as C
from tileport.packages import StderrProgress, translate
from tileport.packages.library import STAGES

KERNELS = 100
# CPU seconds the 100-kernel library may take (about 8 s on the 2-core CI machine): a guard against a
# quadratic slip, not a benchmark (bench/results/package-speed.md holds the measurements).
CPU_BOUND_S = 60.0
LINE = re.compile(r"^tileport: (\d+)/(\d+) files, (\d+) kernels found, (\d+) translated; (\S+) elapsed, ETA (\S+)"
                  r"(?:; (\S+\.py): (?:(\d+) kernels, (\d+) translated|no kernels))?$")


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The library translated in this process (one worker: its CPU time is this process's), progress on every
    file (`every=0`)."""
    tmp = tmp_path_factory.mktemp("speed")
    root = synthetic_library.write(tmp, KERNELS)
    stream = io.StringIO()
    c0, t0 = cpu_seconds(), time.perf_counter()
    lib, _report, (json_path, _html) = translate(str(root), tmp / "out", jobs=1,
                                                 progress=StderrProgress(stream, every=0))
    return {"lib": lib, "doc": json.loads(json_path.read_text()), "lines": stream.getvalue().splitlines(),
            "cpu": cpu_seconds() - c0, "wall": time.perf_counter() - t0, "out": tmp / "out"}


def test_the_library_translates_within_its_bound(run):
    assert run["doc"]["totals"]["found"] == KERNELS and run["doc"]["totals"]["translated"] == KERNELS
    assert run["cpu"] < CPU_BOUND_S, f"{run['cpu']:.1f} s CPU ({run['wall']:.1f} s wall) for {KERNELS} kernels"
    stages = run["doc"]["stages"]
    assert list(stages) == list(STAGES) and all(v >= 0 for v in stages.values()), stages
    assert stages["lower"] > 0 and stages["rustfmt"] > 0 and stages["render"] > 0


def test_progress_names_each_file_and_counts_up_to_the_totals(run):
    lines = run["lines"]
    files = run["lib"].scanned
    assert len(lines) == files, lines  # `every=0`: one line per kernel file
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), [line for line, m in zip(lines, parsed) if not m]
    done = [int(m.group(1)) for m in parsed]
    assert done == list(range(1, files + 1)) and {int(m.group(2)) for m in parsed} == {files}
    found = [int(m.group(3)) for m in parsed]
    assert found == sorted(found) and found[-1] == KERNELS and int(parsed[-1].group(4)) == KERNELS
    assert parsed[-1].group(6) == "0s"  # nothing left
    named = {m.group(7) for m in parsed if m.group(8)}
    assert {r.file for r in run["lib"].rows} <= named  # every file with kernels is named when it is done
    first = parsed[0]  # largest file first: the generated modules with the most kernels
    assert first.group(7).startswith("synlib/ops/") and int(first.group(8)) >= 10


def test_progress_is_bounded_in_rate(tmp_path):
    """A progress that may print once an hour prints the first file's line and the last one only."""
    stream = io.StringIO()
    progress = StderrProgress(stream, every=3600)
    from tileport.packages.library import Tally
    for i in range(1, 51):
        progress(Tally(50, 5000, i, 100 * i, i, i, f"m{i}.py: 1 kernels, 1 translated"))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("tileport: 1/50 files") and lines[1].startswith("tileport: 50/50")


def test_a_file_declaring_modules_is_formatted_without_them(tmp_path):
    """rustfmt given lib.rs formats the files of its `mod x;` too: lib.rs is formatted through stdin, so that
    the runs over the other files (in parallel) are the only ones to touch them."""
    (tmp_path / "lib.rs").write_text("pub mod a;\npub   fn f( ) { }\n")
    (tmp_path / "a.rs").write_text("pub   fn g( ) { }\n")
    C.rustfmt([tmp_path / "lib.rs"])
    assert (tmp_path / "lib.rs").read_text() == "pub mod a;\npub fn f() {}\n"
    assert (tmp_path / "a.rs").read_text() == "pub   fn g( ) { }\n"
    C.rustfmt([tmp_path / "lib.rs", tmp_path / "a.rs"])
    assert (tmp_path / "a.rs").read_text() == "pub fn g() {}\n"


def test_rustfmt_rejections_are_reported_from_every_run(tmp_path):
    for name in ("lib.rs", "b.rs", "c.rs"):
        (tmp_path / name).write_text("pub mod a;\n" if name == "lib.rs" else "fn ok() {}\n")
    (tmp_path / "c.rs").write_text("fn broken( {\n")
    with pytest.raises(RuntimeError, match="rustfmt rejected the generated code"):
        C.rustfmt([tmp_path / n for n in ("lib.rs", "b.rs", "c.rs")])
