"""Each supported cuTile construct, as a small kernel written to tmp_path, and the Rust it becomes.

Kernels are translated with `tileport.translate.translate(..., out_dir=None)` (parsed, never imported)
and the assertions read the unformatted module text: whole emitted lines where they are stable (user
variable names, views, launcher checks), `{_}` wildcards where the translator names a temporary.
The construct list and its Rust spelling are documented in docs/translator.md.
"""

from __future__ import annotations

import json

import pytest
from tp_helpers import body_of_loop, entry_text, has_line, launcher_text, lines, module_text, run, write_kernels

F32 = {"x": "f32", "y": "f32"}


def translate_ok(tmp_path, body, configs=None, name="kern.py"):
    path = write_kernels(tmp_path, body, name)
    report = run(path, configs)
    bad = [str(r.diagnostic) for r in report.results if not r.ok]
    assert not bad, bad
    return report, module_text(report, path)


def assert_lines(text, *patterns):
    missing = [p for p in patterns if not has_line(text, p)]
    assert not missing, "missing lines:\n  " + "\n  ".join(missing) + "\n--- text:\n" + text


# ---------------------------------------------------------------- grid


def test_bid_and_num_blocks(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def grid_kernel(x, y, TILE: ConstInt):
            b0 = ct.bid(0)
            b1 = ct.bid(1)
            nz = ct.num_blocks(2)
            t = ct.load(x, index=(b0, b1), shape=(TILE, TILE))
            ct.store(y, index=(b0, nz), tile=t)
    """)
    assert_lines(mod,
                 "let b0: i32 = get_tile_block_id().0;",
                 "let b1: i32 = get_tile_block_id().1;",
                 "let nz: i32 = get_num_tile_blocks().2;")


# ---------------------------------------------------------------- views: ct.load / ct.store


def test_load_store_index_and_shape(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def vadd(a, b, c, TILE: ConstInt):
            bid = ct.bid(0)
            ta = ct.load(a, index=(bid,), shape=(TILE,))
            tb = ct.load(b, index=(bid,), shape=(TILE,))
            ct.store(c, index=(bid,), tile=ta + tb)

        @ct.kernel
        def rows(x, y, TILE: ConstInt):
            r = ct.bid(0)
            ct.store(y, index=(r, 0), tile=ct.load(x, index=(r, 0), shape=(1, TILE)))
    """)
    vadd = entry_text(mod, "vadd")
    assert_lines(vadd,
                 "pub unsafe fn vadd<E: ElementType, const TILE: i32, const A_LEN0: i32, const B_LEN0: i32, "
                 "const C_LEN0: i32>(a: &Tensor<E, { [A_LEN0] }>, b: &Tensor<E, { [B_LEN0] }>, "
                 "c: &Tensor<E, { [C_LEN0] }>) {",
                 "let a_view: Partition<E, { [TILE] }> = unsafe { make_partition_view(a, shape![TILE], "
                 "padding::None, dim_map::Identity, a.token()) };",
                 "let mut c_out: PartitionMut<E, { [TILE] }> = unsafe { c.partition_full_mut(shape![TILE]) };",
                 "let ta: Tile<E, { [TILE] }> = load_view_tko(&a_view, [bid], ordering::Weak, scope::TileBlock, "
                 "None, tma::Enabled);",
                 "let {_}: Tile<E, { [TILE] }> = ta + tb;",
                 "unsafe { store_view_tko_mut(&mut c_out, {_}, [bid], ordering::Weak, scope::TileBlock, None, "
                 "tma::Enabled) };")
    assert_lines(entry_text(mod, "rows"),
                 "let x_view: Partition<E, { [1, TILE] }> = unsafe { make_partition_view(x, shape![1, TILE], "
                 "padding::None, dim_map::Identity, x.token()) };",
                 "let {_}: Tile<E, { [1, TILE] }> = load_view_tko(&x_view, [r, 0i32], ordering::Weak, "
                 "scope::TileBlock, None, tma::Enabled);")
    # The safe `partition()` / `Partition::load` spelling pads with zero and adds launch checks: never used.
    assert ".partition(" not in mod and ".load(" not in mod


@pytest.mark.parametrize("mode,rust", [
    (None, "padding::None"), ("ZERO", "padding::Zero"), ("NEG_ZERO", "padding::NegZero"),
    ("NAN", "padding::Nan"), ("POS_INF", "padding::PosInf"), ("NEG_INF", "padding::NegInf"),
])
def test_load_padding_mode(tmp_path, mode, rust):
    pad = f", padding_mode=ct.PaddingMode.{mode}" if mode else ""
    _, mod = translate_ok(tmp_path, f"""
        @ct.kernel
        def padded(x, y, TILE: ConstInt):
            i = ct.bid(0)
            ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(TILE,){pad}))
    """)
    assert_lines(mod, "let x_view: Partition<E, { [TILE] }> = unsafe { make_partition_view(x, shape![TILE], "
                      f"{rust}, dim_map::Identity, x.token()) }};")


def test_load_store_latency_and_allow_tma(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def hinted(x, y, TILE: ConstInt):
            i = ct.bid(0)
            t = ct.load(x, index=(i,), shape=(TILE,), latency=3, allow_tma=False)
            ct.store(y, index=(i,), tile=t, latency=2, allow_tma=False)
            u = ct.load(x, index=(i,), shape=(TILE,), allow_tma=True)
    """)
    assert_lines(mod,
                 "let t: Tile<E, { [TILE] }> = load_view_tko(&x_view, [i], ordering::Weak, scope::TileBlock, "
                 "Some(3), tma::Disabled);",
                 "unsafe { store_view_tko_mut(&mut y_out, t, [i], ordering::Weak, scope::TileBlock, Some(2), "
                 "tma::Disabled) };",
                 "let u: Tile<E, { [TILE] }> = load_view_tko(&x_view_1, [i], ordering::Weak, scope::TileBlock, "
                 "None, tma::Enabled);")


@pytest.mark.parametrize("order,dim_map", [
    ('"F"', "const_array![1, 0]"), ("(1, 0)", "const_array![1, 0]"), ('"C"', "dim_map::Identity"),
    ("(0, 1)", "dim_map::Identity"),
])
def test_permuted_load_order(tmp_path, order, dim_map):
    _, mod = translate_ok(tmp_path, f"""
        @ct.kernel
        def ordered(x, y, TM: ConstInt, TN: ConstInt):
            b = ct.bid(0)
            t = ct.load(x, index=(b, 0), shape=(TN, TM), order={order})
            ct.store(y, index=(0, b), tile=ct.transpose(t))
    """)
    # The tile shape is the `shape=` tuple as written; only the dim_map changes.
    assert_lines(mod,
                 "let x_view: Partition<E, { [TN, TM] }> = unsafe { make_partition_view(x, shape![TN, TM], "
                 f"padding::None, {dim_map}, x.token()) }};",
                 "let t: Tile<E, { [TN, TM] }> = load_view_tko(&x_view, [b, 0i32], ordering::Weak, "
                 "scope::TileBlock, None, tma::Enabled);",
                 "let {_}: Tile<E, { [TM, TN] }> = t.transpose();")


def test_permuted_load_rank3(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def ordered3(z, y, TM: ConstInt, TN: ConstInt):
            t = ct.load(z, index=(0, ct.bid(0), 0), shape=(2, TM, TN), order=(2, 0, 1))
            ct.store(y, index=(0, 0, 0), tile=t)
    """)
    assert_lines(mod, "let z_view: Partition<E, { [2, TM, TN] }> = unsafe { make_partition_view(z, "
                      "shape![2, TM, TN], padding::None, const_array![2, 0, 1], z.token()) };")


# ---------------------------------------------------------------- pointer path: ct.gather / ct.scatter


