"""Capture without executing the user's file (tileport.capture.source).

A kernel file plants a side effect (a marker file, `os.system`, a raise) in every place Python would
run: top-level code, module values, decorators and their arguments, default arguments, annotations,
class bodies, helper decorators, other kernels' decorator arguments and compile-time evaluations.
Every command that reads a user's Python file runs on it; no marker may appear, and the clean kernel
must still capture. (`verify` reads only the corpus, `irdiff` only Tile IR files.)
"""

from __future__ import annotations

import json
import linecache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.capture import CaptureError, disassemble, kernel_namespace, reference_bytecode
from tileport.capture.source import restricted_builtins, sanitize
from tileport.cli import app
from tileport.ops.spec import Capture

HERE = Path(__file__).parent
ADD = Capture("planted_add", {"a": ("float32", 1), "b": ("float32", 1), "c": ("float32", 1)}, {}, {"BLOCK": 128})


@pytest.fixture
def planted(tmp_path) -> tuple[Path, Path]:
    markers = tmp_path / "markers"
    markers.mkdir()
    src = tmp_path / "planted.py"
    src.write_text((HERE / "planted.py.txt").read_text().replace("@MARKERS@", str(markers)))
    return src, markers


def cli(*args):
    return CliRunner().invoke(app, [*map(str, args)], catch_exceptions=False)


def test_capture_runs_nothing_and_still_captures(planted):
    src, markers = planted
    text = disassemble(reference_bytecode(src, ADD))
    assert "load_view_tko" in text and "store_view_tko" in text and "addf" in text
    assert sorted(p.name for p in markers.iterdir()) == []


def test_kernels_that_would_need_the_file_to_run_get_located_diagnostics(planted):
    src, markers = planted
    expected = {"planted_option": ("planted.py:68:", "[decorator]"),
                "planted_static_eval": ("planted.py:75:", "[static_eval]"),
                "planted_builtin": ("planted.py:81:", "[static_eval]"),
                "planted_host_value": ("planted.py:87:", "`SCALE`")}
    for kernel, (where, what) in expected.items():
        with pytest.raises(CaptureError) as e:
            reference_bytecode(src, Capture(kernel, {"a": ("float32", 1), "c": ("float32", 1)}, {}, {"BLOCK": 64}))
        assert where in str(e.value) and what in str(e.value), str(e.value)
        assert kernel not in kernel_namespace(src)
    assert sorted(p.name for p in markers.iterdir()) == []


def test_translate_and_port_stage_a_run_nothing(planted, tmp_path):
    src, markers = planted
    cli("translate", src, "-o", tmp_path / "crate")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"planted_add": [{"a": "float32", "b": "float32", "c": "float32", "BLOCK": 128}]}))
    cli("port", src, "--config", config, "--until", "A", "--out", tmp_path / "out")  # every kernel of the file
    assert sorted(p.name for p in markers.iterdir()) == []
    verdict = json.loads((tmp_path / "out" / "planted_add" / "A" / "verdict.json").read_text())
    assert verdict["verdict"] == "PASS", verdict["reason"]


@pytest.fixture
def planted_package(tmp_path) -> tuple[Path, Path]:
    """A package whose `__init__.py` and sibling module are planted files (the sibling also holds a helper and
    a constant), and a kernel module that uses them (`from .sibling import ...`, `from . import sibling`)."""
    markers = tmp_path / "markers"
    markers.mkdir()
    planted_text = (HERE / "planted.py.txt").read_text().replace("@MARKERS@", str(markers))
    pkg = tmp_path / "plantedpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(planted_text)
    (pkg / "sibling.py").write_text(planted_text + "\n\nWIDTH = 2\n\n\ndef double(t):\n    return t + t\n")
    (pkg / "kernels.py").write_text(
        "import cuda.tile as ct\n\nfrom . import sibling as sib\nfrom .sibling import WIDTH, double\n\n"
        f"open({str(markers / 'kernels_top_level')!r}, 'w').close()\n\n\n"
        "@ct.kernel\ndef uses_siblings(a, c, BLOCK: ct.Constant[int]):\n"
        "    x = ct.load(a, index=(ct.bid(0),), shape=(BLOCK,))\n"
        "    ct.store(c, index=(ct.bid(0),), tile=sib.double(double(x)) * WIDTH)\n")
    return pkg, markers


