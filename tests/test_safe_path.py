"""`python -m tileport` run in a user's folder never imports the user's modules in place of the standard
library's or tileport's dependencies (`python -m` puts the working directory first on sys.path)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
KERNEL = """import cuda.tile as ct

@ct.kernel
def k(x, y):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(y, index=(ct.bid(0),), tile=t)
"""
# Modules tileport imports after it starts (standard library and dependencies): never to run from the folder.
NEVER = ("copy", "json", "typing", "enum", "re", "ast", "inspect", "textwrap", "dataclasses", "pathlib", "shutil",
         "tempfile", "subprocess", "hashlib", "traceback", "tokenize", "string", "argparse", "fcntl", "struct",
         "typer", "rich", "click", "numpy", "yaml", "tomllib", "decimal", "fractions", "random", "datetime")
# What Python's own `-m` machinery (runpy, importlib.util) imports before any tileport code runs, when the
# interpreter's startup did not import it already (`python -S`); `collections` and `importlib` (packages) too.
BEFORE_TILEPORT = ("warnings", "keyword", "operator", "reprlib", "types", "functools", "contextlib")
MARKER = "with open({log!r}, 'a') as _f:\n    _f.write(__name__ + '\\n')\n"
# A shadow that works (runs the real module's source after the marker), so the run goes on and shows what
# else gets imported.
WORKING = MARKER + "import sys as _s\n_p = _s._stdlib_dir + '/' + __name__ + '.py'\nexec(compile(open(_p).read(), _p, 'exec'))\n"


def plant(folder: Path, names, body: str, log: Path) -> None:
    for name in names:
        (folder / f"{name}.py").write_text(body.format(log=str(log)))


def run(folder: Path, *args: str, flags: tuple[str, ...] = (), extra_path: tuple[str, ...] = ()):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *extra_path])}
    env.pop("PYTHONSAFEPATH", None)
    return subprocess.run([sys.executable, *flags, "-m", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def ran(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


@pytest.mark.parametrize("module", ["tileport", "tileport.cli"])
def test_modules_in_the_working_directory_never_run(tmp_path, module):
    folder, log = tmp_path / "user", tmp_path / "ran.log"
    folder.mkdir()
    plant(folder, NEVER, MARKER, log)
    (folder / "k.py").write_text(KERNEL)
    r = run(folder, module, "--help")
    assert r.returncode == 0 and "Usage" in r.stdout, r.stdout + r.stderr
    r = run(folder, module, "translate", "k.py", "-o", "crate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (folder / "crate" / "src" / "k.rs").is_file()
    assert ran(log) == []


def test_what_python_imported_before_tileport_is_left_behind(tmp_path):
    """Without the interpreter's site startup, Python's `-m` machinery imports BEFORE_TILEPORT from the
    folder before tileport starts: tileport then starts again with `-P` and never runs on them."""
    folder, log = tmp_path / "user", tmp_path / "ran.log"
    folder.mkdir()
    plant(folder, BEFORE_TILEPORT, WORKING, log)
    plant(folder, NEVER, MARKER, log)
    r = run(folder, "tileport", "--help", flags=("-S",), extra_path=tuple(site.getsitepackages()))
    assert r.returncode == 0 and "Usage" in r.stdout, r.stdout + r.stderr
    shadowed = ran(log)
    assert shadowed and set(shadowed) <= set(BEFORE_TILEPORT)
    assert len(shadowed) == len(set(shadowed))  # each once: in the first process, never in tileport's
    assert "python -P" in r.stderr and f"{shadowed[0]}.py" in r.stderr


@pytest.mark.parametrize("how", [("-m", "app"), ("app.py",), ("-c", "import app")])
def test_a_program_importing_tileport_keeps_its_own_module_path(tmp_path, how):
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "helper.py").write_text("VALUE = 42\n")
    (folder / "app.py").write_text("import tileport\nimport helper\nprint('helper', helper.VALUE)\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, *how], cwd=folder, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "helper 42" in r.stdout, r.stderr
