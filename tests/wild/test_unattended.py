"""Translate needs no values, and the language of real-world kernel files.

Small kernels written for these tests (never third-party code): module-level aliases, cuda.tile
submodule imports, numpy/torch dtype names, `ct.ByTarget` options, a `ct.Constant` as a tile operand,
element dtypes kept to those the kernel type-checks with, index arrays, constants without values as
typed runtime parameters, and `translate --config` in JSON, TOML and YAML.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.cli import app
from tileport.config import ConfigError, kernel_configs, load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "translator"))
from tp_helpers import entry_text, has_line, launcher_text, module_text, run, write_kernels  # noqa: E402

DATA = Path(__file__).parent / "data" / "unattended.py"
FOREIGN = Path(__file__).parent / "data" / "foreign.py"


# The atomic kernels of DATA work on integer arrays, pack_bytes_kernel stores bytes; an unconfigured array is
# float32, which ct.atomic_max, the bitwise atomics and a store of u8 refuse (as cuTile Python does), so their
# dtypes are given.
_I32 = "int32"
ATOMIC_DTYPES = {
    "atomic_rmw_kernel": [{**{a: _I32 for a in ("x", "acc", "hi", "lo", "bits", "y")}, "fsum": "float32",
                           "TILE": 128}],
    "atomic_cas_kernel": [{"flags": _I32, "y": _I32, "TILE": 128}],
    "atomic_loop_kernel": [{"x": _I32, "counter": _I32, "y": _I32, "TILE": 128}],
    "pack_bytes_kernel": [{"x": "float16", "y": "uint8"}],
    "unpack_bytes_kernel": [{"x": "uint8", "y": "float16"}],
    # min/max of a constant in a tile shape needs the constant's value (a literal-specialized entry)
    "const_shape_kernel": [{"x": "float32", "y": "float32", "TILE": 128}],
}


def translated(path: Path, configs=None):
    report = run(path, {**ATOMIC_DTYPES, **(configs or {})} if path == DATA else configs)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    return report, module_text(report, path)


def test_data_kernels_translate_without_configuration():
    report, text = translated(DATA)
    assert sorted(r.kernel for r in report.results) == sorted(["by_target_kernel", "const_operand_kernel",
                                                         "dtype_choice_kernel", "gather_rows_kernel",
                                                         "scalar_tile_kernel", "cat_kernel", "bitcast_kernel", "int_power_kernel",
                                                         "if_expression_kernel", "cumsum_kernel",
                                                         "if_in_loop_kernel", "empty_if_kernel", "bitwise_kernel",
                                                         "extract_kernel", "reassigned_fma_kernel",
                                                         "lhs_product_kernel", "const_modulo_kernel",
                                                         "while_break_kernel",
                                                         "while_stride_kernel", "atomic_rmw_kernel",
                                                         "atomic_cas_kernel", "atomic_loop_kernel",
                                                         "pack_bytes_kernel", "branch_store_load_kernel",
                                                         "unpack_bytes_kernel", "fma_per_dtype_kernel",
                                                         "const_shape_kernel", "carry_four_kernel", "helper_carry_kernel",
                                                         "foreign_names_kernel", "slice_kernel",
                                                         "slice_inplace_kernel"])


def test_by_target_options_become_per_target_hints():
    _, text = translated(DATA)
    assert ("#[cutile::entry(optimization_hints = (sm_100 = (num_cta_in_cga = 2, occupancy = 4,), "
            "sm_120 = (num_cta_in_cga = 1, occupancy = 2,), default = (num_cta_in_cga = 1, occupancy = 2,),))]"
            in text)


def test_module_aliases_and_submodule_imports(tmp_path):
    path = write_kernels(tmp_path, """
        from cuda.tile._numeric_semantics import RoundingMode as RMd
        PAD_ZERO = ct.PaddingMode.ZERO
        ALIAS_OF_ALIAS = PAD_ZERO
        my_exp = ct.exp

        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,), padding_mode=ALIAS_OF_ALIAS)
            t = ct.truediv(my_exp(ct.astype(t, ct.float32)), 3.0, rounding_mode=RMd.APPROX, flush_to_zero=True)
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, y.dtype))
    """)
    _, text = translated(path)
    assert "padding::Zero" in text and "exp(" in text
    assert "rounding::Approx" in text or "divf" in text


def test_alias_defined_by_itself_is_a_located_diagnostic(tmp_path):
    path = write_kernels(tmp_path, """
        A = B
        B = A

        @ct.kernel
        def k(x, TILE: ConstInt):
            ct.store(x, index=(0,), tile=ct.full((TILE,), A, dtype=ct.float32))
    """)
    (r,) = run(path).results
    assert r.diagnostic.construct == "name" and r.diagnostic.loc.line == 7


def test_numpy_and_torch_dtypes_and_infinities():
    _, text = translated(FOREIGN)
    body = entry_text(text, "foreign_names_kernel")
    assert "f32::NEG_INFINITY" in body
    assert "Tile<f32, { [TILE] }>" in body


def test_unknown_numpy_attribute_is_a_located_diagnostic(tmp_path):
    path = write_kernels(tmp_path, """
        import numpy as np

        @ct.kernel
        def k(x, TILE: ConstInt):
            ct.store(x, index=(0,), tile=ct.full((TILE,), np.euler_gamma, dtype=ct.float32))
    """)
    (r,) = run(path).results
    d = r.diagnostic
    assert d.construct == "np" and (d.loc.line, d.loc.col) == (10, 51), str(d)


def test_by_target_with_unknown_target_is_refused(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel(occupancy=ct.ByTarget(hopper=2, default=1))
        def k(x, TILE: ConstInt):
            ct.store(x, index=(0,), tile=ct.full((TILE,), 0.0, dtype=ct.float32))
    """)
    (r,) = run(path).results
    assert r.diagnostic.construct == "ct.ByTarget" and r.diagnostic.loc.line == 6