def test_gather_scatter_with_bounds_checks_mask_and_padding(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def gs(x, y, n, TILE: ConstInt):
            offs = ct.bid(0) * TILE + ct.arange(TILE, dtype=ct.int32)
            keep = offs < n
            t = ct.gather(x, offs, mask=keep, padding_value=-1.0, latency=2)
            ct.scatter(y, offs, t, mask=keep)
    """, {"gs": [{"x": "f32", "y": "f32", "n": "i32"}]})
    assert_lines(mod,
                 # cuTile's expansion, per call: widen the index to u64, compare with the widened extent
                 # (unsigned), multiply by the constant last stride 1, offset the broadcast base pointer.
                 "let x_token: Token = x.token();",
                 "let {_}: Tile<u64, { [TILE] }> = exti(offs);",
                 "let {_}: i32 = if X_LEN0 == 1 { 1i32 } else { x.shape()[0] };",
                 "let {_}: Tile<i32, { [] }> = scalar_to_tile({_});",
                 "let {_}: Tile<u64, { [] }> = exti({_});",
                 "let {_}: Tile<u64, { [1] }> = {_}.reshape(shape![1]);",
                 "let {_}: Tile<u64, { [TILE] }> = {_}.broadcast(shape![TILE]);",
                 "let {_}: Tile<bool, { [TILE] }> = cmpi({_}, {_}, predicate::LessThan);",
                 "let {_}: Tile<u64, { [TILE] }> = constant(1u64, shape![TILE]);",
                 "let {_}: Tile<u64, { [TILE] }> = {_} * {_};",
                 "let {_}: PointerTile<*mut f32, { [] }> = pointer_to_tile(cast_mut(x.as_ptr()));",
                 "let {_}: PointerTile<*mut f32, { [1] }> = {_}.reshape(shape![1]);",
                 "let {_}: PointerTile<*mut f32, { [TILE] }> = {_}.broadcast(shape![TILE]);",
                 "let {_}: PointerTile<*mut f32, { [TILE] }> = {_}.offset_tile({_});",
                 # the user mask is and-ed after the bounds mask; a float pad is a 0-d constant broadcast
                 "let {_}: Tile<bool, { [TILE] }> = andi({_}, keep);",
                 "let {_}: Tile<f32, { [TILE] }> = (-1.0f32).broadcast(shape![TILE]);",
                 "let (t, _): (Tile<f32, { [TILE] }>, Token) = unsafe { load_ptr_tko_tpad({_}, ordering::Weak, "
                 "None::<scope::TileBlock>, Some({_}), Some({_}), Some(x_token), Latency::<2>) };",
                 "let {_}: PointerTile<*mut f32, { [] }> = pointer_to_tile(cast_mut(y.as_ptr()));",
                 "unsafe { store_ptr_tko({_}, t, ordering::Weak, None::<scope::TileBlock>, Some({_}), "
                 "Some(y_token), Latency::<0>) };")
    # each call expands its own address arithmetic (no CSE across gather and scatter), as cuTile does
    assert mod.count("exti(offs)") == 2 and mod.count("as_ptr()") == 2
    assert "pub unsafe fn load_ptr_tko_tpad<" in mod  # the shim is emitted because it is used


def test_gather_2d_int_padding_and_unchecked_scatter(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def g2(x, y, TM: ConstInt, TN: ConstInt):
            rows = ct.arange(TM, dtype=ct.int32)
            cols = ct.arange(TN, dtype=ct.int32)
            t = ct.gather(x, (rows[:, None], cols[None, :]), padding_value=7)
            ct.scatter(y, (rows[:, None], cols[None, :]), t, check_bounds=False)
    """, {"g2": [{"x": "i32", "y": "i32"}]})
    entry = entry_text(mod, "g2")
    assert_lines(entry,
                 # the row stride is the only dynamic stride: the launcher passes it as an argument, first
                 "pub unsafe fn g2<const TM: i32, const TN: i32, const X_LEN0: i32, const X_LEN1: i32, "
                 "const Y_LEN0: i32, const Y_LEN1: i32>(x_stride0: i32, y_stride0: i32, "
                 "x: &Tensor<i32, { [X_LEN0, X_LEN1] }>, y: &Tensor<i32, { [Y_LEN0, Y_LEN1] }>) {",
                 "let {_}: Tile<u64, { [TM, 1] }> = exti(rows_r);",
                 "let {_}: Tile<u64, { [TM, TN] }> = {_}.broadcast(shape![TM, TN]);",
                 "let {_}: i32 = x_stride0;",
                 # an integer pad is a splat constant
                 "let {_}: Tile<i32, { [TM, TN] }> = constant(7i32, shape![TM, TN]);",
                 "let {_}: Tile<bool, { [TM, TN] }> = andi({_}, {_});",
                 "unsafe { store_ptr_tko({_}, t, ordering::Weak, None::<scope::TileBlock>, None, Some(y_token), "
                 "Latency::<0>) };")
    scatter = entry[entry.index("let (t, _)"):]
    assert "cmpi(" not in scatter and "y.shape()" not in scatter  # check_bounds=False: no mask at all
    launcher = launcher_text(mod, "tileport_g2")
    assert "(x.strides[0] as i32, y.strides[0] as i32, x_c, y_c)" in launcher
    resolved = launcher[launcher.index("KernelParams::new()"):]
    assert resolved.index("params.push(y.strides[0] as i32);") < resolved.index("params.array(x);")
    variant = json.loads(report.files["kernels.json"])["entries"][0]["variants"][0]
    assert variant["stride_args"] == [["x", 0], ["y", 0]]


# ---------------------------------------------------------------- creation


def test_arange_full_zeros(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def make(y, h, TILE: ConstInt):
            b = ct.bid(0)
            idx = ct.astype(ct.arange(TILE, dtype=ct.int32), ct.float32)
            f = ct.full((TILE,), 3.5, ct.float32)
            z = ct.zeros((TILE,), dtype=ct.float32)
            k = ct.full((TILE,), 7, ct.int32)
            hz = ct.zeros((TILE,), dtype=ct.float16)
            ct.store(y, index=(b,), tile=idx + f + z + ct.astype(k, ct.float32))
            ct.store(h, index=(b,), tile=hz)
    """, {"make": [{"y": "f32", "h": "f16"}]})
    assert_lines(mod,
                 "let {_}: Tile<i32, { [TILE] }> = iota(shape![TILE]);",
                 "let idx: Tile<f32, { [TILE] }> = convert_tile({_});",
                 "let f: Tile<f32, { [TILE] }> = constant(3.5f32, shape![TILE]);",
                 "let z: Tile<f32, { [TILE] }> = constant(0.0f32, shape![TILE]);",
                 "let k: Tile<i32, { [TILE] }> = constant(7i32, shape![TILE]);",
                 # f16 has no Rust literal: the constant_lit shim types an f32 literal by its result
                 "let hz: Tile<f16, { [TILE] }> = constant_lit(0.0f32, shape![TILE]);")


# ---------------------------------------------------------------- arithmetic, comparisons, select


def test_float_arithmetic_comparisons_where_maximum(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def arith(a, b, y, m, n, TILE: ConstInt):
            i = ct.bid(0)
            ta = ct.load(a, index=(i,), shape=(TILE,))
            tb = ct.load(b, index=(i,), shape=(TILE,))
            s = ta + tb
            d = ta - tb
            p = ta * 2.0
            q = ta / tb
            w = ct.where(ta > tb, ct.maximum(s, d), ct.minimum(p, q))
            w = ct.where(ta <= 0.0, 0.0, w)
            v = w * n
            ct.store(y, index=(i,), tile=-v)
            ct.store(m, index=(i,), tile=ct.where(ta == tb, 1, 0))
    """, {"arith": [{"a": "f32", "b": "f32", "y": "f32", "m": "i32", "n": "f32"}]})
    assert_lines(mod,
                 "let s: Tile<f32, { [TILE] }> = ta + tb;",
                 "let d: Tile<f32, { [TILE] }> = ta - tb;",
                 # a float literal is a 0-d constant reshaped and broadcast (cuTile's materialization)
                 "let {_}: Tile<f32, { [TILE] }> = 2.0f32.broadcast(shape![TILE]);",
                 "let p: Tile<f32, { [TILE] }> = ta * {_};",
                 "let q: Tile<f32, { [TILE] }> = ta / tb;",
                 "let {_}: Tile<bool, { [TILE] }> = gt_tile(ta, tb);",
                 "let {_}: Tile<f32, { [TILE] }> = maxf(s, d, nan::Disabled, ftz::Disabled);",
                 "let {_}: Tile<f32, { [TILE] }> = minf(p, q, nan::Disabled, ftz::Disabled);",
                 "let w: Tile<f32, { [TILE] }> = select({_}, {_}, {_});",
                 "let {_}: Tile<bool, { [TILE] }> = le_tile(ta, {_});",
                 # a runtime scalar is broadcast the same way
                 "let {_}: Tile<f32, { [TILE] }> = n.broadcast(shape![TILE]);",
                 "let {_}: Tile<f32, { [TILE] }> = negf(v);",
                 "let {_}: Tile<bool, { [TILE] }> = eq_tile(ta, tb);",
                 # integer literals are splat constants
                 "let {_}: Tile<i32, { [TILE] }> = constant(1i32, shape![TILE]);",
                 "let {_}: Tile<i32, { [TILE] }> = constant(0i32, shape![TILE]);")


