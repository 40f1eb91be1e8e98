"""`tileport record` of whole test suites: bounded per kernel, counts that survive a killed process, a
progress line that leaves the command's stderr intact, failing and crashing tests, several processes at
once, and the recorded specializations ported by `port --launches`.

Runs on the CPU with a stand-in `cuda.tile` (a `launch` that does nothing, `Constant` shaped like cuTile's)
and numpy arrays, as tests/pipeline/test_record.py does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tileport.launches import record
from tileport.launches.bounds import Caps, merge_capped
from tileport.launches.spec import LaunchArg, LaunchRecord, load_document

FAKE_TILE = '''
import typing
class ConstantAnnotation:
    pass
class _Constant:
    def __getitem__(self, t):
        return typing.Annotated[t, ConstantAnnotation()]
Constant = _Constant()
def launch(stream, grid, kernel, kernel_args, /):
    pass
class kernel:
    def __init__(self, fn):
        self._pyfunc = fn
def bid(i):
    pass
def load(*a, **k):
    pass
def store(*a, **k):
    pass
'''

# A real cuTile kernel (its body is what `port` reads; recording only launches it through the stand-in).
KERNELS = '''import cuda.tile as ct


@ct.kernel
def scale_kernel(x, y, alpha: float, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(y, index=(bid,), tile=(t * alpha).astype(y.dtype))
'''

HELPERS = '''import numpy as np
import cuda.tile as ct
from kernels import scale_kernel


def scale(n, dtype="float16", tile=16, times=1):
    x = np.zeros(n, dtype=dtype)
    for _ in range(times):
        ct.launch(None, ((n + tile - 1) // tile,), scale_kernel, (x, x.copy(), 2.0, tile))
'''

SRC = Path(record.__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The stand-in cuda.tile, and the kernel module with its launch helper, on PYTHONPATH."""
    pkg = tmp_path / "site" / "cuda" / "tile"
    pkg.mkdir(parents=True)
    (tmp_path / "site" / "cuda" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(FAKE_TILE)
    (tmp_path / "site" / "kernels.py").write_text(KERNELS)
    (tmp_path / "site" / "helpers.py").write_text(HELPERS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return tmp_path


def program(tmp: Path, body: str) -> Path:
    path = tmp / f"prog{len(list(tmp.glob('prog*.py')))}.py"
    path.write_text("import os, signal, sys, time\nfrom helpers import scale\n" + textwrap.dedent(body))
    return path


# ------------------------------------------------------------------------------------ specializations

def rec(shape=(64,), strides=None, dtype="float16", tile=16, grid=(4,), n=None, framework="cutile", options=None):
    args = [LaunchArg("x", "array", dtype, list(shape), list(strides or [1] * len(shape))),
            LaunchArg("TILE", "const", value=tile)]
    if n is not None:
        args.append(LaunchArg("n", "scalar", "int32", value=n))
    return LaunchRecord(framework, "k", "/a/k.py", tuple(list(grid) + [1] * (3 - len(grid))), args, "k",
                        options=options or {})


def test_what_makes_a_specialization_distinct():
    base = rec().specialization()
    assert rec(shape=(128,), grid=(8,)).specialization() == base  # another extent of the same class, another grid
    for other in [rec(shape=(65,)), rec(shape=(1,)), rec(dtype="float32"), rec(tile=32), rec(shape=(64, 64)),
                  rec(strides=[2]), rec(strides=[0]), rec(options={"num_warps": 8}, framework="triton")]:
        assert other.specialization() != base, other
    assert rec(shape=(4, 64), strides=[64, 1]).specialization() == rec(shape=(4, 80), strides=[80, 1]).specialization()
    assert rec(shape=(4, 64), strides=[64, 1]).specialization() != rec(shape=(4, 65), strides=[65, 1]).specialization()
    # Triton specializes integer arguments on == 1 and divisibility by 16, cuTile does not
    tri = [rec(framework="triton", n=v).specialization() for v in (32, 48, 33, 1)]
    assert tri[0] == tri[1] and len(set(tri)) == 3
    assert rec(n=32).specialization() == rec(n=33).specialization()


def test_caps_keep_the_first_and_count_every_launch_not_kept():
    caps = Caps(specializations=2, launches=2)
    new = [LaunchRecord(**{**r.__dict__, "count": 2}) for tile in (16, 32, 64) for r in
           [rec(tile=tile, shape=(n,), grid=(n // 16,)) for n in (32, 64, 96)]]
    records, dropped = merge_capped([], [], new, caps)
    assert [(r.args[1].value, r.args[0].shape, r.count) for r in records] == [
        (16, [32], 2), (16, [64], 2), (32, [32], 2), (32, [64], 2)]
    (d,) = dropped
    assert (d.kernel, len(d.specializations), d.launches, d.extra_launches) == ("k", 1, 6, 4)
    # the same launches again (another process): kept ones count up, the dropped specialization is one
    records, dropped = merge_capped(records, dropped, new, caps)
    assert [r.count for r in records] == [4, 4, 4, 4]
    assert (len(dropped[0].specializations), dropped[0].launches, dropped[0].extra_launches) == (1, 12, 8)


# ------------------------------------------------------------------------------------ crashes

@pytest.mark.parametrize("death", ["os.kill(os.getpid(), signal.SIGKILL)", "os._exit(5)"])
def test_repeat_counts_survive_a_killed_process(site, death):
    prog = program(site, f"""
        scale(64, times=40)
        scale(48, times=2)
        time.sleep(0.6)  # several flush intervals
        {death}
        """)
    spec = site / "s.json"
    rc, records = record.run([sys.executable, str(prog)], spec, flush_every=0.05)
    assert rc in (137, 5)
    assert [(r.args[0].shape, r.count) for r in records] == [([64], 40), ([48], 2)]


def test_a_forked_child_counts_its_own_launches_once(site):
    prog = program(site, """
        scale(64, times=3)  # two repeats pending in memory when the process forks
        pid = os.fork()
        scale(64, times=2)  # in both processes
        if pid == 0:
            time.sleep(0.5)  # the child's own flusher writes its counts
            os._exit(0)
        os.waitpid(pid, 0)
        """)
    rc, records = record.run([sys.executable, str(prog)], site / "s.json", flush_every=0.05)
    assert rc == 0 and [r.count for r in records] == [7]


# ------------------------------------------------------------------------------------ progress

def test_progress_line_leaves_the_commands_stderr_intact(site):
    prog = program(site, """
        for i in range(6):
            print(f"line {i} of the program's stderr", file=sys.stderr, flush=True)
            scale(16 * (i % 3 + 1), tile=16 * (i % 2 + 1), times=5)
            sys.stderr.write("a line written ")  # in pieces, a progress line never lands inside it
            sys.stderr.flush()
            time.sleep(0.15)
            sys.stderr.write("in two pieces\\n")
            sys.stderr.flush()
        print("stdout is the program's own")
        """)
    spec = site / "s.json"
    driver = (f"import sys\nsys.path.insert(0, {str(SRC)!r})\nfrom tileport.launches import record\n"
              f"rc, _ = record.run([sys.executable, {str(prog)!r}], __import__('pathlib').Path({str(spec)!r}), "
              f"flush_every=0.05, progress_every=0.1)\nsys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "stdout is the program's own\n"
    lines = proc.stderr.splitlines()
    progress = [ln for ln in lines if ln.startswith("tileport record: ")]
    own = [ln for ln in lines if not ln.startswith("tileport record: ")]
    assert own == [x for i in range(6) for x in (f"line {i} of the program's stderr", "a line written in two pieces")]
    assert 2 <= len(progress) <= 6 * 0.3 / 0.1 + 2, progress  # updates, at a bounded rate, only on change
    assert progress[-1].startswith("tileport record: ") and "specializations of 1 kernels" in progress[-1]
    assert len(progress) == len(set(progress))


def test_progress_text_counts_launches_specializations_kernels_and_drops(site):
    spec = site / "s.json"
    record.merge_into(spec, [rec(tile=16), rec(tile=16, shape=(128,)), rec(tile=32)], Caps(1, 1))
    from tileport.launches.progress import progress_text
    assert progress_text(spec) == ("tileport record: 3 launches, 1 specializations of 1 kernels (2 launches over the "
                                   "caps not kept, 1 specializations among them)")
    assert progress_text(site / "absent.json") is None


# ------------------------------------------------------------------------------------ test suites

SUITE = {
    "test_a_ok.py": "from helpers import scale\n\ndef test_ok():\n    scale(64, times=3)\n",
    "test_b_fails.py": "from helpers import scale\n\ndef test_fails():\n    scale(48, 'float32')\n    assert False\n",
    "test_c_crash.py": ("import os, signal, time\nfrom helpers import scale\n\ndef test_crash():\n"
                        "    scale(32, tile=32, times=2)\n"
                        "    time.sleep(0.3)  # a flush interval: the repeat is written\n"
                        "    os.kill(os.getpid(), signal.SIGKILL)\n"),
    "test_d_never.py": "from helpers import scale\n\ndef test_never():\n    scale(256, 'float32', tile=64)\n",
}


def suite(tmp: Path, files: dict[str, str]) -> Path:
    tests = tmp / "tests"
    tests.mkdir()
    for name, text in files.items():
        (tests / name).write_text(text)
    return tests


def test_a_suite_with_failing_and_crashing_tests_keeps_what_ran(site):
    tests = suite(site, SUITE)
    rc, records = record.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
                             site / "s.json", flush_every=0.05)
    assert rc == 137  # the crash killed pytest
    assert [(r.args[0].dtype, r.args[0].shape, r.args[3].value, r.count) for r in records] == [
        ("float16", [64], 16, 3), ("float32", [48], 16, 1), ("float16", [32], 32, 2)]


def test_concurrent_processes_merge_with_exact_counts_and_caps(site):
    prog = program(site, """
        me = int(sys.argv[1])
        for i in range(30):
            scale(64, times=2)                   # every process: one launch, 60 times each
            scale(16 * (me + 5), tile=16)        # an extent of its own: the same specialization
            scale(64, tile=32 * (me + 1))        # a constant of its own: a specialization of its own
            if i % 10 == 0:
                time.sleep(0.05)
        """)
    spec = site / "s.json"
    script = (f"import subprocess, sys\nps = [subprocess.Popen([sys.executable, {str(prog)!r}, str(k)]) "
              f"for k in range(3)]\nsys.exit(max(p.wait() for p in ps))\n")
    rc, records = record.run([sys.executable, "-c", script], spec, caps=Caps(specializations=3, launches=2),
                             flush_every=0.05)
    assert rc == 0
    (dropped,) = load_document(spec)[1]
    by_tile = {}
    for r in records:
        by_tile.setdefault(r.args[3].value, []).append(r)
    assert len(by_tile) == 3 and sum(len(v) for v in by_tile.values()) <= 2 * 3  # both caps held
    shared = [r for r in by_tile[16] if r.args[0].shape == [64]]
    assert [r.count for r in shared] == [180]  # 3 processes x 30 x 2, merged exactly
    kept = sum(r.count for r in records)
    assert kept + dropped.launches + dropped.extra_launches == 3 * 30 * 4  # every launch counted once
    assert len(dropped.specializations) == 1  # TILE 32, 64, 96 besides 16: one of them is not kept
    assert dropped.launches == 30 and dropped.extra_launches == 2 * 30  # two of the four extents of TILE 16


# ------------------------------------------------------------------------------------ end to end

def test_record_a_suite_then_port_every_recorded_specialization(site, monkeypatch):
    tests = suite(site, {
        "test_f16.py": "from helpers import scale\n\ndef test_a():\n    scale(64)\n    scale(128, tile=32)\n",
        "test_f32.py": "from helpers import scale\n\ndef test_b():\n    scale(96, 'float32', times=4)\n",
    })
    monkeypatch.setenv("PYTHONPATH", f"{site / 'site'}{os.pathsep}{SRC}")
    spec = site / "launches.json"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "record", "--out", str(spec), "--", sys.executable,
                           "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 distinct launch(es), 3 specialization(s) of 1 kernel(s)" in proc.stdout
    monkeypatch.setenv("PYTHONPATH", str(SRC))  # the port reads the kernel file; the real cuda.tile compiles it
    out = site / "port"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "port", str(site / "site" / "kernels.py"),
                           "--launches", str(spec), "--until", "A", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    analysis = json.loads((out / "scale_kernel" / "A" / "analysis.json").read_text())
    assert analysis["config_source"].startswith("launches:spec:")
    configs = {(c["arrays"]["x"][0], c["constants"]["TILE"]) for c in analysis["configurations"]}
    assert configs == {("float16", 16), ("float16", 32), ("float32", 16)}
    assert all((out / "scale_kernel" / c["reference_ir"]).is_file() for c in analysis["configurations"])


def test_on_a_terminal_the_command_keeps_a_terminal_and_the_progress_line_is_transient(site):
    """stdout and stderr one terminal (a pseudo-terminal here): the command's output reaches it whole, the
    command still sees a terminal, and the progress line is drawn and erased in place."""
    import pty
    import select
    prog = program(site, """
        print("tty:", os.isatty(1), os.isatty(2), flush=True)
        for i in range(4):
            scale(64, tile=16 * (i + 1))
            time.sleep(0.2)
        print("done", file=sys.stderr)
        """)
    driver = (f"import sys\nsys.path.insert(0, {str(SRC)!r})\nfrom tileport.launches import record\n"
              f"rc, _ = record.run([sys.executable, {str(prog)!r}], "
              f"__import__('pathlib').Path({str(site / 's.json')!r}), flush_every=0.05, progress_every=0.1)\n"
              f"sys.exit(rc)\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        try:
            chunk = os.read(master, 1 << 16) if ready else b""
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=30) == 0, out
    os.close(master)
    text = out.decode()
    assert "tty: True True" in text and "done" in text
    assert "\r\x1b[Ktileport record: " in text and "specializations of 1 kernels" in text
    tail = text.rsplit("done", 1)[1]  # after the command's last output: no progress line left on the screen
    assert tail.strip("\r\n") == "" or tail.endswith("\r\x1b[K"), repr(tail)


FAKE_TRITON_JIT = '''
import inspect
class KernelParam:
    def __init__(self, p):
        self.name, self.is_constexpr = p.name, "constexpr" in str(p.annotation)
        self.has_default, self.default = p.default is not inspect.Parameter.empty, p.default
class JITFunction:
    def __init__(self, fn):
        self.fn = fn
        self.params = [KernelParam(p) for p in inspect.signature(fn).parameters.values()]
    def run(self, *args, grid, warmup, **kwargs):
        pass
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)
def jit(fn):
    return JITFunction(fn)
'''

TRITON_KERNELS = '''import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
'''


def test_record_a_triton_suite_then_port_every_recorded_specialization(site, monkeypatch):
    tri = site / "site" / "triton"
    (tri / "runtime").mkdir(parents=True)
    (tri / "language").mkdir()
    (tri / "__init__.py").write_text("from triton.runtime.jit import jit\n")
    (tri / "runtime" / "__init__.py").write_text("")
    (tri / "runtime" / "jit.py").write_text(FAKE_TRITON_JIT)
    (tri / "language" / "__init__.py").write_text("class constexpr:\n    pass\n")
    (site / "site" / "tkernels.py").write_text(TRITON_KERNELS)
    launch = ("import numpy as np\nfrom tkernels import add_kernel\n\ndef run(n, dtype, block):\n"
              "    x = np.zeros(n, dtype=dtype)\n    add_kernel[((n + block - 1) // block,)](x, x.copy(), n, block)\n")
    tests = suite(site, {"tlaunch.py": launch,
                         "test_t.py": ("from tlaunch import run\n\ndef test_f16():\n    run(100, 'float16', 64)\n"
                                       "    run(96, 'float16', 64)\n\n"
                                       "def test_f32():\n    run(100, 'float32', 128)\n")})
    spec = site / "launches.json"
    rc, records = record.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)], spec)
    assert rc == 0 and len(records) == 3
    assert len({r.specialization() for r in records}) == 3  # n = 96 is a multiple of 16: Triton specializes it
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    out = site / "port"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "port", str(site / "site" / "tkernels.py"),
                           "--launches", str(spec), "--until", "A", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    analysis = json.loads((out / "add_kernel" / "A" / "analysis.json").read_text())
    configs = {(c["arrays"]["x_ptr"][0], c["constants"]["BLOCK"]) for c in analysis["configurations"]}
    assert configs == {("float16", 64), ("float32", 128)}  # one port entry serves both values of n


def test_cli_record_reports_what_the_caps_did_not_keep(site, monkeypatch):
    prog = program(site, "scale(64, times=2)\nscale(128)\nscale(64, 'float32', times=3)\n")
    monkeypatch.setenv("PYTHONPATH", f"{site / 'site'}{os.pathsep}{SRC}")
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "record", "--out", str(site / "s.json"),
                           "--max-specializations", "1", "--max-launches", "1", "--", sys.executable, str(prog)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 distinct launch(es), 1 specialization(s) of 1 kernel(s)" in proc.stdout
    assert ("not kept over the caps: scale_kernel: 3 launch(es) of 1 more specialization(s) (--max-specializations "
            "1), 1 launch(es) of kept specializations with other grids or extents (--max-launches 1)") in \
        " ".join(proc.stdout.split())
