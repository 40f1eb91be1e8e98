"""The Rust API over the generated kernels (rust-api/, crate `tileport-ops`): it names every operator of the library
(or says why not), its launch plans are the Python operators' (rust-api/tests/data/plans.json, written from the specs
here and read by its CPU tests), and it builds, passes its CPU tests (shape errors, the plans, the Tile IR of every
plan; the GPU tests are `#[ignore]`d here), documents without warnings and is rustfmt-clean. One cargo build serves
the three cargo steps.

Rewrite the plans fixture after a spec's default changed: `python3 tests/test_rust_api.py`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import json
import math
import sys

import pytest

from tileport import toolchain
from tileport.ops.specs import SPEC_MODULES
from tileport.ops.specs import (_attention, _common, _tune, cross_entropy, fmha_bwd, layer_norm, matmul, matmul_splitk,
                                mla_decode, mla_prefill, moe_route, moe_topk_softmax, rms_norm, rope,
                                silu_and_mul, softmax)
from tileport.ops.specs import get_spec
from tileport.runtime.library import cargo_target_dir

REPO = Path(__file__).resolve().parents[1]
API = REPO / "rust-api"

# The library's operators (ops/specs) by the API function that runs them; the softmax variants are the operator's
# choices (`plan::softmax` takes the one the Python operator takes by default).
IN_API = {"vector_add": "vector_add", "relu": "relu", "gelu": "gelu", "silu_and_mul": "silu_and_mul",
          "swiglu": "swiglu", "geglu": "geglu", "softmax": "softmax", "softmax_tma": "softmax",
          "softmax_gather": "softmax", "softmax_online": "softmax", "rms_norm": "rms_norm",
          "layer_norm": "layer_norm", "rope": "rope", "matmul": "matmul", "bmm": "bmm", "fmha_fwd": "fmha",
          "fmha_fwd_sinks": "fmha_sinks", "fmha_fwd_softcap": "fmha_softcap", "dropout": "dropout",
          "dropout_bwd": "dropout_bwd", "cross_entropy": "cross_entropy", "cross_entropy_bwd": "cross_entropy_bwd",
          "matmul_splitk": "matmul_splitk", "moe_topk_softmax": "moe_topk_softmax",
          "moe_topk_sigmoid": "moe_topk_sigmoid", "moe_route": "moe_route",
          "mla_decode": "mla_decode", "mla_prefill": "mla_prefill", "flash_decode": "flash_decode",
          "flash_decode_paged": "flash_decode_paged", "flash_decode_sinks": "flash_decode_sinks",
          "flash_decode_softcap": "flash_decode_softcap",
          "fmha_bwd": "fmha_bwd"}
# Operators the API leaves out, each with the reason docs/rust-api.md gives.
NOT_IN_API = {"rms_norm_bwd", "layer_norm_bwd", "linear_cross_entropy", "linear_cross_entropy_bwd",
              "gated_delta_decode", "gated_delta_prefill", "gated_delta_chunked",
              "fused_moe", "moe_experts", "grouped_gemm", "matmul_fp8"}


PLANS = API / "tests" / "data" / "plans.json"
SMS = _common.DEFAULT_NUM_SMS
F32, F16, BF16 = "float32", "float16", "bfloat16"
RUST_DTYPE = {F32: "f32", F16: "f16", BF16: "bf16"}
# (op, input shapes, dtype, flag): the shapes of each spec's tests and benchmarks that pick every kernel entry
PLAN_CASES = (
    [(op, [[n]], dt, None) for op in ("vector_add", "relu") for n in (1, 1000, 4097, 1 << 24) for dt in (F32, BF16)]
    + [(op, [[7, 33]], F16, None) for op in ("gelu", "swiglu", "geglu")]
    + [("silu_and_mul", [[m, 2 * n]], F16, None) for m, n in ((1, 8), (7, 100), (129, 4097), (4096, 14336))]
    + [("softmax", [[m, n]], dt, None) for m, n in ((1, 1), (3, 7), (8192, 1000), (4096, 4096), (1024, 16384),
                                                    (16, 100_003), (4, 262_144), (1024, 32768))
       for dt in (F32, F16)]
    + [(op, [[m, n]], dt, None) for op in ("rms_norm", "layer_norm") for m, n in _common.NORM_SHAPES
       + [(16384, 2048), (4096, 8192)] for dt in (F32, BF16)]
    + [("rope", [list(x)], F16, None) for x in rope.SPEC.shapes + list(rope.SPEC.bench_shapes)]
    + [("matmul", [[m, k], [k, n]], dt, None) for m, n, k in ((1, 1, 1), (1000, 1000, 1000), (8192, 8192, 8192))
       for dt in (F32, BF16)]
    + [("bmm", [[b, m, k], [b, k, n]], F16, None) for b, m, n, k in ((3, 17, 33, 65), (8, 2048, 2048, 2048))]
    + [("fmha", [[b, hq, s, d], [b, hkv, s, d]], F16, bool(causal)) for b, hq, hkv, s, d, causal in
       get_spec("fmha_fwd").shapes]
    + [("fmha_sinks", [[b, hq, s, d], [b, hkv, s, d]], BF16, window) for b, hq, hkv, s, d, window in
       get_spec("fmha_fwd_sinks").shapes]
    + [("fmha_softcap", [[b, hq, s, d], [b, hkv, s, d]], F16, None) for b, hq, hkv, s, d in
       get_spec("fmha_fwd_softcap").shapes]
    + [(op, [list(x)], F32, None) for op in ("dropout", "dropout_bwd") for x in get_spec(op).shapes]
    + [("matmul_splitk", [[m, k], [k, n]], dt, None) for m, n, k in get_spec("matmul_splitk").shapes
       + list(get_spec("matmul_splitk").bench_shapes) for dt in (F32, BF16)]
    + [("flash_decode_paged", [[b, hq, d], [b * _common.cdiv(s, 64), hkv, 64, d], [b, _common.cdiv(s, 64)]], F16,
        None) for b, hq, hkv, s, d in get_spec("flash_decode_paged").shapes
       + list(get_spec("flash_decode_paged").bench_shapes)]
    + [("flash_decode_sinks", [[b, hq, d], [b, hkv, s, d]], BF16, window) for b, hq, hkv, s, d, window in
       get_spec("flash_decode_sinks").shapes + list(get_spec("flash_decode_sinks").bench_shapes)]
    + [("flash_decode_softcap", [[b, hq, d], [b, hkv, s, d]], F16, None) for b, hq, hkv, s, d in
       get_spec("flash_decode_softcap").shapes + list(get_spec("flash_decode_softcap").bench_shapes)]
    + [("fmha_bwd", [[b, hq, s, d], [b, hkv, s, d]], F16, bool(causal)) for b, hq, hkv, s, d, causal in
       get_spec("fmha_bwd").shapes]
    + [("flash_decode", [[b, hq, d], [b, hkv, s, d]], BF16, None) for b, hq, hkv, s, d in
       get_spec("flash_decode").shapes + list(get_spec("flash_decode").bench_shapes)]
    + [("mla_decode", [[b, h, 512], [b, s, 512]], BF16, None) for b, h, s in
       get_spec("mla_decode").shapes + list(get_spec("mla_decode").bench_shapes)]
    + [("mla_prefill", [[b, h, s, 512], [b, s, 512]], F16, None) for b, h, s in
       get_spec("mla_prefill").shapes + list(get_spec("mla_prefill").bench_shapes)]
    + [("moe_route", [[t, e]], F16, [k, block]) for t, e, k, block in
       get_spec("moe_route").shapes + list(get_spec("moe_route").bench_shapes)]
    + [(op, [[t, e]], F16, k) for op in ("moe_topk_softmax", "moe_topk_sigmoid")
       for t, e, k in get_spec(op).shapes + list(get_spec(op).bench_shapes)]
    + [(op, [list(x)], BF16, None) for op in ("cross_entropy", "cross_entropy_bwd")
       for x in get_spec(op).shapes + list(get_spec(op).bench_shapes)])


def launch(kernel: str, grid, constants: dict) -> dict:
    return {"kernel": kernel, "grid": [int(g) for g in grid], "constants": dict(sorted(constants.items()))}


class _Rows:
    """What softmax's `launches_for` reads of a row-kernel input: its shape."""

    def __init__(self, shape):
        self.shape = tuple(shape)