def test_generic_float_literal_uses_constant_lit(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def scale(x, y, TILE: ConstInt):
            i = ct.bid(0)
            ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(TILE,)) * 2.0)
    """)
    # E may be f16/bf16 (weakly typed literal keeps E): a 0-d constant_lit, reshape, broadcast
    assert_lines(mod,
                 "let {_}: Tile<E, { [] }> = constant_lit(2.0f32, shape![]);",
                 "let {_}: Tile<E, { [1] }> = {_}.reshape(shape![1]);",
                 "let {_}: Tile<E, { [TILE] }> = {_}.broadcast(shape![TILE]);")


def test_integer_arithmetic_and_comparisons(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def iarith(a, b, y, TILE: ConstInt):
            i = ct.bid(0)
            ta = ct.load(a, index=(i,), shape=(TILE,))
            tb = ct.load(b, index=(i,), shape=(TILE,))
            r = (ta + tb) * 3 - ta // tb
            r = ct.where(r >= 0, ct.maximum(r, tb), ct.minimum(r, ta))
            ct.store(y, index=(i,), tile=r)
    """, {"iarith": [{"a": "i32", "b": "i32", "y": "i32"}]})
    assert_lines(mod,
                 "let {_}: Tile<i32, { [TILE] }> = ta + tb;",
                 "let {_}: Tile<i32, { [TILE] }> = constant(3i32, shape![TILE]);",
                 "let {_}: Tile<i32, { [TILE] }> = divi(ta, tb, rounding::NegativeInf);",
                 "let {_}: Tile<bool, { [TILE] }> = cmpi(r, {_}, predicate::GreaterThanOrEqual);",
                 "let {_}: Tile<i32, { [TILE] }> = maxi(r, tb);",
                 "let {_}: Tile<i32, { [TILE] }> = mini(r, ta);")


def test_scalar_floordiv_and_mod_follow_python_semantics(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def swz(x, y, n, TILE: ConstInt):
            b = ct.bid(0)
            q = b // n
            r = b % n
            ct.store(y, index=(q + r,), tile=ct.load(x, index=(b,), shape=(TILE,)))
    """)
    assert_lines(mod,
                 "let {_}: Tile<i32, { [] }> = divi({_}, {_}, rounding::NegativeInf);",
                 "let q: i32 = tile_to_scalar({_});",
                 "let {_}: Tile<i32, { [] }> = remi({_}, {_});",
                 "let {_}: Tile<bool, { [] }> = xori({_}, {_});",
                 "let {_}: Tile<i32, { [] }> = select({_}, {_}, {_});",
                 "let r: i32 = tile_to_scalar({_});")


def test_rounding_modes_and_flush_to_zero_on_arithmetic(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def modes(x, a, b, c, d, TILE: ConstInt):
            i = ct.bid(0)
            t = ct.load(x, index=(i,), shape=(TILE,))
            ct.store(a, index=(i,), tile=ct.truediv(t, t, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True))
            ct.store(b, index=(i,), tile=ct.truediv(t, t, rounding_mode=ct.RoundingMode.FULL))
            ct.store(c, index=(i,), tile=ct.add(t, t, flush_to_zero=True))
            ct.store(d, index=(i,), tile=ct.mul(t, t, rounding_mode=ct.RoundingMode.RZ))
    """, {"modes": [{"x": "f32", "a": "f32", "b": "f32", "c": "f32", "d": "f32"}]})
    assert_lines(mod,
                 "let {_}: Tile<f32, { [TILE] }> = divf(t, t, rounding::Approx, ftz::Enabled);",
                 # the built-in divf has no `Full`: the divf_full shim
                 "let {_}: Tile<f32, { [TILE] }> = divf_full(t, t, rounding::Full, ftz::Disabled);",
                 "let {_}: Tile<f32, { [TILE] }> = addf(t, t, rounding::NearestEven, ftz::Enabled);",
                 "let {_}: Tile<f32, { [TILE] }> = mulf(t, t, rounding::Zero, ftz::Disabled);")
    assert "pub fn divf_full<" in mod


# ---------------------------------------------------------------- math