def test_package_mode_runs_nothing_of_a_planted_package(planted_package, tmp_path):
    """Package mode reads the kernel module's sibling and `__init__.py` (both planted) to translate it and to
    capture its reference IR; none of them runs."""
    pkg, markers = planted_package
    cli("translate", pkg, "-o", tmp_path / "crate")
    rows = {r["kernel"]: r for r in json.loads((tmp_path / "crate" / "library.json").read_text())["rows"]}
    assert rows["uses_siblings"]["translated"], rows["uses_siblings"]["diagnostic"]
    assert rows["planted_add"]["translated"] and rows["planted_add"]["module"] == "plantedpkg.sibling"
    cli("port", pkg, "--until", "A", "--out", tmp_path / "out", "--no-gpu")
    verdict = json.loads((tmp_path / "out" / "kernels.uses_siblings" / "A" / "verdict.json").read_text())
    assert verdict["verdict"] == "PASS", verdict["reason"]
    assert sorted(p.name for p in markers.iterdir()) == []


@pytest.mark.cargo
def test_port_stage_b_runs_nothing(planted, tmp_path):
    src, markers = planted
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"planted_add": [{"a": "float32", "b": "float32", "c": "float32", "BLOCK": 128}]}))
    cli("port", f"{src}::planted_add", "--config", config, "--until", "B", "--out", tmp_path / "out")
    assert (tmp_path / "out" / "planted_add" / "B" / "verdict.json").is_file()
    assert sorted(p.name for p in markers.iterdir()) == []


def test_framework_style_file_captures():
    """Registration decorators, loggers, torch/numpy imports, aliases, a launcher class, a relative import."""
    path = HERE / "framework_style.py"
    assert sorted(k for k in ("scale_bias_kernel", "row_max_kernel") if k in kernel_namespace(path)) == \
        ["row_max_kernel", "scale_bias_kernel"]
    text = disassemble(reference_bytecode(path, Capture(
        "scale_bias_kernel", {"x": ("float16", 2), "y": ("float16", 2)}, {"scale": "float32", "bias": "float32"},
        {"ROWS": 4, "COLS": 128, "CLAMP": True})))
    assert "occupancy = 2" in text and "tile=(4x128)" in text and "fma" in text and "maxf" in text
    assert "ftof" in text  # ACC_DTYPE = torch.float32 became ct.float32
    text = disassemble(reference_bytecode(path, Capture(
        "row_max_kernel", {"x": ("float16", 2), "out": ("float32", 1)}, {}, {"COLS": 128})))
    assert "padding_value = neg_inf" in text


def test_sanitized_module_is_line_aligned_and_generated(planted):
    src, _ = planted
    s = sanitize(src, src.read_text())
    user, ours = src.read_text().splitlines(), s.source.splitlines()
    for name in ("twice", "planted_add"):
        line = next(i for i, t in enumerate(user) if t.startswith(f"def {name}("))
        assert ours[line].startswith(f"def {name}(")
    assert "plant" not in s.source.replace("planted_", "") and "torch" not in s.source and "os." not in s.source
    assert "def planted_add(a, b, c, BLOCK: ct.Constant[int]) -> None:" in s.source
    assert "OUT_DTYPE = _tileport_ct.float32" in s.source


