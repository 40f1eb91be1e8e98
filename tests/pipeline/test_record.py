"""`tileport record`: the bootstrap wraps `cuda.tile.launch` in the child process and writes the spec.

Runs on the CPU with a stand-in `cuda.tile` package (a `launch` that only counts calls, and a
`Constant` annotation shaped like cuTile's) and numpy arrays, so the hook, the description of every
argument kind, de-duplication, counts, several processes writing one spec and the chained
sitecustomize are checked without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileport.launches import record
from tileport.launches import load_spec

FAKE_TILE = '''
import typing
class ConstantAnnotation:
    pass
class _Constant:
    def __getitem__(self, t):
        return typing.Annotated[t, ConstantAnnotation()]
Constant = _Constant()
CALLS = []
def launch(stream, grid, kernel, kernel_args, /):
    CALLS.append((grid, kernel_args))
class kernel:
    def __init__(self, fn):
        self._pyfunc = fn
'''

PROGRAM = '''
import sys
import numpy as np
import cuda.tile as ct
from cuda.tile import launch as bare_launch

@ct.kernel
def scale(x, y, alpha: float, n, TILE: ct.Constant[int]):
    pass

x = np.zeros((8, 6), dtype=np.float16)[:, ::2]
idx = np.arange(3, 40, dtype=np.int32)
for i in range(3):
    ct.launch(None, (4,), scale, (x, idx + i, 0.5, 7, 128))  # other index values: the same launch
bare_launch(None, (2, 2, 1), scale, (x, idx, 1.5, 7, 64))
ct.launch(None, (1,), scale, (x,))  # cannot be described (too few arguments): warned, still launched
assert len(ct.CALLS) == 5, ct.CALLS  # the real launch ran every time
import os
home = os.environ["TILEPORT_RECORD_HOME"]  # the program's module search path is its own:
assert sys.path.count(home) == int(os.environ["HOME_COUNT_WITHOUT_RECORD"]), sys.path
print("program ran", sys.argv[1:])
'''


SRC = Path(record.__file__).resolve().parents[2]  # this tileport (the test runs `python -m tileport.cli`)


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "cuda" / "tile"
    pkg.mkdir(parents=True)
    (tmp_path / "site" / "cuda" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(FAKE_TILE)
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import os\nopen(os.environ['CHAIN_MARK'], 'w').write('chained')\n")
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("CHAIN_MARK", str(tmp_path / "chained.txt"))
    # How often tileport's own directory is on the search path of a plain run (an editable install
    # puts it there through a .pth file): recording must leave that count as it is.
    home = str(SRC)
    plain = subprocess.run([sys.executable, "-c", f"import sys; print(sys.path.count({home!r}))"],
                           capture_output=True, text=True, check=True, env={**os.environ, "CHAIN_MARK": os.devnull})
    monkeypatch.setenv("HOME_COUNT_WITHOUT_RECORD", plain.stdout.strip())
    return tmp_path, prog


def test_record_describes_every_launch_once_with_counts(fake_env):
    tmp, prog = fake_env
    spec = tmp / "out" / "launches.json"
    rc, records = record.run([sys.executable, str(prog), "a"], spec)
    assert rc == 0
    assert len(records) == 2  # three identical launches are one record
    first, second = records
    assert first.count == 3 and second.count == 1
    assert first.kernel == "scale" and first.file == str(prog) and first.grid == (4, 1, 1)
    assert second.grid == (2, 2, 1)
    args = {a.name: a for a in first.args}
    assert (args["x"].kind, args["x"].dtype, args["x"].shape, args["x"].strides) == ("array", "float16", [8, 3], [6, 2])
    assert (args["y"].dtype, args["y"].shape, args["y"].range) == ("int32", [37], [3, 41])  # ranges merged
    assert (args["alpha"].kind, args["alpha"].dtype, args["alpha"].value) == ("scalar", "float32", 0.5)
    assert (args["n"].kind, args["n"].dtype, args["n"].value) == ("scalar", "int32", 7)
    assert (args["TILE"].kind, args["TILE"].value) == ("const", 128)
    assert {a.name: a.value for a in second.args if a.kind == "const"} == {"TILE": 64}
    assert (tmp / "chained.txt").read_text() == "chained"  # the environment's own sitecustomize still ran
    assert not (spec.parent / "launches.json.lock").exists()
    assert json.loads(spec.read_text())["format"] == "tileport-launches"


def test_record_merges_processes_and_append(fake_env):
    tmp, prog = fake_env
    spec = tmp / "launches.json"
    script = f"import subprocess, sys\nfor _ in range(2): subprocess.run([sys.executable, {str(prog)!r}], check=True)\n"
    rc, records = record.run([sys.executable, "-c", script], spec)
    assert rc == 0 and [r.count for r in records] == [6, 2]  # two child processes, one spec
    rc, records = record.run([sys.executable, str(prog)], spec, append=True)
    assert [r.count for r in records] == [9, 3]
    rc, records = record.run([sys.executable, str(prog)], spec)  # without --append: this run only
    assert [r.count for r in records] == [3, 1]


def test_record_keeps_failing_exit_code_and_what_ran(fake_env):
    tmp, prog = fake_env
    prog.write_text(PROGRAM + "\nraise SystemExit(3)\n")
    rc, records = record.run([sys.executable, str(prog)], tmp / "s.json")
    assert rc == 3 and len(records) == 2


def test_no_hook_without_the_spec_variable(fake_env, monkeypatch):
    tmp, prog = fake_env
    monkeypatch.setenv("PYTHONPATH", f"{tmp / 'site'}{os.pathsep}{SRC}")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import tileport.launches.record as r, cuda.tile as ct
        r.install_hooks()
        print(getattr(ct.launch, '__tileport_recording__', False))""")], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_cli_record(fake_env, monkeypatch):
    tmp, prog = fake_env
    monkeypatch.setenv("PYTHONPATH", f"{tmp / 'site'}{os.pathsep}{SRC}")
    spec = tmp / "cli.json"
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "record", "--out", str(spec), "--",
                           sys.executable, str(prog), "--flag"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "program ran ['--flag']" in proc.stdout and "2 distinct launch(es)" in proc.stdout
    assert len(load_spec(spec)) == 2