def test_math_functions_with_rounding_and_ftz(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def mathk(x, y, TILE: ConstInt):
            i = ct.bid(0)
            t = ct.load(x, index=(i,), shape=(TILE,))
            e = ct.exp(t)
            ea = ct.exp(t, rounding_mode=ct.RoundingMode.APPROX)
            e2 = ct.exp2(t, flush_to_zero=True)
            e3 = ct.exp2(t)
            lg = ct.log(e)
            s = ct.sqrt(lg)
            sa = ct.sqrt(s, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
            r = ct.rsqrt(sa, flush_to_zero=True)
            r0 = ct.rsqrt(sa)
            th = ct.tanh(r)
            tha = ct.tanh(th, rounding_mode=ct.RoundingMode.APPROX)
            sig = 1.0 / (1.0 + ct.exp(-tha))
            ab = ct.abs(sig)
            ct.store(y, index=(i,), tile=ab + ea + e2 + e3 + r0)
    """, {"mathk": [F32]})
    assert_lines(mod,
                 "let e: Tile<f32, { [TILE] }> = exp(t);",
                 "let ea: Tile<f32, { [TILE] }> = unsafe { exp_with_rounding(t, rounding::Approx) };",
                 "let e2: Tile<f32, { [TILE] }> = exp2(t, ftz::Enabled);",
                 "let e3: Tile<f32, { [TILE] }> = exp2(t, ftz::Disabled);",
                 "let lg: Tile<f32, { [TILE] }> = log(e);",
                 "let s: Tile<f32, { [TILE] }> = sqrt(lg, rounding::NearestEven, ftz::Disabled);",
                 "let sa: Tile<f32, { [TILE] }> = sqrt(s, rounding::Approx, ftz::Enabled);",
                 "let r: Tile<f32, { [TILE] }> = rsqrt(sa, ftz::Enabled);",
                 "let r0: Tile<f32, { [TILE] }> = rsqrt(sa, ftz::Disabled);",
                 "let th: Tile<f32, { [TILE] }> = tanh(r);",
                 "let tha: Tile<f32, { [TILE] }> = unsafe { tanh_with_rounding(th, rounding::Approx) };",
                 "let ab: Tile<f32, { [TILE] }> = absf(sig);")
    # sigmoid written out: negf, exp, 1.0 + e, 1.0 / d, each literal broadcast on its own
    sig = lines(mod)[next(i for i, line in enumerate(lines(mod)) if line.startswith("let tha:")) + 1:]
    assert has_line("\n".join(sig[:6]), "let {_}: Tile<f32, { [TILE] }> = negf(tha);")
    assert sum(1 for line in sig[:7] if line.endswith("= 1.0f32.broadcast(shape![TILE]);")) == 2
    assert has_line("\n".join(sig[:7]), "let sig: Tile<f32, { [TILE] }> = {_} / {_};")


def test_names_imported_from_cuda_tile_are_the_ct_attributes(tmp_path):
    """`from cuda.tile import X` binds what `ct.X` is: a function, a dtype or an enum namespace."""
    body = """
        {imports}

        @ct.kernel
        def imported(x, y, TILE: ConstInt):
            i = {p}bid(0)
            t = {p}load(x, index=(i,), shape=(TILE,), padding_mode={p}PaddingMode.ZERO)
            f = {p}exp(t.astype({p}float32))
            ct.store(y, index=(i,), tile={p}full((TILE,), 1.0, {p}float32) + f)
    """
    entries = []
    for sub, imports, prefix in (("plain", "", "ct."),
                                 ("imported", "from cuda.tile import PaddingMode, bid, exp, float32, full, load", "")):
        (tmp_path / sub).mkdir()
        _, mod = translate_ok(tmp_path / sub, body.format(imports=imports, p=prefix),
                              {"imported": [{"x": "f16", "y": "f32"}]})
        entries.append(entry_text(mod, "imported"))
    assert entries[0] == entries[1]
    assert "padding::Zero" in entries[1] and "convert_tile(t)" in entries[1]


# ---------------------------------------------------------------- casts


def test_astype(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def casts(a, y, TILE: ConstInt):
            i = ct.bid(0)
            ta = ct.load(a, index=(i,), shape=(TILE,))
            w = ct.astype(ta, ct.int64)
            n = ct.astype(w, ct.int32)
            f = ct.astype(n, ct.float32)
            g = ct.astype(f, ct.float16)
            h = ct.astype(g, ct.tfloat32)
            k = ct.astype(f, ct.int32)
            ct.store(y, index=(i,), tile=k)
    """, {"casts": [{"a": "i32", "y": "i32"}]})
    assert_lines(mod,
                 "let w: Tile<i64, { [TILE] }> = exti(ta);",
                 "let n: Tile<i32, { [TILE] }> = trunci_fixed(w, overflow::None);",
                 "let f: Tile<f32, { [TILE] }> = convert_tile(n);",
                 "let g: Tile<f16, { [TILE] }> = convert_tile(f);",
                 "let h: Tile<tf32, { [TILE] }> = convert_tile(g);",
                 "let k: Tile<i32, { [TILE] }> = convert_tile(f);")
    assert "pub fn trunci_fixed<" in mod


# ---------------------------------------------------------------- reductions


def test_reductions_axis_and_keepdims(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def red(x, s0, s1, s2, TM: ConstInt, TN: ConstInt):
            i = ct.bid(0)
            t = ct.load(x, index=(i, 0), shape=(TM, TN))
            rs = ct.sum(t, axis=1)
            cm = ct.max(t, axis=0)
            mn = ct.min(t, axis=1, keepdims=True)
            total = ct.sum(rs)
            everything = ct.max(t)
            ct.store(s0, index=(i,), tile=rs + ct.reshape(mn, (TM,)))
            ct.store(s1, index=(i,), tile=cm)
            ct.store(s2, index=(i,), tile=ct.reshape(total + everything, (1,)))
    """, {"red": [{"x": "f32", "s0": "f32", "s1": "f32", "s2": "f32"}]})
    assert_lines(mod,
                 "let rs: Tile<f32, { [TM] }> = reduce_sum(t, 1i32);",
                 "let cm: Tile<f32, { [TN] }> = reduce_max(t, 0i32);",
                 "let {_}: Tile<f32, { [TM] }> = reduce_min(t, 1i32);",
                 "let mn: Tile<f32, { [TM, 1] }> = {_}.reshape(shape![TM, 1]);",
                 "let total: Tile<f32, { [] }> = reduce_sum(rs, 0i32);",
                 # axis=None on a 2-D tile: the last axis first, then the first
                 "let {_}: Tile<f32, { [TM] }> = reduce_max(t, 1i32);",
                 "let everything: Tile<f32, { [] }> = reduce_max({_}, 0i32);",
                 # reshape after keepdims is not folded (cuTile keeps both)
                 "let {_}: Tile<f32, { [TM] }> = mn.reshape(shape![TM]);")


# ---------------------------------------------------------------- matrix multiply


def test_mma_in_k_loop_and_matmul(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def mmak(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
            bm = ct.bid(0)
            bn = ct.bid(1)
            acc = ct.zeros((TM, TN), dtype=ct.float32)
            for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
                ta = ct.load(a, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
                tb = ct.load(b, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
                acc = ct.mma(ta, tb, acc)
            ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))

        @ct.kernel
        def mm16(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
            ta = ct.load(a, index=(ct.bid(0), 0), shape=(TM, TK))
            tb = ct.load(b, index=(0, ct.bid(1)), shape=(TK, TN))
            ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.matmul(ta, tb))
    """, {"mmak": [{"a": "f16", "b": "f16", "c": "f16"}, {"a": "bf16", "b": "bf16", "c": "bf16"}],
          "mm16": [{"a": "f16", "b": "f16", "c": "f16"}]})
    mma = entry_text(mod, "mmak")
    assert_lines(mma,
                 "let mut acc: Tile<f32, { [TM, TN] }> = constant(0.0f32, shape![TM, TN]);",
                 "let {_}: i32 = num_tiles(&a_view, 1i32);",
                 "acc = mmaf(ta, tb, acc);",
                 "let {_}: Tile<E, { [TM, TN] }> = convert_tile(acc);")
    assert "acc = mmaf(ta, tb, acc);" in body_of_loop(mma, "for k in 0i32..")
    # ct.matmul on f16 accumulates in f16 (a zero f16 constant), as cuTile does
    assert_lines(entry_text(mod, "mm16"),
                 "let {_}: Tile<f16, { [] }> = constant_lit(0.0f32, shape![]);",
                 "let {_}: Tile<f16, { [TM, TN] }> = mmaf(ta, tb, {_});")


def test_matmul_operator(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def mm_at(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
            ta = ct.load(a, index=(ct.bid(0), 0), shape=(TM, TK))
            tb = ct.load(b, index=(0, ct.bid(1)), shape=(TK, TN))
            ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ta @ tb)
    """, {"mm_at": [{"a": "f16", "b": "f16", "c": "f16"}]})
    assert_lines(mod, "let {_}: Tile<f16, { [TM, TN] }> = mmaf(ta, tb, {_});")


# ---------------------------------------------------------------- shapes and broadcasting


def test_transpose_permute_reshape_and_broadcasts(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def shapes(x, v, y, z, TM: ConstInt, TN: ConstInt):
            i = ct.bid(0)
            t = ct.load(x, index=(i, 0), shape=(TM, TN))
            t3 = ct.reshape(t, (TM, TN, 1))
            p = ct.permute(t3, (2, 0, 1))
            tt = ct.transpose(t)
            p2 = ct.permute(tt, (1, 0))
            flat = ct.reshape(p2, (TM * TN,))
            ct.store(z, index=(i,), tile=flat)
            col = ct.load(v, index=(i,), shape=(TM,))
            row = ct.load(v, index=(0,), shape=(TN,))
            e = ct.expand_dims(row, 0)
            bt = ct.broadcast_to(e, (TM, TN))
            ct.store(y, index=(i, 0), tile=col[:, None] + row + bt + ct.reshape(p, (TM, TN)))
    """, {"shapes": [{"x": "f32", "v": "f32", "y": "f32", "z": "f32"}]})
    assert_lines(mod,
                 "let t3: Tile<f32, { [TM, TN, 1] }> = t.reshape(shape![TM, TN, 1]);",
                 "let p: Tile<f32, { [1, TM, TN] }> = permute(t3, const_array![2, 0, 1]);",
                 "let tt: Tile<f32, { [TN, TM] }> = t.transpose();",
                 "let p2: Tile<f32, { [TM, TN] }> = tt.transpose();",
                 # TM * TN in a type position: a derived const generic
                 "pub unsafe fn shapes<const TM: i32, const TN: i32, const TM_X_TN: i32, const X_LEN0: i32, "
                 "const X_LEN1: i32, const V_LEN0: i32, const Y_LEN0: i32, const Y_LEN1: i32, const Z_LEN0: i32>("
                 "x: &Tensor<f32, { [X_LEN0, X_LEN1] }>, v: &Tensor<f32, { [V_LEN0] }>, "
                 "y: &Tensor<f32, { [Y_LEN0, Y_LEN1] }>, z: &Tensor<f32, { [Z_LEN0] }>) {",
                 "let flat: Tile<f32, { [TM_X_TN] }> = p2.reshape(shape![TM_X_TN]);",
                 "let e: Tile<f32, { [1, TN] }> = row.reshape(shape![1, TN]);",
                 "let bt: Tile<f32, { [TM, TN] }> = e.broadcast(shape![TM, TN]);",
                 # x[:, None] is a reshape; (TM, 1) against (TM, TN) an explicit broadcast
                 "let {_}: Tile<f32, { [TM, 1] }> = col.reshape(shape![TM, 1]);",
                 "let {_}: Tile<f32, { [TM, TN] }> = {_}.broadcast(shape![TM, TN]);",
                 # (TN,) against (TM, TN): reshape to (1, TN), then broadcast
                 "let {_}: Tile<f32, { [1, TN] }> = row.reshape(shape![1, TN]);")
    launcher = launcher_text(mod, "tileport_shapes")
    assert_lines(launcher, "let tm_x_tn = tm * tn;", 'check_tile_dim("TM_X_TN", tm_x_tn)?;',
                 ".generics(vec![tm.to_string(), tn.to_string(), tm_x_tn.to_string(), unit_axis(x, 0).to_string(), "
                 "unit_axis(x, 1).to_string(), unit_axis(v, 0).to_string(), unit_axis(y, 0).to_string(), "
                 "unit_axis(y, 1).to_string(), unit_axis(z, 0).to_string()])")


# ---------------------------------------------------------------- scalars: cdiv, num_tiles, shapes


def test_cdiv_num_tiles_and_array_shape(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def counts(a, y, TM: ConstInt, TK: ConstInt):
            num_bm = ct.cdiv(a.shape[0], TM)
            num_k = ct.num_tiles(a, 1, shape=(TM, TK))
            for k in range(num_k):
                ct.store(y, index=(num_bm, k), tile=ct.load(a, index=(0, k), shape=(TM, TK)))
    """)
    assert_lines(mod,
                 "let {_}: i32 = a.shape()[0];",  # a bounds the loop: its lengths stay dynamic (unit-axis rule)
                 "let num_bm: i32 = ceil_div({_}, TM);",
                 "let num_k: i32 = num_tiles(&a_view, 1i32);",
                 "for k in 0i32..num_k {")


# ---------------------------------------------------------------- loops


def test_range_loops_persistent_and_loop_carried(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def loops(x, y, n, TILE: ConstInt):
            pid = ct.bid(0)
            nprog = ct.num_blocks(0)
            acc = ct.zeros((TILE,), dtype=ct.float32)
            for k in range(pid, n, 2):
                acc = acc + ct.astype(ct.load(x, index=(k,), shape=(TILE,)), ct.float32)
            for j in range(4):
                acc = acc * acc
            for row in range(pid, n, nprog):
                ct.store(y, index=(row,), tile=ct.astype(acc, y.dtype))
    """)
    assert_lines(mod,
                 "let mut acc: Tile<f32, { [TILE] }> = constant(0.0f32, shape![TILE]);",
                 "for k in (pid..n).step_by(2i32 as usize) {",
                 "for j in 0i32..4i32 {",
                 "for row in (pid..n).step_by(nprog as usize) {")
    assert has_line("\n".join(body_of_loop(mod, "for k in")), "acc = acc + {_};")
    assert body_of_loop(mod, "for j in") == ["acc = acc * acc;"]


def test_loop_local_may_change_type(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def local(x, y, n, TILE: ConstInt):
            for k in range(n):
                t = ct.load(x, index=(k,), shape=(TILE,))
                t = ct.astype(t, ct.float32)
                ct.store(y, index=(k,), tile=ct.astype(t * t, y.dtype))
    """)
    body = "\n".join(body_of_loop(mod, "for k in"))
    assert_lines(body, "let t: Tile<E, { [TILE] }> = load_view_tko(&x_view, [k], ordering::Weak, "
                       "scope::TileBlock, None, tma::Enabled);",
                 "let t: Tile<f32, { [TILE] }> = convert_tile(t);")


# ---------------------------------------------------------------- branches


def test_if_on_runtime_values(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def rt_if(x, y, n, TILE: ConstInt):
            i = ct.bid(0)
            acc = ct.astype(ct.load(x, index=(i,), shape=(TILE,)), ct.float32)
            if n > 100:
                acc = acc * 2.0
            else:
                acc = acc - 1.0
            if i == 0:
                ct.store(y, index=(i,), tile=ct.astype(acc, y.dtype))
    """)
    assert_lines(mod,
                 "let mut acc: Tile<f32, { [TILE] }> = convert_tile({_});",
                 "let {_}: bool = n > 100i32;",
                 "acc = acc * {_};",
                 "} else {",
                 "acc = acc - {_};",
                 "let {_}: bool = i == 0i32;")
    assert_lines("\n".join(body_of_loop(mod, "if cond_1 {")),
                 "unsafe { store_view_tko_mut(&mut y_out, {_}, [i], ordering::Weak, scope::TileBlock, None, "
                 "tma::Enabled) };")


def test_if_on_module_constant_is_folded(tmp_path):
    path = write_kernels(tmp_path, """
        DEBUG = False
        SCALE = 0.5

        @ct.kernel
        def folded(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if DEBUG:
                t = t * 3.0
            else:
                t = t * SCALE
            ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    report = run(path, {"folded": [F32]})
    mod = module_text(report, path)
    entry = entry_text(mod, "folded")
    assert "if " not in entry and "3.0f32" not in entry
    assert_lines(entry, "let {_}: Tile<f32, { [TILE] }> = 0.5f32.broadcast(shape![TILE]);")


def test_if_on_constant_parameter_specializes(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def by_tile(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if TILE > 64:
                t = t + 1.0
            ct.store(y, index=(ct.bid(0),), tile=t)
    """, {"by_tile": [{"x": "f32", "y": "f32", "TILE": 128}, {"x": "f32", "y": "f32", "TILE": 32}]})
    assert [r.entries for r in report.results] == [["by_tile_tile128", "by_tile_tile32"]]
    assert "1.0f32" in entry_text(mod, "by_tile_tile128") and "1.0f32" not in entry_text(mod, "by_tile_tile32")
    assert_lines(entry_text(mod, "by_tile_tile128"),
                 "let x_view: Partition<f32, { [128] }> = unsafe { make_partition_view(x, shape![128], "
                 "padding::None, dim_map::Identity, x.token()) };")
    launcher = launcher_text(mod, "tileport_by_tile")
    assert_lines(launcher, "if tile == 128 {", "if tile == 32 {")


@pytest.mark.parametrize("expr", ["min(TILE, 2.5)", "max(2.5, TILE)"])
def test_min_max_of_a_constant_parameter_and_a_float_specializes(tmp_path, expr):
    report, mod = translate_ok(tmp_path, f"""
        @ct.kernel
        def scaled(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(4,))
            ct.store(y, index=(ct.bid(0),), tile=t * {expr})
    """, {"scaled": [{"x": "f32", "y": "f32", "TILE": 2}, {"x": "f32", "y": "f32", "TILE": 4}]})
    assert [r.entries for r in report.results] == [["scaled_tile2", "scaled_tile4"]]
    small, large = ("2.0f32", "2.5f32") if expr.startswith("min") else ("2.5f32", "4.0f32")
    assert small in entry_text(mod, "scaled_tile2") and large in entry_text(mod, "scaled_tile4")


# ---------------------------------------------------------------- entry hints


def test_kernel_hints(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel(occupancy=4, num_ctas=2, num_worker_warps=8)
        def hinted(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))

        @ct.kernel
        def plain(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))
    """)
    assert_lines(mod, "#[cutile::entry(optimization_hints = (default = (num_cta_in_cga = 2, "
                      "num_worker_warps_per_cta = 8, occupancy = 4,),))]")
    idx = mod.index("pub unsafe fn plain")
    assert mod[:idx].rstrip().endswith("#[cutile::entry()]")


# ---------------------------------------------------------------- specialization


def test_constant_int_becomes_const_generic(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def generic(x, y, BLOCK_M: ConstInt, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0), 0), shape=(BLOCK_M, TILE))
            ct.store(y, index=(ct.bid(0), 0), tile=t)
    """)
    assert_lines(mod, "pub unsafe fn generic<E: ElementType, const BLOCK_M: i32, const TILE: i32, "
                      "const X_LEN0: i32, const X_LEN1: i32, const Y_LEN0: i32, const Y_LEN1: i32>(x: &Tensor<E, { [X_LEN0, X_LEN1] }>, "
                      "y: &Tensor<E, { [Y_LEN0, Y_LEN1] }>) {")
    launcher = launcher_text(mod, "tileport_generic")
    assert_lines(launcher,
                 "pub unsafe extern \"C\" fn tileport_generic(x: *const TensorDesc, y: *const TensorDesc, "
                 "block_m: i32, tile: i32, grid_x: u32, grid_y: u32, grid_z: u32, device_id: i32, "
                 "stream: u64) -> i32 {",
                 'check_tile_dim("BLOCK_M", block_m)?;', 'check_tile_dim("TILE", tile)?;',
                 ".generics(vec![dtype_names[0].to_string(), block_m.to_string(), tile.to_string(), "
                 "unit_axis(x, 0).to_string(), unit_axis(x, 1).to_string(), unit_axis(y, 0).to_string(), "
                 "unit_axis(y, 1).to_string()])")
    assert len(json.loads(report.files["kernels.json"])["entries"][0]["variants"]) == 1