def test_constant_as_tile_operand():
    _, text = translated(DATA)
    body = entry_text(text, "const_operand_kernel")
    assert has_line(body, "let {_}: i32 = N;")
    assert has_line(body, "let {_}: Tile<i32, { [TILE] }> = {_}.broadcast(shape![TILE]);")


def test_unconfigured_dtypes_are_those_the_kernel_type_checks_with(tmp_path):
    # `out` receives an f32 tile: with f16 or bf16 arrays cuTile refuses the store, so only f32 remains
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, out, TILE: ConstInt):
            acc = ct.full((TILE,), 0.0, dtype=ct.float32)
            acc = acc + ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(out, index=(ct.bid(0),), tile=acc)
    """)
    _, text = translated(path)
    assert "x: &Tensor<f32, { [X_LEN0] }>" in entry_text(text, "k")
    assert "ElementType" not in entry_text(text, "k")


def test_unconfigured_dtypes_stay_generic_when_all_type_check(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, out, TILE: ConstInt):
            ct.store(out, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))
    """)
    _, text = translated(path)
    assert "dtype::F32, dtype::F16, dtype::BF16" in text


def test_unconfigured_dtype_error_of_every_candidate_is_reported(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, out, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(out, index=(ct.bid(0),), tile=ct.astype(t, ct.float16) + ct.astype(t, ct.bfloat16))
    """)
    (r,) = run(path).results
    assert r.diagnostic.construct == "dtype" and r.diagnostic.loc.line == 9


def test_index_arrays_are_integers(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(ids, table, out, TILE: ConstInt, D: ConstInt):
            rows = ct.load(ids, index=(ct.bid(0),), shape=(TILE,))
            rows2 = rows[:, None]
            cols = ct.arange(D, dtype=ct.int32)[None, :]
            ct.store(out, index=(ct.bid(0), 0), tile=ct.gather(table, (rows2, cols)))
    """)
    _, text = translated(path)
    body = entry_text(text, "k")
    assert "ids: &Tensor<i64, { [IDS_LEN0] }>" in body
    # an i64 index is reinterpreted as u64 for the address arithmetic (no trunci: same width)
    assert has_line(body, "let {_}: Tile<u64, { [TILE, 1] }> = bitcast(rows2);") and "trunci" not in body


