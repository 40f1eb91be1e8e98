"""Values libraries compute with: tiles filled from computed constants, element types read from pointers,
bitcasts, shifts and integer powers, math on constants (no GPU, no cargo)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file
from tileport.model.ir import walk
from tileport.translate import translate

HEADER = "import triton\nimport triton.language as tl\n\n"


def translated(tmp_path: Path, body: str, configs=None):
    path = tmp_path / "kern.py"
    path.write_text(HEADER + textwrap.dedent(body).lstrip("\n"))
    return path, translate_file(str(path), configs, naming=RUST_NAMING)


def ops(kernel, kind: str, **attrs):
    return [st.op for st in walk(kernel.body) if getattr(st, "op", None) is not None and st.op.kind == kind
            and all(st.op.attr(k) == v for k, v in attrs.items())]


def rust(path: Path) -> str:
    r = translate([str(path)], None)
    assert all(x.ok for x in r.results), [str(x.diagnostic) for x in r.results]
    return r.files["src/kern.rs"]


def test_tl_full_of_computed_constants_and_of_bool(tmp_path):
    path, tr = translated(tmp_path, """
        NEG = -1e30

        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            a = tl.full([BLOCK], NEG * 2, tl.float32)
            b = tl.full((BLOCK,), 2 ** 20 - 1, tl.int32)
            c = tl.full([BLOCK], BLOCK * 2 + 1, dtype=tl.int32)
            keep = tl.full([BLOCK], 1, tl.int1)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            y = tl.where(keep, tl.maximum(x, a) + b + c, x)
            tl.store(y_ptr + offs, y, mask=offs < n)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    fills = {(str(o.ty.dtype), o.args[0].value if hasattr(o.args[0], "value") else None)
             for o in ops(k, "full") + ops(k, "splat")}
    assert ("i32", 2 ** 20 - 1) in fills and ("bool", True) in fills and ("f32", -2e30) in fills
    text = rust(path)
    assert "constant(true, shape![BLOCK])" in text


def test_element_types_of_pointers_and_tiles(tmp_path):
    """`p.dtype.element_ty`, `p.type.element_ty` (pointers) and `x.type.element_ty` (a tile) are dtypes."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs).to(tl.float32)
            acc = tl.zeros([BLOCK], dtype=y_ptr.dtype.element_ty) + x.to(x_ptr.type.element_ty)
            tl.store(y_ptr + offs, acc.to(x.type.element_ty))
    """, {"k": _config({"x_ptr": "f16", "y_ptr": "bf16"})})
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert {str(o.ty.dtype) for o in ops(k, "astype")} >= {"f16", "f32"}
    assert any(str(o.ty.dtype) == "bf16" for o in ops(k, "full") + ops(k, "splat"))


def _config(dtypes: dict):
    from tileport.frontends.base import KernelConfig
    return KernelConfig(({**dtypes, "BLOCK": 128},))


def test_bitcasts_and_float_downcast_rounding(tmp_path):
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            bits = x.to(tl.int16, bitcast=True)
            tl.store(y_ptr + offs, (bits & 0x7FFF).to(tl.float16, bitcast=True))
            tl.store(z_ptr + offs, x.to(tl.float32).to(tl.bfloat16, fp_downcast_rounding="rtne"))
    """, {"k": _config({"x_ptr": "f16", "y_ptr": "f16", "z_ptr": "bf16"})})
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert [str(o.ty.dtype) for o in ops(k, "bitcast")] == ["i16", "f16"]  # the bits, not a conversion
    assert rust(path).count("= bitcast(") == 2


def test_a_bitcast_between_widths_is_a_located_diagnostic(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs).to(tl.int16, bitcast=True).to(tl.float16))
    """, {"k": _config({"x_ptr": "f32"})})
    (d,) = tr.diagnostics
    assert d.construct == "dtype" and "bit widths differ" in d.message and d.loc.line == 7