def softmax_plan(m: int, n: int, dtype: str) -> list[dict]:
    cfg = softmax.operator_default((m, n), dtype)
    if cfg["variant"] != "split":
        return [launch(l.kernel, l.grid, {k: v for k, v in l.args.items() if k.isupper()})
                for l in softmax.launches_for(_Rows((m, n)), None, cfg, SMS)]
    tile, splits = cfg["TILE"], _common.cdiv(n, cfg["TILE"])  # split_launches' grids (it allocates with torch)
    group = _common.cdiv(_common.cdiv(m, cfg["GROUPS"]), softmax.GROUP_ROW_ALIGN) * softmax.GROUP_ROW_ALIGN
    out = []
    for r0 in range(0, m, group):
        grid = (splits, min(m, r0 + group) - r0, 1)
        out += [launch(softmax.SPLIT_ENTRIES[0], grid, {"TILE": tile}),
                launch(softmax.SPLIT_ENTRIES[1], grid, {"TILE": tile, "SPLITS": _common.next_pow2(splits)})]
    return out


def row_plan(spec_module, m: int, n: int, dtype: str) -> list[dict]:
    cfg = spec_module.default((m, n), dtype)
    k, bm = cfg["kernel"], cfg["BLOCK_M"]
    grid = _tune.row_grid(cfg, _common.cdiv(m, bm), SMS, spec_module.OCCUPANCY[k])
    return [launch(k, grid, {"BLOCK_M": bm, "TILE": _common.next_pow2(n)})]