@pytest.mark.parametrize("dtypes", [("f32", "f16"), ("bf16",), None])
def test_dtype_generic_dispatches_exactly_the_configured_dtypes(tmp_path, dtypes):
    configs = {"relu": [{"x": d, "y": d} for d in dtypes]} if dtypes else None
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def relu(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.maximum(ct.load(x, index=(ct.bid(0),), shape=(TILE,)), 0.0))
    """, configs)
    launcher = launcher_text(mod, "tileport_relu")
    consts = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
    if dtypes is not None and len(dtypes) == 1:
        # one dtype in use: no generic, a fixed element type checked by the launcher
        assert "pub unsafe fn relu<const TILE: i32, const X_LEN0: i32, const Y_LEN0: i32>(" in mod
        assert "x: &Tensor<bf16, { [X_LEN0] }>" in mod
        assert_lines(launcher, 'require_dtype("x", x, dtype::BF16)?;', 'require_dtype("y", y, dtype::BF16)?;')
        return
    expected = dtypes or ("f32", "f16", "bf16")  # no configuration: the float dtypes
    allowed = ", ".join(f"dtype::{consts[d]}" for d in expected)
    assert_lines(launcher, f'let e_code = common_dtype(&[("x", x), ("y", y)], &[{allowed}])?;')
    arms = [line for line in lines(launcher) if line.startswith("(dtype::")]
    assert arms == [f'(dtype::{consts[d]},) => launch!({d}, ["{d}"]),' for d in expected]
    assert "macro_rules! launch { ($E:ty, $names:expr) => {{" in launcher
    assert_lines(launcher, "type E = $E;")


def test_two_dtype_groups_dispatch_over_used_combinations(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def cast(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(ct.load(x, index=(ct.bid(0),), shape=(TILE,)), y.dtype))
    """, {"cast": [{"x": "f32", "y": "f16"}, {"x": "f16", "y": "f32"}, {"x": "bf16", "y": "f32"}]})
    assert "pub unsafe fn cast<E: ElementType, E2: ElementType, const TILE: i32, const X_LEN0: i32, " in mod
    launcher = launcher_text(mod, "tileport_cast")
    arms = [line for line in lines(launcher) if line.startswith("(dtype::")]
    assert arms == ['(dtype::F32, dtype::F16) => launch!(f32, f16, ["f32", "f16"]),',
                    '(dtype::F16, dtype::F32) => launch!(f16, f32, ["f16", "f32"]),',
                    '(dtype::BF16, dtype::F32) => launch!(bf16, f32, ["bf16", "f32"]),']
    assert_lines(launcher, "type E = $E; type E2 = $E2;")
    assert_lines(launcher, 'let e2_code = common_dtype(&[("y", y)], &[dtype::F16, dtype::F32])?;',
                 '_ => Err(Error::new(Code::DType, "unsupported dtype combination".to_string())),')