def test_shifts_and_integer_powers(tmp_path):
    """`>>` is arithmetic on signed and logical on unsigned elements (cutile's shri follows the element type);
    values of a pointer meeting bitwise operators make it an integer pointer; `x ** 2` multiplies, `2 ** BITS`
    shifts."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(w_ptr, y_ptr, BLOCK: tl.constexpr, BITS: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            w = tl.load(w_ptr + offs)
            lo = (w >> 4) & 0xF
            hi = (w.to(tl.uint32) >> 28).to(tl.int32)
            tl.store(y_ptr + offs, lo + (hi << 2) + w ** 3 + 2 ** BITS)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert {p.name: str(p.ty.dtype) for p in k.array_params}["w_ptr"] == "i32"
    assert "pointer `w_ptr`: assumed to hold i32 (the kernel uses its values as integers: bitwise operands, `%`, " \
           "`//`)" in k.notes
    assert sorted(str(o.ty.dtype) for o in ops(k, "binary", op="shr")) == ["i32", "u32"]
    assert len(ops(k, "binary", op="shl")) == 2  # hi << 2, and 1 << BITS
    assert len(ops(k, "binary", op="mul")) == 2  # w * w, then * w
    text = rust(path)
    assert "shri(" in text and "shli_fixed(" in text


def test_shifts_of_floats_are_a_located_diagnostic(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs).to(tl.float32)
            tl.store(x_ptr + offs, x >> 1)
    """)
    (d,) = tr.diagnostics
    assert d.construct == "dtype" and "Triton takes integers" in d.message and d.loc.line == 8


def test_math_on_constants_is_computed_as_triton_does(tmp_path):
    """`tl.math.rsqrt(2.0)` is an f32 0-d tensor in Triton: computed, and it promotes an f16 tile to f32."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(y_ptr + offs, x * tl.math.rsqrt(2.0) + tl.sqrt(2.0) + abs(-1))
    """, {"k": _config({"x_ptr": "f16", "y_ptr": "f32"})})
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert sorted(o.attr("fn") for o in ops(k, "unary")) == ["rsqrt", "sqrt"]
    (mul,) = ops(k, "binary", op="mul")
    assert str(mul.ty.dtype) == "f32"


def test_code_on_a_dtype_test_is_one_entry_per_dtype(tmp_path):
    """`if x.dtype == tl.float16:` bit-twiddles f16 only: no one generic holds both branches, so each dtype
    configuration is its own entry (regression: the test compared the first configuration only, and every
    arm took its branch) and the launcher picks the entry by the arrays' dtypes."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            if x.dtype == tl.float16:
                y = (x.to(tl.int16, bitcast=True) & 0x7FFF).to(tl.float16, bitcast=True)
            else:
                y = tl.abs(x)
            tl.store(y_ptr + offs, y)
    """)
    assert not tr.diagnostics, tr.diagnostics
    k = {k.name: k for k in tr.module.kernels}
    assert sorted(k) == ["k_bf16", "k_f16", "k_f32"]
    assert len(ops(k["k_f16"], "bitcast")) == 2 and not ops(k["k_f16"], "unary")
    assert not ops(k["k_f32"], "bitcast") and not ops(k["k_bf16"], "bitcast")
    text = rust(path)
    assert "if matches!(x_ptr.desc.dtype, dtype::F16) && matches!(y_ptr.desc.dtype, dtype::F16) {" in text


