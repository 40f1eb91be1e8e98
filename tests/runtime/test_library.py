"""The Python side of the runtime without a built library: load() caching, launcher code for derived
constants."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tileport.runtime import library


def test_a_second_load_does_not_run_cargo(tmp_path, monkeypatch):
    """load() is on the hot path of every cutile-rs op call: after the first call it must not build."""
    (tmp_path / "kernels.json").write_text(json.dumps({"crate": "fake", "abi_version": 1, "entries": []}))
    builds = []

    def fake_build(crate_dir, profile="release", progress=None):
        builds.append((Path(crate_dir), profile))
        return tmp_path / f"libfake_{profile}.so", "log", ""

    class FakeLibrary:
        def __init__(self, so, manifest):
            self.path, self.manifest_path = so, manifest

    monkeypatch.delenv("TILEPORT_LIB", raising=False)
    monkeypatch.setattr(library, "cargo_build", fake_build)
    monkeypatch.setattr(library, "KernelLibrary", FakeLibrary)
    monkeypatch.setattr(library, "_LOADED", {})
    first = library.load(tmp_path, profile="dev")
    assert builds == [(tmp_path, "dev")]
    assert first.path == tmp_path / "libfake_dev.so" and first.manifest_path == tmp_path / "kernels.json"
    assert library.load(tmp_path, profile="dev") is first
    assert builds == [(tmp_path, "dev")]  # no second cargo run
    other = library.load(tmp_path, profile="release")  # another profile is another build
    assert other is not first and builds == [(tmp_path, "dev"), (tmp_path, "release")]
    given = library.load(tmp_path, so_path=tmp_path / "prebuilt.so")  # a given library file: never built
    assert given.path == tmp_path / "prebuilt.so" and len(builds) == 2
    assert library.load(tmp_path, so_path=tmp_path / "prebuilt.so") is given


def test_derived_constant_with_a_parenthesized_operand(tmp_path):
    """`(BLOCK + BLOCK) // 2` is computed on the host as `(block + block).div_euclid(2i32)`: the whole
    expression keeps the parentheses of its operand."""
    from tileport.frontends.cutile import KernelConfig
    from tileport.translate import translate
    src = tmp_path / "half.py"
    src.write_text(textwrap.dedent('''
        import cuda.tile as ct

        ConstInt = ct.Constant[int]


        @ct.kernel
        def half(x, y, BLOCK: ConstInt, N: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=((BLOCK + BLOCK) // 2,))
            ct.store(y, index=(ct.bid(0),), tile=t)
            u = ct.load(x, index=(ct.bid(0),), shape=(BLOCK * 2 + N,))
            ct.store(y, index=(ct.bid(0),), tile=u)
    '''))
    configs = {str(src): {"half": KernelConfig(({"x": "f32", "y": "f32"},))}}
    report = translate([str(src)], None, configs, faithful=True)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    lines = [line.strip() for line in report.files["src/half.rs"].splitlines()]
    assert "let block_plus_block_div_2 = (block + block).div_euclid(2i32);" in lines
    assert "let block_x_2_plus_n = (block * 2i32) + n;" in lines
    idiomatic = [line.strip() for line in translate([str(src)], None, configs).files["src/half.rs"].splitlines()]
    assert 'let block_plus_block_div_2 = l.tile("BLOCK_PLUS_BLOCK_DIV_2", (block + block).div_euclid(2i32))?;' \
        in idiomatic
    manifest = json.loads(report.files["kernels.json"])["entries"][0]["variants"][0]
    assert manifest["derived"] == {"BLOCK_PLUS_BLOCK_DIV_2": "((BLOCK + BLOCK) // 2)",
                                   "BLOCK_X_2_PLUS_N": "((BLOCK * 2) + N)",
                                   "X_LEN0": "-1", "Y_LEN0": "-1"}  # the arrays' lengths: dynamic when captured