def test_bool_constant_changing_types_gives_entries_selected_by_the_launcher(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def branch(x, y, TILE: ConstInt, MODE: ConstInt, UPCAST: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if UPCAST:
                t = ct.astype(t, ct.float32)
            if MODE == 1:
                t = t + 1.0
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, y.dtype))
    """, {"branch": [{"x": "f16", "y": "f16", "MODE": 1, "UPCAST": True},
                     {"x": "f16", "y": "f16", "MODE": 2, "UPCAST": False},
                     {"x": "f32", "y": "f32", "MODE": 2, "UPCAST": False}]})
    assert report.results[0].entries == ["branch_mode1_upcast1", "branch_mode2_upcast0"]
    up = entry_text(mod, "branch_mode1_upcast1")
    assert_lines(up, "pub unsafe fn branch_mode1_upcast1<const TILE: i32, const X_LEN0: i32, const Y_LEN0: i32>("
                     "x: &Tensor<f16, { [X_LEN0] }>, y: &Tensor<f16, { [Y_LEN0] }>) {",
                 "let t: Tile<f32, { [TILE] }> = convert_tile(t);")
    assert "pub unsafe fn branch_mode2_upcast0<E: ElementType, const TILE: i32, const X_LEN0: i32, " in mod
    launcher = launcher_text(mod, "tileport_branch")
    # pinned constants stay C arguments: they select the entry
    assert ("fn tileport_branch(x: *const TensorDesc, y: *const TensorDesc, tile: i32, mode: i32, upcast: bool, "
            "grid_x: u32") in launcher
    assert_lines(launcher, "if mode == 1 && upcast {", "if mode == 2 && !upcast {",
                 "return {",
                 'Err(Error::new(Code::InvalidArgument, format!("no entry of `branch` is specialized for '
                 'MODE={mode}, UPCAST={upcast}")))')
    manifest = json.loads(report.files["kernels.json"])["entries"][0]
    assert [v["pinned"] for v in manifest["variants"]] == [{"MODE": 1, "UPCAST": True},
                                                          {"MODE": 2, "UPCAST": False}]
    assert [p for p in manifest["params"] if p.get("selects_entry")] == [
        {"name": "MODE", "kind": "const", "type": "int", "selects_entry": True},
        {"name": "UPCAST", "kind": "const", "type": "bool", "selects_entry": True}]


def test_constant_arithmetic_in_type_positions_gives_derived_const_generics(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def derived(x, y, h, BLOCK: ConstInt, N: ConstInt):
            t = ct.load(x, index=(ct.bid(0), 0), shape=(2 * BLOCK, N))
            ct.store(y, index=(ct.bid(0), 0), tile=t)
            ct.store(h, index=(ct.bid(0), 0), tile=ct.load(x, index=(0, 0), shape=(1, BLOCK // 2)))
    """, {"derived": [{"x": "f32", "y": "f32", "h": "f32"}]})
    assert_lines(mod,
                 "pub unsafe fn derived<const BLOCK: i32, const N: i32, const BLOCK_X_2: i32, "
                 "const BLOCK_DIV_2: i32, const X_LEN0: i32, const X_LEN1: i32, const Y_LEN0: i32, const Y_LEN1: i32, const H_LEN0: i32, const H_LEN1: i32>("
                 "x: &Tensor<f32, { [X_LEN0, X_LEN1] }>, y: &Tensor<f32, { [Y_LEN0, Y_LEN1] }>, "
                 "h: &Tensor<f32, { [H_LEN0, H_LEN1] }>) {",
                 "let t: Tile<f32, { [BLOCK_X_2, N] }> = load_view_tko(&x_view, [{_}, 0i32], ordering::Weak, "
                 "scope::TileBlock, None, tma::Enabled);")
    launcher = launcher_text(mod, "tileport_derived")
    assert_lines(launcher,
                 "let block_x_2 = 2i32 * block;", 'check_tile_dim("BLOCK_X_2", block_x_2)?;',
                 "let block_div_2 = block.div_euclid(2i32);",
                 ".generics(vec![block.to_string(), n.to_string(), block_x_2.to_string(), "
                 "block_div_2.to_string(), unit_axis(x, 0).to_string(), unit_axis(x, 1).to_string(), "
                 "unit_axis(y, 0).to_string(), unit_axis(y, 1).to_string(), unit_axis(h, 0).to_string(), "
                 "unit_axis(h, 1).to_string()])")
    variant = json.loads(report.files["kernels.json"])["entries"][0]["variants"][0]
    assert variant["derived"] == {"BLOCK_X_2": "(2 * BLOCK)", "BLOCK_DIV_2": "(BLOCK // 2)"} | {
        f"{a}_LEN{i}": "-1" for a in "XYH" for i in (0, 1)}  # the arrays' lengths: dynamic in the capture