def python_plan(op: str, shapes: list, dtype: str, flag) -> list[dict]:
    """The launches the Python operator makes by default (no tuned configuration) on an H200 (132 SMs)."""
    c = _common
    if op in ("vector_add", "relu", "gelu", "swiglu", "geglu", "dropout", "dropout_bwd"):
        n = math.prod(shapes[0])
        tile = c.flat_tile(n)
        return [launch(get_spec(op).kernels[0], (c.cdiv(n, tile), 1, 1), {"TILE": tile})]
    if op == "silu_and_mul":
        m, n = shapes[0][0], shapes[0][1] // 2
        bm, bn = silu_and_mul.tiles(m, n)
        return [launch("silu_and_mul_kernel", (c.cdiv(n, bn), c.cdiv(m, bm), 1), {"BLOCK_M": bm, "BLOCK_N": bn})]
    if op == "mla_decode":
        (b, h, _lora), s = shapes[0], shapes[1][1]
        head_blocks = c.cdiv(h, mla_decode.HEAD_TILE)
        tiles = max(1, c.cdiv(s, mla_decode.BLOCK_N))
        splits = max(1, min(tiles, c.cdiv(_attention.DECODE_BLOCKS_PER_SM * SMS, b * head_blocks)))
        per_split = c.cdiv(tiles, splits)
        splits = c.cdiv(tiles, per_split)
        consts = {"HEAD_TILE": mla_decode.HEAD_TILE, "BLOCK_N": mla_decode.BLOCK_N, "LORA": mla_decode.LORA,
                  "ROPE": mla_decode.ROPE, "tiles_per_split": per_split}
        return [launch("mla_decode_partial_kernel", (splits, b * head_blocks, 1), consts),
                launch("flash_decode_combine_kernel", (b, h, 1), {"HEAD_DIM": mla_decode.LORA, "n_splits": splits})]
    if op == "mla_prefill":
        b, h, s, _lora = shapes[0]
        consts = {"BLOCK_M": mla_prefill.BLOCK_M, "BLOCK_N": mla_prefill.BLOCK_N, "LORA": mla_decode.LORA,
                  "ROPE": mla_decode.ROPE}
        return [launch("mla_prefill_kernel", (c.cdiv(s, mla_prefill.BLOCK_M), b * h, 1), consts)]
    if op == "moe_route":
        (t, e), (k, block) = shapes[0], flag
        bt, topk_pad = moe_topk_softmax.routing_tiles(t, e)
        a = moe_route.align_config(t * k, e)
        return [launch("moe_topk_kernel", (c.cdiv(t, bt), 1, 1), {"BLOCK_T": bt, "E_PAD": topk_pad, "K": k, "SIGMOID": False}),
                launch("moe_align_count_kernel", (a["chunks"], 1, 1), {"SLOTS": a["TILE"] * a["STEPS"], "E_PAD": a["E_PAD"]}),
                launch("moe_align_offsets_kernel", (1, 1, 1), {"BLOCK": block, "E_PAD": a["E_PAD"], "ROWS": a["ROWS"]}),
                launch("moe_align_scatter_kernel", (a["chunks"], 1, 1),
                       {"BLOCK": block, "E_PAD": a["E_PAD"], "TILE": a["TILE"], "STEPS": a["STEPS"], "ID_TILE": a["ID_TILE"]})]
    if op in ("moe_topk_softmax", "moe_topk_sigmoid"):
        (t, e), k = shapes[0], flag
        bt, e_pad = moe_topk_softmax.routing_tiles(t, e)
        return [launch("moe_topk_kernel", (c.cdiv(t, bt), 1, 1),
                       {"BLOCK_T": bt, "E_PAD": e_pad, "K": k, "SIGMOID": op == "moe_topk_sigmoid"})]
    if op == "fmha_bwd":
        b, hq, s, d = shapes[0]
        hkv = shapes[1][1]
        pre = {"BLOCK_M": fmha_bwd.PRE_BLOCK_M, "HEAD_DIM": d}
        dkdv, dq = fmha_bwd.constants(fmha_bwd.DKDV_TILES, d, flag), fmha_bwd.constants(fmha_bwd.DQ_TILES, d, flag)
        return [launch("fmha_bwd_preprocess_kernel", (c.cdiv(s, fmha_bwd.PRE_BLOCK_M), b * hq, 1), pre),
                launch("fmha_bwd_dkdv_kernel", (c.cdiv(s, dkdv["BLOCK_N"]), b * hkv, 1), dkdv),
                launch("fmha_bwd_dq_kernel", (c.cdiv(s, dq["BLOCK_M"]), b * hq, 1), dq)]
    if op.startswith("flash_decode"):
        (b, hq, d), hkv = shapes[0], shapes[1][1]
        paged = op == "flash_decode_paged"
        max_len = shapes[2][1] * _attention.PAGE_SIZE if paged else shapes[1][2]
        splits, per_split = _attention.decode_splits(b, hkv, max_len, SMS, _attention.decode_block_n(paged))
        consts = _attention.decode_constants(d, paged=paged, sliding=op == "flash_decode_sinks" and flag > 0,
                                             sinks=op == "flash_decode_sinks", softcap=op == "flash_decode_softcap",
                                             final=splits == 1)
        out = [launch("flash_decode_partial_kernel", (splits, b * hkv, 1), {**consts, "tiles_per_split": per_split})]
        if splits > 1:
            out.append(launch("flash_decode_combine_kernel", (b, hq, 1), {"HEAD_DIM": d, "n_splits": splits}))
        return out
    if op == "matmul_splitk":
        (m, k), n = shapes[0], shapes[1][1]
        consts = matmul_splitk.constants(dtype)
        splits, per_split = matmul_splitk.split_plan(m, n, k, dtype, SMS)
        tiles = c.cdiv(m, consts["TILE_M"]) * c.cdiv(n, consts["TILE_N"])
        rm, rn = matmul_splitk.REDUCE_TILE
        return [launch("matmul_splitk_kernel", (tiles, splits, 1), {**consts, "k_tiles_per_split": per_split}),
                launch("splitk_reduce_kernel", (c.cdiv(m, rm), c.cdiv(n, rn), 1), {"TILE_M": rm, "TILE_N": rn})]
    if op in ("cross_entropy", "cross_entropy_bwd"):
        m, v = shapes[0]
        bm, chunk = cross_entropy.tiles(m, v)
        grid = (max(1, min(c.cdiv(m, bm), SMS * cross_entropy.OCCUPANCY[get_spec(op).kernels[0]])), 1, 1)
        return [launch(get_spec(op).kernels[0], grid, {"BLOCK_M": bm, "CHUNK": chunk})]
    if op == "softmax":
        return softmax_plan(*shapes[0], dtype)
    if op in ("rms_norm", "layer_norm"):
        return row_plan(rms_norm if op == "rms_norm" else layer_norm, *shapes[0], dtype)
    if op == "rope":
        b, s, h, d = shapes[0]
        cfg = rope.default((b, s, h, d), dtype)
        consts = {"BLOCK_S": cfg["BLOCK_S"], "BLOCK_H": cfg["BLOCK_H"], "HALF_TILE": c.next_pow2(d // 2)}
        return [launch(cfg["kernel"], rope.grid_for(cfg, s, h, b, SMS), consts)]
    if op in ("matmul", "bmm"):
        (*batch, m, _k), n = shapes[0], shapes[1][-1]
        consts = matmul.constants(dtype)
        tiles = c.cdiv(m, consts["TILE_M"]) * c.cdiv(n, consts["TILE_N"]) * math.prod(batch)
        grid = (max(1, min(tiles, SMS // matmul.NUM_CTAS)), 1, 1)  # persistent_mma_grid on an H200
        return [launch(f"{op}_kernel", grid, consts)]
    b, hq, s, d = shapes[0]  # fmha and its variants (flag: causal, the window of fmha_sinks)
    if op == "fmha_sinks":
        consts = _attention.prefill_constants(d, causal=True, sliding=flag > 0, sinks=True)
    elif op == "fmha_softcap":
        consts = _attention.prefill_constants(d, causal=True, softcap=True)
    else:
        consts = _attention.prefill_constants(d, causal=flag)
    return [launch("fmha_fwd_kernel", (c.cdiv(s, consts["BLOCK_M"]), b * hq, 1), consts)]


def plans_document() -> dict:
    cases = [{"op": op, "shapes": shapes, "dtype": RUST_DTYPE[dt], "flag": flag,
              "launches": python_plan(op, shapes, dt, flag)} for op, shapes, dt, flag in PLAN_CASES]
    return {"generated_by": "python3 tests/test_rust_api.py", "num_sms": SMS, "cases": cases}


def test_the_plans_fixture_is_the_python_operators_plans():
    assert PLANS.is_file(), "rust-api/tests/data/plans.json is missing: python3 tests/test_rust_api.py writes it"
    assert json.loads(PLANS.read_text()) == plans_document(), \
        "a spec's default changed: rewrite the fixture (python3 tests/test_rust_api.py), then match rust-api/src/plan.rs"


def api_functions() -> set[str]:
    """The operators lib.rs re-exports (`pub use ops::{...}`), types left out."""
    m = re.search(r"pub use ops::\{(.*?)\};", (API / "src" / "lib.rs").read_text(), re.S)
    assert m, "rust-api/src/lib.rs re-exports no operators"
    return {name.strip() for name in m.group(1).split(",") if name.strip() and name.strip()[0].islower()}


def test_every_library_operator_has_an_api_function_or_a_stated_reason():
    specs = set(SPEC_MODULES)
    assert set(IN_API) | NOT_IN_API == specs, "operators neither in the API nor left out by name"
    assert not set(IN_API) & NOT_IN_API
    assert set(IN_API.values()) | {"fmha_varlen"} == api_functions()
    doc = (REPO / "docs" / "rust-api.md").read_text()
    missing = [op for op in NOT_IN_API if f"`{op}`" not in doc]
    assert not missing, f"docs/rust-api.md does not say why these are left out: {missing}"


def cargo(*args: str, timeout: float = 3600, **env: str) -> subprocess.CompletedProcess:
    full = toolchain.env() | {"CARGO_TARGET_DIR": str(cargo_target_dir())} | env
    return subprocess.run(["cargo", *args, "--manifest-path", str(API / "Cargo.toml")], env=full,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.cargo
def test_api_crate_passes_its_cpu_tests_and_documents_without_warnings():
    if shutil.which("cargo") is None:
        pytest.fail("cargo is not installed (bash scripts/setup.sh installs it)")
    fmt = cargo("fmt", "--check", timeout=120)
    assert fmt.returncode == 0, f"rust-api is not rustfmt-clean:\n{fmt.stdout}{fmt.stderr}"

    test = cargo("test")
    log = test.stdout + test.stderr
    assert test.returncode == 0, log[-6000:]
    # the CPU tests ran, the GPU tests were ignored (they need a GPU), every doc example compiled
    for name in ("plans_are_the_python_operators", "elementwise_ops_compile", "fmha_compiles_causal_and_not",
                 "attention_variants_compile", "attention_variants_check_sinks_cap_and_head_dim", "dropout_compiles",
                 "dropout_checks_p_and_offset", "dropout_reference_mask_is_the_python_operators",
                 "cross_entropy_compiles", "cross_entropy_checks_rows", "matmul_splitk_checks_and_compiles",
                 "moe_topk_checks_k_and_compiles", "flash_decode_checks_and_compiles",
                 "fmha_bwd_checks_and_compiles", "decode_variants_check_and_compile",
                 "moe_route_checks_and_compiles", "mla_checks_and_compiles"):
        assert re.search(rf"test {name} \.\.\. ok", log), log[-4000:]
    for name in ("attention_matches_the_reference", "attention_variants_match_the_reference",
                 "dropout_matches_the_reference", "cross_entropy_matches_the_reference",
                 "matmul_splitk_matches_the_reference", "moe_topk_matches_the_reference",
                 "flash_decode_matches_the_reference", "fmha_bwd_matches_the_reference",
                 "decode_variants_match_the_reference", "moe_route_matches_the_reference",
                 "mla_matches_the_reference"):
        assert re.search(rf"test {name} \.\.\. ignored", log), log[-4000:]
    assert re.search(r"ops::fmha \(line \d+\) - compile \.\.\. ok", log), log[-4000:]
    assert not re.search(r"test result: FAILED", log)

    doc = cargo("doc", "--no-deps", RUSTDOCFLAGS="-Dwarnings")
    assert doc.returncode == 0, (doc.stdout + doc.stderr)[-6000:]
    assert "warning: `tileport-ops`" not in doc.stderr
    assert (cargo_target_dir() / "doc" / "tileport_ops" / "fn.softmax.html").is_file()


def _h200_rustapi(tmp_path: Path, bundled: bool) -> tuple[subprocess.CompletedProcess, Path]:
    """`scripts/h200.sh rustapi` with nvidia-smi and the two bundled binaries replaced by stand-ins."""
    bin_dir, extra, out = tmp_path / "bin", tmp_path / "extra", tmp_path / "OUT"
    for d in (bin_dir, extra, out):
        d.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 580.00, 143771 MiB'\n")
    smi.chmod(0o755)
    if bundled:  # .device/rustapi.tar.xz as .device/enter.sh unpacks it
        binaries = tmp_path / "binaries"
        binaries.mkdir()
        (binaries / "transformer_block").write_text('#!/bin/sh\necho "example $*"; echo \'{"verdict": "PASS"}\'\n')
        (binaries / "tileport_ops_gpu_tests").write_text('#!/bin/sh\necho "tests $*"; echo "test result: ok."\n')
        for f in binaries.iterdir():
            f.chmod(0o755)
        subprocess.run(["tar", "-C", str(binaries), "-cf", str(extra / "rustapi.tar"), "transformer_block",
                        "tileport_ops_gpu_tests"], check=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out),
           "TILEPORT_DEVICE_EXTRA": str(extra), "TILEPORT_WORK": str(tmp_path / "work"), "RUSTAPI_ARGS": "2 256"}
    proc = subprocess.run(["bash", "scripts/h200.sh", "rustapi"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    return proc, out


def test_h200_rustapi_step_runs_the_bundled_example_and_tests(tmp_path):
    proc, out = _h200_rustapi(tmp_path, bundled=True)
    log = (out / "rustapi.log").read_text()
    assert "example 2 256" in log and '"verdict": "PASS"' in log and "rustapi rc=0" in log, proc.stdout + log
    assert "tests --ignored --test-threads 1" in log and "rustapi tests rc=0" in log, log


def test_h200_rustapi_step_says_when_the_example_was_not_bundled(tmp_path):
    proc, out = _h200_rustapi(tmp_path, bundled=False)
    assert "rustapi: no " in (out / "rustapi.log").read_text(), proc.stdout + proc.stderr
    assert "rustapi rc=" not in proc.stdout


if __name__ == "__main__":
    PLANS.parent.mkdir(parents=True, exist_ok=True)
    doc = plans_document()
    cases = ",\n".join(f"  {json.dumps(case)}" for case in doc.pop("cases"))  # a case per line: diffs stay legible
    PLANS.write_text(json.dumps(doc)[:-1] + f', "cases": [\n{cases}\n]}}\n')
    print(f"{PLANS}: {len(PLAN_CASES)} cases", file=sys.stderr)