def test_float_constant_without_values_is_a_typed_parameter(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, TILE: ConstInt, eps: ct.Constant[float]):
            ct.store(x, index=(ct.bid(0),), tile=ct.full((TILE,), eps, dtype=ct.float32))
    """)
    report, text = translated(path)
    assert report.results[0].entries == ["k"]
    assert "eps: f32" in entry_text(text, "k")
    # with values, the constant is still specialized (literal entries), as before
    report, text = translated(path, {"k": [{"x": "f32", "TILE": 128, "eps": 1e-6}]})
    assert report.results[0].entries == ["k_eps1em06"]


def test_int_constant_compared_without_values_is_a_typed_parameter(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, MODE: ConstInt, TILE: ConstInt):
            row = 0 if MODE == 1 else ct.bid(0)
            ct.store(x, index=(row,), tile=ct.full((TILE,), 1.0, dtype=ct.float32))
    """)
    _, text = translated(path)
    body = entry_text(text, "k")
    assert "MODE: i32" in body and "const TILE: i32" in body


# ---- translate --config (JSON, TOML, YAML)

CONFIG = {"kernels": {"k": {"configs": [{"x": "float16", "TILE": 128, "eps": 0.5}], "ranks": {"x": 1}}}}


def _kernel_file(tmp_path):
    return write_kernels(tmp_path, """
        @ct.kernel
        def k(x, TILE: ConstInt, eps: ct.Constant[float]):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(x, index=(ct.bid(0),), tile=t + eps)
    """)


@pytest.mark.parametrize("suffix,text", [
    (".json", json.dumps(CONFIG)),
    (".toml", '[[kernels.k.configs]]\nx = "float16"\nTILE = 128\neps = 0.5\n[kernels.k.ranks]\nx = 1\n'),
    (".yaml", "kernels:\n  k:\n    configs:\n      - {x: float16, TILE: 128, eps: 0.5}\n    ranks: {x: 1}\n"),
])
def test_config_formats_load_the_same(tmp_path, suffix, text):
    if suffix == ".yaml":
        pytest.importorskip("yaml", reason="PyYAML is not installed")
    path = tmp_path / f"cfg{suffix}"
    path.write_text(text)
    assert load_config(path) == CONFIG["kernels"]
    cfg = kernel_configs(load_config(path))["k"]
    assert cfg.configs == ({"x": "f16", "TILE": 128, "eps": 0.5},) and dict(cfg.ranks) == {"x": 1}