def test_float_constants_become_decimal_literals(tmp_path):
    path = write_kernels(tmp_path, """
        EPS = 1e-6

        @ct.kernel
        def fc(x, y, TILE: ConstInt, ALPHA: ct.Constant[float]):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=t * ALPHA + EPS)
    """)
    report = run(path, {"fc": [{"x": "f32", "y": "f32", "ALPHA": 0.25},
                               {"x": "f32", "y": "f32", "ALPHA": -1.5}]})
    mod = module_text(report, path)
    assert report.results[0].entries == ["fc_alpha0p25", "fc_alpham1p5"]
    assert_lines(entry_text(mod, "fc_alpha0p25"),
                 "let {_}: Tile<f32, { [TILE] }> = 0.25f32.broadcast(shape![TILE]);",
                 "let {_}: Tile<f32, { [TILE] }> = 1.0e-6f32.broadcast(shape![TILE]);")
    assert_lines(entry_text(mod, "fc_alpham1p5"),
                 "let {_}: Tile<f32, { [TILE] }> = (-1.5f32).broadcast(shape![TILE]);")
    launcher = launcher_text(mod, "tileport_fc")
    assert "alpha: f64" in launcher
    assert_lines(launcher, "if alpha == 0.25 {", "if alpha == -1.5 {")


def test_infinite_float_literal(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def inf(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=ct.where(t > 0.0, t, float("-inf")))
    """, {"inf": [F32]})
    # not `f32::NEG_INFINITY.broadcast(..)`: the cutile compiler rejects associated consts there
    assert_lines(mod, "let {_}: Tile<f32, { [TILE] }> = constant(f32::NEG_INFINITY, shape![TILE]);")


# ---------------------------------------------------------------- passes: fma, hoisting, tokens


def test_fma_fusion(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def fmak(a, b, c, y, TILE: ConstInt):
            i = ct.bid(0)
            ta = ct.load(a, index=(i,), shape=(TILE,))
            tb = ct.load(b, index=(i,), shape=(TILE,))
            tc = ct.load(c, index=(i,), shape=(TILE,))
            r1 = ta * tb + tc
            r2 = tc + ta * tb
            r3 = tc - ta * tb
            r4 = ta * tb - tc
            r5 = ct.add(ct.mul(ta, tb, flush_to_zero=True), tc, flush_to_zero=True)
            twice = ta * tb
            r6 = twice + twice
            r7 = ct.add(ct.mul(ta, tb, flush_to_zero=True), tc)
            ct.store(y, index=(i,), tile=r1 * r2 * r3 * r4 * r5 * r6 * r7)
    """, {"fmak": [{"a": "f32", "b": "f32", "c": "f32", "y": "f32"}]})
    assert_lines(mod,
                 "let r1: Tile<f32, { [TILE] }> = fma(ta, tb, tc, rounding::NearestEven, ftz::Disabled);",
                 "let r2: Tile<f32, { [TILE] }> = fma(ta, tb, tc, rounding::NearestEven, ftz::Disabled);",
                 "let ta_neg: Tile<f32, { [TILE] }> = negf(ta);",
                 "let r3: Tile<f32, { [TILE] }> = fma(ta_neg, tb, tc, rounding::NearestEven, ftz::Disabled);",
                 "let tc_neg: Tile<f32, { [TILE] }> = negf(tc);",
                 "let r4: Tile<f32, { [TILE] }> = fma(ta, tb, tc_neg, rounding::NearestEven, ftz::Disabled);",
                 "let r5: Tile<f32, { [TILE] }> = fma(ta, tb, tc, rounding::NearestEven, ftz::Enabled);",
                 # two uses of the product, or different flush-to-zero: no fusion
                 "let twice: Tile<f32, { [TILE] }> = ta * tb;",
                 "let r6: Tile<f32, { [TILE] }> = twice + twice;",
                 "let {_}: Tile<f32, { [TILE] }> = mulf(ta, tb, rounding::NearestEven, ftz::Enabled);",
                 "let r7: Tile<f32, { [TILE] }> = {_} + tc;")
    assert mod.count("= fma(") == 5


def test_int_multiply_add_is_not_fused(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def imad(a, y, TILE: ConstInt):
            t = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=t * t + t)
    """, {"imad": [{"a": "i32", "y": "i32"}]})
    assert "fma(" not in mod


def test_loop_invariant_hoisting(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def hoist(x, w, y, n_rows, TILE: ConstInt):
            pid = ct.bid(0)
            nprog = ct.num_blocks(0)
            wt = ct.load(w, index=(0,), shape=(TILE,))
            for row in range(pid, n_rows, nprog):
                t = ct.load(x, index=(row, 0), shape=(1, TILE))
                scale = ct.full((1, TILE), 2.0, ct.float32)
                ct.store(y, index=(row, 0), tile=t * wt * scale * 0.5)
    """, {"hoist": [{"x": "f32", "w": "f32", "y": "f32"}]})
    body = body_of_loop(mod, "for row in")
    before = lines(mod)[:lines(mod).index("for row in (pid..n_rows).step_by(nprog as usize) {")]
    # the constant, the reshape of the invariant row and the literal broadcast move in front of the loop
    for pattern in ("let scale: Tile<f32, { [1, TILE] }> = constant(2.0f32, shape![1, TILE]);",
                    "let {_}: Tile<f32, { [1, TILE] }> = wt.reshape(shape![1, TILE]);",
                    "let {_}: Tile<f32, { [1, TILE] }> = 0.5f32.broadcast(shape![1, TILE]);"):
        assert has_line("\n".join(before), pattern), pattern
        assert not has_line("\n".join(body), pattern), pattern
    assert has_line("\n".join(body), "let t: Tile<f32, { [1, TILE] }> = load_view_tko(&x_view, [row, 0i32], "
                                     "ordering::Weak, scope::TileBlock, None, tma::Enabled);")
    # views are created once, at the top of the kernel
    assert lines(mod).index(next(line for line in lines(mod) if line.startswith("let x_view:"))) < \
        lines(mod).index("let pid: i32 = get_tile_block_id().0;")


def test_accumulator_initial_value_is_hoisted_out_of_the_outer_loop(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def acc_init(a, c, n, TILE: ConstInt):
            for t in range(ct.bid(0), n, ct.num_blocks(0)):
                acc = ct.zeros((TILE,), dtype=ct.float32)
                for k in range(4):
                    acc = acc + ct.astype(ct.load(a, index=(k,), shape=(TILE,)), ct.float32)
                ct.store(c, index=(t,), tile=ct.astype(acc, c.dtype))
    """)
    assert_lines(mod, "let acc_init: Tile<f32, { [TILE] }> = constant(0.0f32, shape![TILE]);")
    assert "let mut acc: Tile<f32, { [TILE] }> = acc_init;" in body_of_loop(mod, "for t in")


def test_memory_tokens_persistent_store_carries_a_token(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def carried(x, y, n_rows, TILE: ConstInt):
            pid = ct.bid(0)
            nprog = ct.num_blocks(0)
            for row in range(pid, n_rows, nprog):
                t = ct.load(x, index=(row, 0), shape=(1, TILE))
                ct.store(y, index=(n_rows - 1 - row, 0), tile=t)
    """, {"carried": [F32]})
    assert_lines(mod,
                 # a store whose index is not the loop variable: ordered across iterations
                 "let y_view: Partition<f32, { [1, TILE] }> = unsafe { make_partition_view(y, shape![1, TILE], "
                 "padding::None, dim_map::Identity, y.token()) };",
                 "let y_token: Token = y.token();",
                 "let mut y_last_op: Token = y_token;")
    assert_lines("\n".join(body_of_loop(mod, "for row in")),
                 "let y_tok: Token = unsafe { store_view_raw(&y_view, t, [{_}, 0i32], Some(y_last_op), "
                 "ordering::Weak, scope::TileBlock, tma::Enabled, None, [false, false]) };",
                 "y_last_op = y_tok;")


