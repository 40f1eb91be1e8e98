"""The bytecode reader against tileirdisasm, across bytecode versions and both frontends."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tir_export
import tir_kernels
import tir_oracle
from tileport.tileir import BytecodeError, canonicalize, diff, read_module, to_text
from tileport.tileir.model import walk
from tileport.tileir.reader.schemas import encodings_source, load_schemas, mnemonic
from tileport.tileir.types import PartitionViewType, TensorViewType, TileType

DATA = Path(__file__).parent / "data"
# (bytecode version, gpu_code): before 13.3 the export needs a target architecture.
VERSIONS = [("13.4", None), ("13.3", None), ("13.2", "sm_90"), ("13.1", "sm_100")]
needs_disasm = pytest.mark.skipif(tir_oracle.disasm_path() is None, reason="tileirdisasm not installed")


def test_schemas_cover_every_encoder():
    tree = ast.parse(encodings_source().read_text())
    encoders = [n.name for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name.startswith("encode_") and n.name.endswith("Op")]
    schemas = load_schemas()
    assert len(schemas.by_opcode) == len(encoders) > 100
    assert {s.name for s in schemas.by_opcode.values()} >= {
        "load_view_tko", "store_ptr_tko", "for", "reduce", "mmaf", "get_tile_block_id", "atomic_rmw_tko"}


@pytest.mark.parametrize("camel, name", [
    ("AddF", "addf"), ("LoadViewTko", "load_view_tko"), ("FToF", "ftof"), ("IToF", "itof"),
    ("FPowF", "fpowf"), ("XOrI", "xori"), ("ShLI", "shli"), ("MmaFScaled", "mmaf_scaled"),
    ("IntToPtr", "int_to_ptr"), ("GetTileBlockId", "get_tile_block_id"), ("Exp2", "exp2"),
    ("AtomicRMWTko", "atomic_rmw_tko"), ("CosH", "cosh"), ("MulhiI", "mulhii")])
def test_mnemonic(camel, name):
    assert mnemonic(camel) == name


@needs_disasm
@pytest.mark.parametrize("version, gpu", VERSIONS)
@pytest.mark.parametrize("case", sorted(tir_kernels.CASES))
def test_reader_matches_tileirdisasm(case, version, gpu, tmp_path):
    data = tir_export.case(case, version, gpu)
    path = tmp_path / f"{case}.tileirbc"
    path.write_bytes(data)
    module = read_module(path)
    assert module.version == version
    expected = tir_oracle.parse(tir_oracle.disassemble(path))
    assert tir_oracle.reader_sequence(module) == expected


@pytest.mark.parametrize("case", sorted(tir_kernels.CASES))
def test_versions_read_to_the_same_program(case):
    """Defaults older versions leave out (exp/tanh rounding, inbounds) are filled in, so 13.3 and
    13.4 exports read to the same canonical text. (Before 13.3 cuTile also moves partition views
    into loops, so older versions are compared with the diff, in test_diff_identity.py.)"""
    def text(version):
        return to_text(canonicalize(read_module(tir_export.case(case, version)))).split("\n", 1)[1]
    assert text("13.3") == text("13.4")


def test_hidden_defaults_are_read():
    softmax = read_module(tir_export.case("softmax"))
    ops = {op.name: op for op in walk(softmax.entries[0])}
    assert ops["exp"].attributes["rounding_mode"] == "full"        # tileirdisasm hides it
    assert ops["divf"].attributes["rounding_mode"] == "approx"
    assert ops["divf"].attributes["flush_to_zero"] is True
    old = read_module(tir_export.case("softmax", "13.2", "sm_90"))
    old_ops = {op.name: op for op in walk(old.entries[0])}
    assert old_ops["exp"].attributes["rounding_mode"] == "full"    # not in 13.2 bytecode: implied
    assert old_ops["load_view_tko"].attributes["inbounds"] == (False, False)


def test_structured_types_and_hints():
    module = read_module(tir_export.case("softmax"))
    f = module.entries[0]
    pv = next(op for op in walk(f) if op.name == "make_partition_view").results[0].type
    assert isinstance(pv, PartitionViewType)
    assert pv.tile == (1, 1024) and pv.padding == "neg_inf" and pv.dim_map == (0, 1)
    assert isinstance(pv.tensor_view, TensorViewType)
    assert pv.tensor_view.shape == (None, None) and pv.tensor_view.strides == (None, 1)
    load = next(op for op in walk(f) if op.name == "load_view_tko")
    assert load.results[0].type == TileType((1, 1024), load.results[0].type.elem)
    assert [r for r in load.operand_roles] == ["view", "index", "index", "token"]
    matmul = read_module(tir_export.case("matmul")).entries[0]
    assert dict(matmul.hints.by_arch[0][1].items)["occupancy"].value == 2
    loop = next(op for op in walk(matmul) if op.name == "for")
    assert [a.type for a in loop.regions[0].blocks[0].args][1] == loop.results[0].type


def test_debug_locations_point_at_the_kernel_source():
    f = read_module(tir_export.case("softmax")).entries[0]
    exp = next(op for op in walk(f) if op.name == "exp")
    assert exp.loc is not None and exp.loc.startswith("tir_kernels.py:")


@needs_disasm
@pytest.mark.parametrize("name", ["add", "add_no_spec", "softmax", "gemm"])
def test_cutile_rs_compiler_output(name):
    """Bytecode the cutile-rs compiler wrote (data/cutile_rs/README.md) matches tileirdisasm."""
    path = DATA / "cutile_rs" / f"{name}.tileirbc"
    module = read_module(path)
    assert tir_oracle.reader_sequence(module) == tir_oracle.parse(tir_oracle.disassemble(path))


@needs_disasm
def test_cutile_rs_bytecode_all_versions():
    """One cutile-ir module written at 13.2 to 13.5 reads to one program."""
    files = sorted((DATA / "cutile_rs").glob("builder_add_*.tileirbc"))
    assert [f.name.rsplit("_", 1)[1] for f in files] == ["13.2.tileirbc", "13.3.tileirbc",
                                                        "13.4.tileirbc", "13.5.tileirbc"]
    texts = []
    for f in files:
        module = read_module(f)
        if module.version != "13.5":  # tileirdisasm 13.4 stops at 13.4
            assert tir_oracle.reader_sequence(module) == tir_oracle.parse(tir_oracle.disassemble(f))
        texts.append(to_text(canonicalize(module, target="sm_100")).split("\n", 1)[1])
    assert len(set(texts)) == 1


def test_rejects_what_is_not_bytecode(tmp_path):
    good = tir_export.case("vec_add")
    with pytest.raises(BytecodeError, match="magic"):
        read_module(b"not bytecode at all")
    with pytest.raises(BytecodeError, match="version 13.9"):
        read_module(good[:8] + bytes([13, 9]) + good[10:])
    with pytest.raises(BytecodeError):
        read_module(good[: len(good) // 2])
    text = tmp_path / "k.tileir"
    text.write_text("entry @k() {\n  return\n}\n")
    with pytest.raises(BytecodeError, match="text is not supported"):
        read_module(text)


def test_every_op_of_the_test_kernels_reads():
    names = set()
    for case in tir_kernels.CASES:
        for f in read_module(tir_export.case(case)).functions:
            names |= {op.name for op in walk(f)}
    assert {"for", "loop", "if", "reduce", "scan", "atomic_rmw_tko", "load_ptr_tko", "store_ptr_tko",
            "mmaf", "permute", "fpowf", "exp2", "tanh", "rsqrt", "divi", "mini", "select"} <= names


def test_corrupted_bytecode_raises_bytecode_error_only():
    """Random byte changes either raise BytecodeError or read to a program the diff handles."""
    import random
    rng = random.Random(0)
    for case in ("misc", "matmul", "gather_scatter"):
        data = tir_export.case(case)
        ref = read_module(data)
        for i in range(600):
            b = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(12, len(b))] = rng.randrange(256)
            try:
                module = read_module(bytes(b))
            except BytecodeError:
                continue
            if i % 4 == 0:
                diff(ref, module)


@needs_disasm
def test_module_with_several_entries(tmp_path):
    """One export with two signatures: two entries, each with its own debug locations."""
    import io
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel
    sigs = [KernelSignature([tir_export._param(p) for p in params], CallingConvention.cutile_python_v2())
            for params in ([("float32", 1)] * 3 + [1024], [("float16", 1)] * 3 + [512])]
    buf = io.BytesIO()
    export_kernel(tir_kernels.vec_add, sigs, buf, output_format="tileir_bytecode", bytecode_version="13.4")
    path = tmp_path / "two.tileirbc"
    path.write_bytes(buf.getvalue())
    module = read_module(path)
    assert len(module.entries) == 2
    assert tir_oracle.reader_sequence(module) == tir_oracle.parse(tir_oracle.disassemble(path))
    assert all(op.loc for f in module.entries for op in walk(f) if op.name == "load_view_tko")
    assert diff(module, module).verdict == "PASS"