def test_translate_cli_accepts_config(tmp_path):
    kern = _kernel_file(tmp_path)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[[kernels.k.configs]]\nx = "float16"\nTILE = 128\neps = 0.5\n')
    out = tmp_path / "crate"
    res = CliRunner().invoke(app, ["translate", str(kern), "-o", str(out), "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    rust = (out / "src" / "kern.rs").read_text()
    assert "pub fn k_eps0p5" in rust and "dtype::F16" in rust and "dtype::F32" not in rust


@pytest.mark.parametrize("text,needle", [
    ("{not json", "cfg.json"),
    ('{"k": {"configs": 3}}', "needs a list of configurations"),
    ('{"k": [{"x": [1, 2]}]}', "maps parameter names"),
    ('{"k": {"configs": [], "ranks": {"x": 0}}}', "positive integers"),
])
def test_bad_config_is_refused_with_a_message(tmp_path, text, needle):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_config(cfg)
    res = CliRunner().invoke(app, ["translate", str(_kernel_file(tmp_path)), "-o", str(tmp_path / "o"),
                                   "--config", str(cfg)])
    assert res.exit_code == 2 and "--config" in res.output
    assert not (tmp_path / "o").exists()


def test_dtype_chosen_by_a_conditional_expression_is_a_derived_generic():
    _, text = translated(DATA)
    body = entry_text(text, "dtype_choice_kernel")
    assert "E2: ElementType" in body and has_line(body, "let {_}: Tile<E2, { [TM, TK] }> = convert_tile({_});")
    assert has_line(text, '(dtype::F32,) => launch!(f32, cutile::core::tf32, ["f32", "tf32"]),')
    assert has_line(text, '(dtype::F16,) => launch!(f16, f16, ["f16", "f16"]),')
    assert "e2_code" not in text  # no array carries E2: the match arm sets it


def test_branch_on_a_generic_dtype_is_a_located_diagnostic(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if x.dtype == ct.float32:
                t = t + 1.0
            ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    (r,) = run(path, {"k": [{"x": "f32", "y": "f32"}, {"x": "f16", "y": "f16"}]}).results
    assert r.diagnostic.construct == "dtype" and (r.diagnostic.loc.line, r.diagnostic.loc.col) == (9, 8)


def test_unannotated_scalars_get_their_type_from_use_or_a_note(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, scale, n, flag, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,)) * (scale * 2.0)
            for i in range(n):
                t = t + 1.0
            ct.store(x, index=(flag,), tile=t)
    """)
    report, text = translated(path)
    body = entry_text(text, "k")
    assert "scale: f32" in body and "n: i32" in body and "flag: i32" in body
    assert report.results[0].notes == ["scalar parameter `flag` has no annotation and its uses do not decide "
                                       "its type: assumed i32"]


def test_scalar_type_from_the_files_own_launch_sites(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, eps, n, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(x, index=(ct.bid(0),), tile=t + eps + n)

        def host(x, stream, eps: float, n=3):
            ct.launch(stream, (1,), k, (x, eps, n, 128))
    """)
    report, text = translated(path)
    body = entry_text(text, "k")
    assert "eps: f32" in body and "n: i32" in body and report.results[0].notes == []


def test_scalar_tiles_load_store_item_and_branch():
    _, text = translated(DATA)
    body = entry_text(text, "scalar_tile_kernel")
    # 0-d load from a rank-1 array: a (1,) tile reshaped to (); `.item()` reshapes a (1,) tile to ()
    assert has_line(body, "let n: Tile<E, { [] }> = {_}.reshape(shape![]);")
    assert has_line(body, "let m: Tile<E, { [] }> = {_}.reshape(shape![]);")
    # `if` on a 0-d tile: its scalar value
    assert has_line(body, "let cond: bool = tile_to_scalar({_});")
    # 0-d store into a rank-1 array: reshaped to (1,)
    assert has_line(body, "let {_}: Tile<E, { [1] }> = {_}.reshape(shape![1]);")


def test_kernels_built_by_a_factory(tmp_path):
    path = write_kernels(tmp_path, """
        def make_scale_kernel(factor):
            TILE = 2 * 64

            @ct.kernel
            def scale_kernel(x, y):
                t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
                ct.store(y, index=(ct.bid(0),), tile=t * 2.0)

            @ct.kernel
            def uses_factor_kernel(x):
                ct.store(x, index=(ct.bid(0),), tile=ct.full((TILE,), factor, dtype=ct.float32))
            return scale_kernel, uses_factor_kernel
    """)
    results = {r.kernel: r for r in run(path).results}
    assert results["scale_kernel"].ok, str(results["scale_kernel"].diagnostic)
    d = results["uses_factor_kernel"].diagnostic
    assert d.construct == "closure" and (d.loc.line, d.loc.col) == (16, 63) and "make_scale_kernel" in d.message
    text = module_text(run(path), path)
    assert "let x_view: Partition<E, { [128] }> = unsafe {" in entry_text(text, "scale_kernel")


def test_helpers_imported_from_a_sibling_module(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tiles.py").write_text(
        "import cuda.tile as cut\n\nGROUP = 4\nZERO = cut.PaddingMode.ZERO\n\n\n"
        "def scaled_load(a, i, n):\n    return cut.load(a, index=(i,), shape=(n,), padding_mode=ZERO) * GROUP\n")
    path = write_kernels(pkg, """
        from .tiles import scaled_load, GROUP as G

        @ct.kernel
        def k(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=scaled_load(x, ct.bid(0), TILE) + G)
    """)
    _, text = translated(path)
    body = entry_text(text, "k")
    assert "padding::Zero" in body and "x: &Tensor<E, { [X_LEN0] }>" in body


def test_imported_name_that_is_not_a_helper_is_located(tmp_path):
    (tmp_path / "host.py").write_text("import torch\n\ndevice = torch.device('cuda')\n")
    path = write_kernels(tmp_path, """
        from .host import device
        from .missing import helper

        @ct.kernel
        def k(x, TILE: ConstInt):
            ct.store(x, index=(0,), tile=ct.full((TILE,), device, dtype=ct.float32))

        @ct.kernel
        def k2(x, TILE: ConstInt):
            ct.store(x, index=(0,), tile=helper(TILE))
    """)
    results = {r.kernel: r.diagnostic for r in run(path).results}
    # evaluated in host.py's scope: `torch.device` has no kernel meaning, reported where it is written
    assert results["k"].construct == "torch" and results["k"].loc.file.endswith("host.py")
    assert results["k"].loc.line == 3
    assert results["k2"].construct == "import" and results["k2"].loc.line == 15


def test_cat_doubles_the_axis_with_a_derived_constant():
    _, text = translated(DATA)
    body = entry_text(text, "cat_kernel")
    assert "const TN_PLUS_TN: i32" in body
    assert has_line(body, "let {_}: Tile<E, { [TM, TN_PLUS_TN] }> = cat(left, prod, 1i32);")


@pytest.mark.parametrize("call,message", [
    ("ct.cat((a, b, a), 0)", "tuple of one or two tiles"),
    ("ct.cat((a, b), 2)", "axis must be a constant"),
    ("ct.cat((a, ct.astype(b, ct.float16)), 0)", "same rank and dtype"),
])
def test_cat_misuse_is_located(tmp_path, call, message):
    path = write_kernels(tmp_path, f"""
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            a = ct.load(x, index=(0,), shape=(TILE,))
            b = ct.load(x, index=(1,), shape=(TILE,))
            ct.store(y, index=(0,), tile={call})
    """)
    (r,) = run(path, {"k": [{"x": "f32", "y": "f32"}]}).results
    assert r.diagnostic.construct == "ct.cat" and r.diagnostic.loc.line == 10 and message in r.diagnostic.message


def test_bitcast_same_width_and_refusals(tmp_path):
    _, text = translated(DATA, {"bitcast_kernel": [{"x": "f32", "bits": "i32"}]})
    assert has_line(entry_text(text, "bitcast_kernel"), "let t_bits: Tile<i32, { [TILE] }> = bitcast(t);")
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            ct.store(y, index=(0,), tile=ct.bitcast(ct.load(x, index=(0,), shape=(TILE,)), ct.int16))
    """)
    (r,) = run(path, {"k": [{"x": "f32", "y": "i16"}]}).results
    assert r.diagnostic.construct == "dtype" and "bit widths differ" in r.diagnostic.message
    assert r.diagnostic.loc.line == 8


def test_integer_powers_are_fpowi():
    # cuTile Python: a float tile to an integer power is fpowi (exponent an i8/i16/i32 tile), not fpowf
    _, text = translated(DATA, {"int_power_kernel": [{"x": "f32", "e": "i16", "y": "f32", "P": 3, "TILE": 128}]})
    body = entry_text(text, "int_power_kernel")
    assert has_line(body, "let {_}: Tile<i32, { [TILE] }> = constant(2i32, shape![TILE]);")
    assert sum("fpowi(t, " in line for line in body.splitlines()) == 3
    assert sum(" pow(t, " in line for line in body.splitlines()) == 1  # t ** 0.5 stays a float power


def test_conditional_expression_on_a_runtime_scalar_is_an_if_with_a_result():
    # cuTile Python branches (`%r = if %c -> (tile<i32>) {yield ..} else {yield ..}`), it does not select
    _, text = translated(DATA, {"if_expression_kernel": [{"x": "f32", "y": "f32", "n": "i32", "TILE": 128}]})
    body = entry_text(text, "if_expression_kernel")
    assert has_line(body, "let sel: i32 = if cond {") and has_line(body, "1i32") and has_line(body, "};")
    assert has_line(body, "let sel_1: Tile<f32, { [TILE] }> = if cond_1 {") and "select(" not in body


def test_conditional_expression_arms_of_different_shapes_are_refused(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, n, TILE: ConstInt):
            t = ct.load(x, index=(0,), shape=(TILE,))
            ct.store(x, index=(0,), tile=t if n > 0 else ct.full((1, TILE), 0.0, dtype=ct.float32))
    """)
    (r,) = run(path, {"k": [{"x": "f32", "n": "i32"}]}).results
    assert r.diagnostic.construct == "conditional expression" and r.diagnostic.loc.line == 9


