"""The parts of package mode below the command: module names, the resolver, guards read as intended, other
vendors' back ends, Rust module names. All from files the tests write; nothing is imported."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tileport.frontends.imports import branch, module_statements, static_truth, vendor_of
from tileport.packages.index import PackageResolver, build_index
from tileport.packages.library import rust_module_names
from tileport.translate import lower


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@pytest.mark.parametrize("test,expected", [
    ("os.environ.get('FAST', '0') == '1'", False),  # an environment variable is taken as unset
    ("os.getenv('FAST') is None", True),
    ("int(os.environ.get('N', '4')) > 2", True),
    ("TYPE_CHECKING", False),
    ("__name__ == '__main__'", False),
    ("not (1 and 0)", True),
    ("HAS_TRITON", None),  # needs the running program
    ("torch.cuda.is_available()", None),
])
def test_static_truth(test, expected):
    assert static_truth(ast.parse(test, mode="eval").body) == expected


@pytest.mark.parametrize("test,taken", [
    ("_is_hip", False), ("not is_npu()", True), ("is_cuda()", True), ("HAS_TRITON", True),
    ("os.environ.get('FLA_USE_FAST_OPS', '0') == '1'", False),
    # a GPU generation: the branch that holds on Hopper (sm_90), where ports are proven (was: the first
    # branch of any test naming NVIDIA, so a Blackwell-only workaround in inline assembly)
    ("IS_NVIDIA_BLACKWELL", False), ("not is_blackwell()", True), ("IS_NVIDIA_HOPPER", True),
    ("is_hopper() or is_blackwell()", True), ("not IS_HOPPER", False)])
def test_module_level_if_takes_the_cuda_or_guarded_branch(test, taken):
    assert branch(ast.parse(test, mode="eval").body)[0] is taken


def test_guarded_statements_are_the_try_body_and_the_branch_taken():
    tree = ast.parse(textwrap.dedent("""
        try:
            import triton
        except ImportError:
            triton = None
        if _is_hip:
            def exp(x): return 1
        else:
            def exp(x): return 2
        """))
    notes: list = []
    from tileport.frontends.imports import Guards
    guards = Guards(notes)
    got = [ast.unparse(s) for s in module_statements(tree.body, "m.py", guards)]
    assert got == ["import triton", "def exp(x):\n    return 2"]
    assert notes[0].startswith("m.py:2: module-level `try`") and "another vendor's back end" in notes[1]


@pytest.mark.parametrize("name,vendor", [
    ("_ascend", "Ascend NPU"), ("torch_npu", "Ascend NPU"), ("attn_res_hip", "AMD ROCm/HIP"), ("hip_gfx950", "AMD ROCm/HIP"),
    ("triton_ascend", "Ascend NPU"), ("xpu_ops", "Intel XPU"), ("torchMusa", "Moore Threads MUSA"),
    ("shipping", None), ("chip_utils", None), ("amdahl", None), ("cuda_kernels", None)])
def test_vendor_names_are_whole_words(name, vendor):
    assert vendor_of(name) == vendor


def test_module_names_follow_packages_and_namespace_folders(tmp_path):
    root = write(tmp_path / "dist-1.0", {
        "setup.py": "",
        "src/pkg/__init__.py": "",
        "src/pkg/ns/deep.py": "",  # a namespace folder inside the package
        "src/pkg/sub/__init__.py": "",
        "tests-data/x.py": "",  # no identifier: no module
    })
    index = build_index(root)
    assert sorted(index.modules) == ["pkg", "pkg.ns.deep", "pkg.sub", "setup", "tests_data.x"]
    assert index.modules["pkg.ns.deep"].rel == "pkg/ns/deep.py" and index.modules["pkg"].rel == "pkg/__init__.py"
    assert index.modules["tests_data.x"].rel == "tests-data/x.py"  # importable by no name: named all the same
    inner = build_index(root / "src" / "pkg" / "ns")  # a folder inside a package keeps its full names
    assert list(inner.modules) == ["pkg.ns.deep"]


def test_resolver_reads_relative_absolute_and_suffix_imports(tmp_path):
    root = write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "", "pkg/sub/__init__.py": "", "pkg/sub/b.py": ""})
    r = PackageResolver(build_index(root / "pkg" / "sub"))
    importer = str(root / "pkg" / "sub" / "b.py")
    assert r.module_file(importer, "", 1) == str(root / "pkg" / "sub" / "__init__.py")
    assert r.module_file(importer, "b", 1) == importer
    assert r.module_file(importer, "a", 2) is None  # outside the tree given
    assert r.module_file(importer, "pkg.sub.b", 0) == importer
    assert r.module_file(importer, "vendored.pkg.sub.b", 0) == importer  # spelled from a root above the package
    assert r.module_file(importer, "elsewhere.sub.b", 0) is None
    assert r.module_file(importer, "triton.language", 0) is None


def test_import_cycles_and_missing_names_end_in_diagnostics(tmp_path):
    """Modules importing each other (star imports both ways), a name no module defines: located
    diagnostics, no hang."""
    root = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import *\nimport triton\n",
        "pkg/b.py": "from .a import *\nfrom .a import loop as loop\n",
        "pkg/k.py": """
            import triton
            import triton.language as tl
            from .b import loop, nothing


            @triton.jit
            def k(x_ptr):
                tl.store(x_ptr + tl.arange(0, 16), loop(tl.zeros((16,), tl.float32)) + nothing)
            """,
    })
    r = PackageResolver(build_index(root / "pkg"))
    _, [result] = lower(str(root / "pkg" / "k.py"), resolver=r)
    d = result.diagnostic
    assert d.construct == "import" and "loop" in d.message and d.loc.file.endswith("k.py"), d


def test_rust_module_names_are_deterministic_and_distinct():
    names = rust_module_names(["lib.a_b.c", "lib.a.b_c", "lib.ops", "lib.ops.support"])
    assert names == {"lib.a.b_c": "a_b_c", "lib.a_b.c": "a_b_c_1", "lib.ops": "ops", "lib.ops.support": "ops_support"}
    assert rust_module_names(["x.lib", "y.k"]) == {"x.lib": "x_lib", "y.k": "y_k"}  # two top packages kept


def test_only_the_command_line_imports_package_mode():
    import test_import_graph as g  # tests/test_import_graph.py: the project's layering rules
    assert g.layering_violations({"tileport.pipeline.batch": {"tileport.packages.library"}})
    assert not g.layering_violations({"tileport.cli": {"tileport.packages"},
                                      "tileport.packages.port": {"tileport.pipeline.batch"}})