def test_record_warns_once_when_a_launch_cannot_be_described(fake_env):
    tmp, prog = fake_env
    proc = subprocess.run([sys.executable, str(prog)], env=record.child_env(tmp / "w.json"), capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("tileport record: could not describe a launch: ValueError: scale: 1 arguments for 5") == 1


def test_values_tileport_cannot_replay_are_other():
    import numpy as np
    assert record.describe_value("z", np.zeros(3, dtype=np.complex64), False).to_dict() == {
        "name": "z", "kind": "other", "type": "ndarray of complex64"}
    assert record.describe_value("t", (1, 2), False).kind == "other"
    assert record.describe_value("s", np.float16(2.0), False).to_dict() == {
        "name": "s", "kind": "scalar", "dtype": "float16", "value": 2.0}
    assert record.describe_value("b", True, False).dtype == "bool"
    assert record.describe_value("big", 2**40, False).dtype == "int64"


def test_cli_record_fails_when_nothing_was_recorded(fake_env, monkeypatch):
    tmp, _ = fake_env
    monkeypatch.setenv("PYTHONPATH", f"{tmp / 'site'}{os.pathsep}{SRC}")
    proc = subprocess.run([sys.executable, "-m", "tileport.cli", "record", "--out", str(tmp / "none.json"), "--",
                           sys.executable, "-c", "print('no kernels here')"], capture_output=True, text=True)
    assert proc.returncode == 1 and "no launch was recorded" in proc.stdout


def test_record_hooks_the_real_cuda_tile(tmp_path):
    """The installed cuTile Python: the import hook wraps its launch, and constants are read the way
    cuTile reads them (string annotations, aliases). Without a GPU the launch itself then fails; the
    record is taken before it."""
    pytest.importorskip("cuda.tile")
    (tmp_path / "kmod.py").write_text(
        "from __future__ import annotations\nimport cuda.tile as ct\nConstInt = ct.Constant[int]\n\n\n@ct.kernel\n"
        "def copy(x, y, alpha: float, TILE: ConstInt, FLAG: ct.Constant[bool]):\n"
        "    ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))\n")
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nsys.path.insert(0, sys.argv[1])\nimport numpy as np\nimport cuda.tile as ct\n"
                    "import kmod\nx = np.zeros(256, dtype=np.float32)\ntry:\n"
                    "    ct.launch(None, (1,), kmod.copy, (x, x, 1.5, 256, True))\nexcept Exception:\n    pass\n")
    rc, records = record.run([sys.executable, str(prog), str(tmp_path)], tmp_path / "s.json")
    assert rc == 0 and len(records) == 1
    assert [(a.name, a.kind, a.value) for a in records[0].args][2:] == [
        ("alpha", "scalar", 1.5), ("TILE", "const", 256), ("FLAG", "const", True)]
    assert records[0].file == str(tmp_path / "kmod.py")