def test_bool_constants_without_values_get_an_entry_per_value(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt, UPCAST: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if UPCAST:
                t = ct.astype(t, ct.float32) * 2.0
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, y.dtype))
    """)
    report, text = translated(path)
    assert report.results[0].entries == ["k_upcast0", "k_upcast1"]
    assert "if upcast {" in launcher_text(text, "tileport_k")


def test_cumsum_is_scan_sum_on_axis_0():
    _, text = translated(DATA)
    body = entry_text(text, "cumsum_kernel")  # unconfigured: f32 (scan_sum needs a literal identity)
    assert has_line(body, "let t_cumsum: Tile<f32, { [TM, TN] }> = scan_sum(t, 0i32, reverse::Forward, 0.0f32);")
    assert has_line(body, "let t_cumsum_1: Tile<f32, { [TM, TN] }> = scan_sum(t, 0i32, reverse::Reverse, 0.0f32);")


def test_cumsum_on_another_axis_is_refused_with_the_reason(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, TM: ConstInt, TN: ConstInt):
            t = ct.load(x, index=(0, 0), shape=(TM, TN))
            ct.store(x, index=(0, 0), tile=ct.cumsum(t, axis=1))
    """)
    (r,) = run(path, {"k": [{"x": "f32"}]}).results
    assert r.diagnostic.construct == "ct.cumsum" and r.diagnostic.loc.line == 9 and "dim 0" in r.diagnostic.message