def test_memory_tokens_store_at_loop_index_is_unordered(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def parallel(x, y, n_rows, TILE: ConstInt):
            for row in range(ct.bid(0), n_rows, ct.num_blocks(0)):
                ct.store(y, index=(row, 0), tile=ct.load(x, index=(row, 0), shape=(1, TILE)))
    """, {"parallel": [F32]})
    # cuTile lets a store indexed by the loop variable run unordered across iterations: no token at all
    assert "Token" not in entry_text(mod, "parallel")
    assert_lines(mod, "unsafe { store_view_tko_mut(&mut y_out, {_}, [row, 0i32], ordering::Weak, "
                      "scope::TileBlock, None, tma::Enabled) };")


def test_memory_tokens_order_stores_to_one_array(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def twice(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=t)
            ct.store(y, index=(ct.bid(0),), tile=t + t)
    """, {"twice": [F32]})
    assert_lines(mod,
                 "let y_tok: Token = unsafe { store_view_raw(&y_view, t, [{_}], Some(y_token), ordering::Weak, "
                 "scope::TileBlock, tma::Enabled, None, [false]) };",
                 "unsafe { store_view_raw(&y_view_1, {_}, [{_}], Some(y_tok), ordering::Weak, scope::TileBlock, "
                 "tma::Enabled, None, [false]) };")


def test_memory_tokens_in_place_persistent_loop(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def inplace(x, n_rows, TILE: ConstInt):
            for row in range(ct.bid(0), n_rows, ct.num_blocks(0)):
                t = ct.load(x, index=(row, 0), shape=(1, TILE))
                ct.store(x, index=(row, 0), tile=t * 2.0)
    """, {"inplace": [{"x": "f32"}]})
    # cuTile's two loop-carried tokens per array: the last access and the last write (R8)
    assert_lines(mod, "let x_token: Token = x.token();",
                 "let mut x_last_op: Token = x_token;", "let mut x_last_store: Token = x_token;")
    body = "\n".join(body_of_loop(mod, "for row in"))
    assert_lines(body,
                 "let (t, x_tok): (Tile<f32, { [1, TILE] }>, Token) = unsafe { load_view_raw(&x_view, [row, 0i32], "
                 "Some(x_last_store), ordering::Weak, scope::TileBlock, tma::Enabled, None, [false, false], "
                 "shape![1, TILE]) };",
                 "let joined_tok: Token = join_tokens(&[x_last_op, x_tok]);",
                 "let x_tok_1: Token = unsafe { store_view_raw(&x_view_1, {_}, [row, 0i32], Some(joined_tok), "
                 "ordering::Weak, scope::TileBlock, tma::Enabled, None, [false, false]) };",
                 "x_last_op = x_tok_1;", "x_last_store = x_tok_1;")


# ---------------------------------------------------------------- generated names


def _shadowed_calls(entry: str) -> list[str]:
    """Names bound by a `let` and later called as a function in the same entry (a Rust error)."""
    import re
    bound: list[str] = []
    out = []
    for line in lines(entry):
        for name in re.findall(r"\b([a-z_][a-z0-9_]*)\(", line.split("=", 1)[1] if line.startswith("let ") and
                               "=" in line else line):
            if name in bound:
                out.append(f"{name}: {line}")
        m = re.match(r"let (?:mut )?([a-z_][a-z0-9_]*)\s*:", line)
        if m:
            bound.append(m.group(1))
    return out


def test_temporaries_never_shadow_dsl_functions(tmp_path):
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def twice_exp(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            a = 1.0 + ct.exp(t)
            ct.store(y, index=(ct.bid(0),), tile=ct.exp(a) + ct.sqrt(ct.sqrt(a)))
    """, {"twice_exp": [F32]})
    assert _shadowed_calls(entry_text(mod, "twice_exp")) == []


def test_c_arguments_follow_the_kernel_signature(tmp_path):
    report, mod = translate_ok(tmp_path, """
        @ct.kernel
        def two_flags(x, y, SCALE_FIRST: ConstBool, TILE: ConstInt, NEGATE: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if SCALE_FIRST:
                t = t * 2.0
            if NEGATE:
                t = -t
            ct.store(y, index=(ct.bid(0),), tile=t)
    """, {"two_flags": [{"x": "f32", "y": "f32", "SCALE_FIRST": a, "NEGATE": b}
                        for a in (True, False) for b in (True, False)]})
    params = [p["name"] for p in json.loads(report.files["kernels.json"])["entries"][0]["params"]]
    assert params == ["x", "y", "SCALE_FIRST", "TILE", "NEGATE"]
    assert ("fn tileport_two_flags(x: *const TensorDesc, y: *const TensorDesc, scale_first: bool, tile: i32, "
            "negate: bool, grid_x: u32") in mod


@pytest.mark.parametrize("update", ["if k > 2:\n                    acc = acc + s",
                                    "for j in range(4):\n                    acc = acc + s"],
                         ids=["in_if", "in_inner_loop"])
def test_no_hoisting_of_values_updated_in_nested_blocks(tmp_path, update):
    _, mod = translate_ok(tmp_path, f"""
        @ct.kernel
        def nested_update(y, n, TILE: ConstInt):
            acc = ct.zeros((TILE,), dtype=ct.float32)
            for k in range(n):
                s = acc * 2.0
                {update}
            ct.store(y, index=(ct.bid(0),), tile=acc)
    """, {"nested_update": [{"y": "f32", "n": "i32"}]})
    assert has_line("\n".join(body_of_loop(mod, "for k in")), "let s: Tile<f32, { [TILE] }> = acc * {_};")


# ---------------------------------------------------------------- integer casts and literals of scalars


def test_scalar_integer_casts_go_through_a_0d_tile(tmp_path):
    """cutile 0.5.0's convert_scalar refuses integer -> integer: the cast of a 0-d tile, as cuTile emits it."""
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def scalar_casts(y, seed, TILE: ConstInt):
            wide = ct.astype(ct.bid(0), ct.int64) * TILE
            low = ct.astype(seed, ct.int32)
            bits = ct.astype(seed, ct.uint64)
            t = ct.arange(TILE, dtype=ct.int64) + wide + ct.astype(low, ct.int64) + ct.astype(bits, ct.int64)
            ct.store(y, index=(ct.bid(0),), tile=t)
    """, {"scalar_casts": [{"y": "i64", "seed": "i64"}]})
    assert_lines(mod,
                 "let {_}: Tile<i32, { [] }> = scalar_to_tile(bid);",
                 "let {_}: Tile<i64, { [] }> = exti({_});",
                 "let {_}: Tile<i32, { [] }> = trunci_fixed({_}, overflow::None);",
                 "let low: i32 = tile_to_scalar({_});",
                 "let {_}: Tile<u64, { [] }> = bitcast({_});")
    assert "convert_scalar" not in mod


def test_unsigned_constant_past_the_signed_range_is_a_bitcast(tmp_path):
    """cutile 0.5.0 parses an integer literal as the signed type of its width (one it cannot parse becomes 0):
    an unsigned constant at or above 2^(bits - 1) is the bitcast of the signed constant with its bits."""
    _, mod = translate_ok(tmp_path, """
        @ct.kernel
        def unsigned_consts(y, TILE: ConstInt):
            big = ct.full((TILE,), 0x9E3779B9, dtype=ct.uint32)
            small = ct.full((TILE,), 7, dtype=ct.uint32)
            top = ct.full((TILE,), 0xFFFFFFFFFFFFFFFF, dtype=ct.uint64)
            t = ct.astype(big + small, ct.uint64) ^ top
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, ct.int64))
    """, {"unsigned_consts": [{"y": "i64"}]})
    assert_lines(mod,
                 "let big_bits: Tile<i32, { [TILE] }> = constant(-1640531527i32, shape![TILE]);",
                 "let big: Tile<u32, { [TILE] }> = bitcast(big_bits);",
                 "let small: Tile<u32, { [TILE] }> = constant(7u32, shape![TILE]);",
                 "let top_bits: Tile<i64, { [TILE] }> = constant(-1i64, shape![TILE]);",
                 "let top: Tile<u64, { [TILE] }> = bitcast(top_bits);")
    assert "2654435769u32" not in mod