def test_defaults_annotations_and_host_dtypes(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("import cuda.tile as ct\nimport numpy as np\nimport torch as th\nimport math\nN = 4\n"
                   "def host():\n    return 3\n"
                   "@ct.kernel\ndef k(x, A: ct.Constant[int] = host(), B: 'ct.Constant[int]' = N * 2,\n"
                   "      C: np.ndarray = None, *, D: ct.Constant[float] = -np.inf):\n"
                   "    t = ct.full((N,), np.inf, dtype=th.bfloat16)\n"
                   "    ct.store(x, index=(0,), tile=ct.astype(t, np.int32))\n")
    s = sanitize(src, src.read_text())
    line = s.source.splitlines()[8]
    assert line == "def k(x, A: ct.Constant[int], B: ct.Constant[int] = 8,", line
    assert s.source.splitlines()[9] == "      C = None, *, D: ct.Constant[float] = -_tileport_math.inf):"
    assert "ct.full((N,), _tileport_math.inf, dtype=_tileport_ct.bfloat16)" in s.source
    assert "ct.astype(t, _tileport_ct.int32)" in s.source
    assert "= host()" not in s.source and s.kernels == ["k"]


def test_restricted_builtins_refuse_imports_and_files():
    b = restricted_builtins()
    assert "open" not in b and "exec" not in b and "eval" not in b and "getattr" not in b
    with pytest.raises(ImportError):
        b["__import__"]("os")
    assert b["__import__"]("math").pi > 3


def test_source_survives_a_linecache_clear(planted):
    src, _ = planted
    first = reference_bytecode(src, ADD)
    linecache.clearcache()
    assert reference_bytecode(src, Capture(ADD.kernel, ADD.arrays, {}, {"BLOCK": 256})) != first
    assert reference_bytecode(src, ADD) == first


@pytest.mark.parametrize("kernel_file", ["vector_add.py", "softmax.py", "matmul.py", "layer_norm.py"])
def test_corpus_capture_equals_the_imported_module(kernel_file):
    """Our own corpus kernels, rebuilt from the AST, give byte-identical bytecode (locations included)."""
    from tileport.ops.capture_ref import reference_bytecode as imported
    from tileport.ops.specs import all_specs
    spec = next(s for s in all_specs().values() if s.kernel_path.name == kernel_file)
    cap = spec.captures[0]
    assert reference_bytecode(spec.kernel_path, cap) == imported(spec, cap)


def test_bad_files_and_helper_problems_are_diagnostics(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import cuda.tile as ct\ndef k(:\n")
    with pytest.raises(CaptureError, match="broken.py:2"):
        kernel_namespace(broken)
    src = tmp_path / "helpers.py"
    src.write_text("import cuda.tile as ct\nimport os\n\n@ct.kernel\ndef uses_bad(x):\n    bad(x)\n\n"
                   "@ct.kernel\ndef uses_good(x):\n    good(x)\n\n"
                   "def bad(x):\n    ct.store(x, index=(0,), tile=ct.full((4,), os.getpid(), dtype=ct.int32))\n\n"
                   "def good(x):\n    ct.store(x, index=(0,), tile=ct.full((4,), 1, dtype=ct.int32))\n")
    s = sanitize(src, src.read_text())
    assert s.kernels == ["uses_good"] and "`os`" in str(s.problems["uses_bad"]) and "helpers.py:13:" in \
        str(s.problems["uses_bad"])
    assert "def good(x):" in s.source and "def bad(x):" not in s.source
    reference_bytecode(src, Capture("uses_good", {"x": ("int32", 1)}, {}, {}))


def test_threads_rebuilding_one_file_all_see_its_kernels(tmp_path):
    """Threads that rebuild the same file at once (verify's worker pool) wait for one complete rebuild: none
    may take the half-built namespace (a kernel missing, or a module constant not bound yet)."""
    from concurrent.futures import ThreadPoolExecutor
    body = "".join(f"C{i} = {i}\n" for i in range(400))
    for round_ in range(6):
        src = tmp_path / f"k{round_}.py"
        src.write_text(f"import cuda.tile as ct\n{body}\n@ct.kernel\ndef k(x, T: ct.Constant[int]):\n"
                       f"    ct.store(x, index=(0,), tile=ct.full((T,), C399 + {round_}, dtype=ct.float32))\n")
        with ThreadPoolExecutor(max_workers=8) as pool:
            seen = list(pool.map(lambda _: sorted(k for k in ("k", "C399") if k in kernel_namespace(src)), range(8)))
        assert seen == [["C399", "k"]] * 8