def test_fma_contraction_differing_per_dtype_splits_the_entries():
    """cutile-gpt layer_norm_kernel: `f32_acc += x * x` is an fma for f32 arrays only. Without configuration
    (f32, f16, bf16) the port has an f32 entry and an f16/bf16 one; the launcher picks by the arrays' dtypes."""
    report, text = translated(DATA)
    (res,) = [r for r in report.results if r.kernel == "fma_per_dtype_kernel"]
    assert res.entries == ["fma_per_dtype_kernel_f32", "fma_per_dtype_kernel_f16_bf16"], res.entries
    assert any(n.startswith("fma contraction differs per element type (fused a*b+c pairs per dtype: f32: 1, "
                            "f16: 0, bf16: 0)") for n in res.notes), res.notes
    assert "fma(" in entry_text(text, "fma_per_dtype_kernel_f32")
    assert "fma(" not in entry_text(text, "fma_per_dtype_kernel_f16_bf16")
    launcher = next(launcher_text(text, sym) for sym in _symbols(text) if sym.endswith("fma_per_dtype_kernel"))
    assert "if matches!(x.dtype, dtype::F32) && matches!(y.dtype, dtype::F32)" in " ".join(launcher.split())
    assert "matches!(x.dtype, dtype::F16 | dtype::BF16)" in launcher
    assert "no entry of `fma_per_dtype_kernel` takes these dtypes" in launcher


def test_one_dtype_configured_keeps_one_entry():
    report, _ = translated(DATA, {"fma_per_dtype_kernel": [{"x": "float16", "y": "float16", "TILE": 64}]})
    (res,) = [r for r in report.results if r.kernel == "fma_per_dtype_kernel"]
    assert res.entries == ["fma_per_dtype_kernel"] and not any("fma contraction" in n for n in res.notes)


def _symbols(text: str) -> list[str]:
    import re
    return re.findall(r'pub unsafe extern "C" fn (\w+)\(', text)


def test_entries_split_by_dtype_are_selected_by_dtype(tmp_path):
    """The generated-IR capture and stage A's configuration -> variant map pick the entry of the capture's
    dtypes (both picked the first entry whose pinned constants matched: the f32 one for f16 captures)."""
    from tileport.capture import generic_arguments
    from tileport.ops.spec import Capture
    from tileport.pipeline.stage_a import _array_dtypes, _variant_of
    from tileport.translate import lower
    crate = tmp_path / "crate"
    report = run(DATA, {**ATOMIC_DTYPES}, out_dir=crate)
    assert report.ok
    entry = next(e for e in json.loads((crate / "kernels.json").read_text())["entries"]
                 if e["kernel"] == "fma_per_dtype_kernel")
    kernels, _ = lower(str(DATA), None, only=["fma_per_dtype_kernel"])
    variants = [{"entry": k.name, "pinned": {}, "dtypes": _array_dtypes(k)} for k in kernels]
    lengths = ["-1"] * 4  # x, y: every length dynamic in a capture (the arrays' unit-axis generics)
    for dt, name, generics in (("float32", "fma_per_dtype_kernel_f32", ["64", *lengths]),
                               ("float16", "fma_per_dtype_kernel_f16_bf16", ["f16", "64", *lengths]),
                               ("bfloat16", "fma_per_dtype_kernel_f16_bf16", ["bf16", "64", *lengths])):
        cap = Capture("fma_per_dtype_kernel", {"x": (dt, 2), "y": (dt, 2)}, {}, {"TILE": 64})
        assert generic_arguments(entry, cap) == (name, generics), dt
        assert _variant_of(cap, variants) == name, dt