def test_float_remainder_on_tiles_is_pythons(tmp_path):
    """Triton's float `%` is `a - floor(a / b) * b` (the sign of b)."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs).to(tl.float32)
            tl.store(y_ptr + offs, x % 2.5)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    assert [o.attr("fn") for o in ops(k, "unary")] == ["floor"]
    assert [o.attr("op") for o in ops(k, "binary")] == ["div", "mul", "sub"]


def test_loaded_values_split_by_integers_make_the_pointer_an_integer_one(tmp_path):
    """`pos % PAGE` and `pos // PAGE` on values of an unconfigured pointer: positions, not floats; a constexpr
    that reaches a pointer offset is an integer whatever its name says (`scale_off`)."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(pos_ptr, buf_ptr, out_ptr, PAGE: tl.constexpr, scale_off: tl.constexpr, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            pos = tl.load(pos_ptr + row)
            src = (pos // PAGE) * BLOCK + (pos % PAGE) + scale_off + tl.arange(0, BLOCK)
            tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), tl.load(buf_ptr + src).to(tl.uint8))
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    types = {p.name: p.ty for p in k.params}
    assert str(types["pos_ptr"].dtype) in ("i32", "i64") and str(types["scale_off"]) == "Const[int]"
    assert "Tile<u8, { [BLOCK] }> = convert_tile(" in rust(path)  # float -> unsigned: fptoui


def test_a_dtype_constexpr_no_float_type_checks_with_takes_integer_dtypes(tmp_path):
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(w_ptr, out_ptr, W_nbits: tl.constexpr, out_dtype: tl.constexpr, PER: tl.constexpr):
            pid = tl.program_id(0)
            cols = tl.arange(0, PER)
            values = tl.load(w_ptr + pid * PER + cols).to(out_dtype)
            tl.store(out_ptr + pid, tl.sum(values << (cols * W_nbits).to(out_dtype), axis=0))
    """)
    assert not tr.diagnostics, tr.diagnostics
    assert [k.name for k in tr.module.kernels] == [f"k_out_dtype{d}" for d in ("int32", "int16", "int8", "uint8")]
    assert "Tile<u8, { [PER] }> = trunci_fixed(" in rust(path)


def test_an_offset_from_several_loaded_values_retries_the_pointer_still_float(tmp_path):
    """Regression: the offset carried the last loaded operand's pointer, already an integer one, and the retry
    was an internal error ("repeated decision")."""
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(req_ptr, start_ptr, out_ptr, stride, T: tl.constexpr, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            req = tl.load(req_ptr + row)
            start = tl.load(start_ptr + row)
            dst = req * stride + (start % T) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + dst, 1.0)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    types = {p.name: str(p.ty.dtype) for p in k.array_params}
    assert types["req_ptr"] == "i64" and types["start_ptr"] in ("i32", "i64")


def test_pointers_re_cast_to_another_element_type(tmp_path):
    """`p.to(tl.pointer_type(tl.uint8))` reads the same buffer as bytes: gathers/scatters through the parameter's
    base pointer cast with cutile's ptr_to_ptr, offsets counting bytes, no extent check (Triton has none)."""
    path, tr = translated(tmp_path, """
        @triton.jit
        def k(x_ptr, y_ptr, n_bytes, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            src = x_ptr.to(tl.pointer_type(tl.uint8))
            b = tl.load(src + offs, mask=offs < n_bytes, other=0)
            tl.static_assert(src.dtype.element_ty == tl.uint8)
            tl.store(y_ptr.to(tl.pointer_type(tl.uint8)) + offs, b ^ 0xFF, mask=offs < n_bytes)
    """)
    assert not tr.diagnostics, tr.diagnostics
    (k,) = tr.module.kernels
    (g,) = ops(k, "gather")
    (sc,) = ops(k, "scatter")
    assert str(g.ty.dtype) == "u8" and all(o.attr("elem") == "u8" and o.attr("check_bounds") is False for o in (g, sc))
    text = rust(path)
    assert text.count("PointerTile<*mut u8, { [] }> = ptr_to_ptr(") == 2 and ".shape()[" not in text


def test_a_pointer_made_from_an_integer_is_a_located_diagnostic(tmp_path):
    _, tr = translated(tmp_path, """
        @triton.jit
        def k(table_ptr, y_ptr, BLOCK: tl.constexpr):
            base = tl.load(table_ptr + tl.program_id(0)).to(tl.pointer_type(tl.float16))
            tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(base + tl.arange(0, BLOCK)))
    """)
    (d,) = tr.diagnostics
    assert d.construct == "tl.pointer_type" and "kernel's pointer parameters only" in d.message and d.loc.line == 6
