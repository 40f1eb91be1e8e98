"""The SASS comparison can fail: planted differences are found, a missing, failing or silent nvdisasm is a
failure (never two empty listings compared equal), and `doctor` sees a disassembler that does not work."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tileport import sass, toolchain
from tileport.capture import CubinResult
from tileport.capture.verify import CaptureResult, compare_machine_code, port_cubin_failures

TOOLS = pytest.mark.skipif(toolchain.nvdisasm() is None or toolchain._bin("ptxas") is None
                           or toolchain.cuobjdump() is None, reason="needs ptxas, nvdisasm and cuobjdump")

LISTING = """
        .type           kern_Kt2_A1f32,@function
kern_Kt2_A1f32:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/               @P0 BRA `(.L_x_1) ;
        /*0020*/                   IADD3 R7, R2, UR4, RZ ;
.L_x_1:
        /*0030*/                   MOV R3, 32@lo(kern_Kt2_A1f32) ;
        /*0040*/                   EXIT ;
"""


def fake_tool(tmp_path: Path, name: str, script: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_normalization_renames_registers_labels_and_symbols():
    functions, ins = sass.parse(LISTING)
    assert functions == ("kern_Kt2_A1f32",)
    assert [i.normalized for i in ins] == ["LDC R, c[0x0][0x28]", "@P BRA <+2>", "IADD3 R, R, UR, RZ",
                                           "MOV R, 32@lo(<sym>)", "EXIT"]
    other = LISTING.replace("R7, R2", "R9, R4").replace("kern_Kt2_A1f32", "kern_entry").replace(".L_x_1", ".L_x_7")
    assert sass.compare(sass.Sass(functions, ins, 8), sass.Sass(*sass.parse(other), 8))["same"]


def test_a_different_instruction_is_reported_with_its_index():
    ref = sass.Sass(*sass.parse(LISTING), 8)
    port = sass.Sass(*sass.parse(LISTING.replace("IADD3 R7, R2, UR4, RZ", "IADD3 R7, R2, 0x1, RZ")), 10)
    result = sass.compare(ref, port)
    assert not result["same"] and result["registers"] == [8, 10] and result["instructions"] == [5, 5]
    assert result["first_difference"] == {"index": 2, "reference": "IADD3 R7, R2, UR4, RZ",
                                          "port": "IADD3 R7, R2, 0x1, RZ"}
    assert not result["same_except_parameter_offsets"]
    moved = sass.Sass(*sass.parse(LISTING.replace("c[0x0][0x28]", "c[0x0][0x48]")), 8)
    assert sass.compare(ref, moved)["same_except_parameter_offsets"] and not sass.compare(ref, moved)["same"]
    shorter = sass.Sass(ref.functions, ref.instructions[:4], 8)
    assert sass.compare(ref, shorter)["first_difference"] == {"index": 4, "reference": "EXIT", "port": "<end>"}


def test_branch_targets_are_compared():
    moved = LISTING.replace(".L_x_1:\n", "").replace("/*0040*/                   EXIT ;",
                                                      "/*0040*/                   EXIT ;\n.L_x_1:")
    assert not sass.compare(sass.Sass(*sass.parse(LISTING), 8), sass.Sass(*sass.parse(moved), 8))["same"]


@TOOLS
def test_real_cubins_same_and_planted_difference(tmp_path):
    ptxas, dis, objdump = toolchain._bin("ptxas"), toolchain.nvdisasm(), toolchain.cuobjdump()
    a = sass.disassemble(sass.probe_cubin(ptxas, tmp_path / "a.cubin", value=42), dis, objdump)
    b = sass.disassemble(sass.probe_cubin(ptxas, tmp_path / "b.cubin", value=42), dis, objdump)
    c = sass.disassemble(sass.probe_cubin(ptxas, tmp_path / "c.cubin", value=43), dis, objdump)
    assert len(a.instructions) > 4 and a.registers > 0
    assert sass.compare(a, b)["same"]
    diff = sass.compare(a, c)
    assert not diff["same"] and diff["first_difference"]["reference"] != diff["first_difference"]["port"]


@TOOLS
def test_missing_failing_or_silent_disassembler_is_an_error(tmp_path):
    ptxas, objdump = toolchain._bin("ptxas"), toolchain.cuobjdump()
    cubin = sass.probe_cubin(ptxas, tmp_path / "p.cubin")
    with pytest.raises(sass.SassError, match="nvdisasm not found"):
        sass.disassemble(cubin, None, objdump)
    with pytest.raises(sass.SassError, match="exited with 1"):
        sass.disassemble(cubin, fake_tool(tmp_path, "failing", "echo broken >&2; exit 1"), objdump)
    with pytest.raises(sass.SassError, match="no instruction"):
        sass.disassemble(cubin, fake_tool(tmp_path, "silent", "exit 0"), objdump)


@TOOLS
def test_doctor_checks_that_disassembly_works(tmp_path, monkeypatch):
    assert toolchain._check_nvdisasm().ok
    silent = fake_tool(tmp_path, "nvdisasm", "echo 'Cuda compilation tools, release 13.4, V13.4.92'")
    monkeypatch.setattr(toolchain, "nvdisasm", lambda: silent)
    check = toolchain._check_nvdisasm()
    assert not check.ok and "disassembly fails" in check.fix


def test_verify_fails_a_capture_whose_machine_code_is_missing():
    listing = sass.Sass(*sass.parse(LISTING), 8)
    ref = [CubinResult("sm_90", True, sass=listing), CubinResult("sm_100", True, sass=listing)]
    gen = [CubinResult("sm_90", True, sass=None, sass_error="nvdisasm listed no instruction for k.cubin"),
           CubinResult("sm_100", True, sass=listing)]
    res = CaptureResult("k", "k[f32]")
    errors = compare_machine_code(ref, gen, res)
    assert res.sass_same == {"sm_90": False, "sm_100": True}
    assert len(errors) == 1 and "sm_90" in errors[0] and "no instruction" in errors[0]


def test_summary_totals_count_only_real_comparisons(tmp_path):
    import json

    from tileport.capture.verify import write_summary
    same = {"same": True, "same_except_parameter_offsets": True, "registers": [8, 8], "instructions": [5, 5],
            "first_difference": None}
    other = {"same": False, "same_except_parameter_offsets": False, "registers": [8, 9], "instructions": [5, 5],
             "first_difference": {"index": 2}}
    a, b = CaptureResult("k", "k[a]"), CaptureResult("k", "k[b]")
    a.sass = {"sm_90": same, "sm_80": {"error": "nvdisasm listed no instruction"}}
    b.sass = {"sm_90": other}
    summary = json.loads(write_summary([a, b], tmp_path, command="tileport verify").read_text())
    assert summary["sass"]["sm_90"] == {"compared": 2, "same": 1, "same_except_parameter_offsets": 1,
                                        "same_registers_and_count": 1, "not_compared": 0}
    assert summary["sass"]["sm_80"] == {"compared": 0, "same": 0, "same_except_parameter_offsets": 0,
                                        "same_registers_and_count": 0, "not_compared": 1}
    assert summary["command"] == "tileport verify" and summary["tools"]["nvdisasm"]


def test_a_port_fails_only_where_its_reference_compiles():
    ref = {"sm_80": False, "sm_90": True, "sm_100": True}  # fp8 MMAs: no sm_80 code on either side
    assert port_cubin_failures(ref, {"sm_80": False, "sm_90": True, "sm_100": True}) == []
    assert port_cubin_failures(ref, {"sm_80": False, "sm_90": False, "sm_100": True}) == ["gen sm_90"]
    assert port_cubin_failures({}, {"sm_90": False}) == ["gen sm_90"]  # no reference result: the port's failure
