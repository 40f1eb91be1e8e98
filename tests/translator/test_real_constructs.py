"""Constructs and translator slips seen on real cuTile packages (translation level, fast).

The IR diffs of their kernels against cuTile Python: tests/wild/test_compile_unattended.py
(kernels in tests/wild/data/real_constructs.py).
"""

from __future__ import annotations

from tp_helpers import entry_text, has_line, module_text, run, write_kernels


def _entry(tmp_path, body: str, kernel: str = "k", configs=None) -> str:
    path = write_kernels(tmp_path, body)
    report = run(path, configs)
    assert report.ok, [str(r.diagnostic) for r in report.results if not r.ok]
    return entry_text(module_text(report, path), kernel)


def test_inlining_is_hygienic_a_helper_rebinding_its_parameter_keeps_the_callers_variable(tmp_path):
    """A helper's `b = ct.astype(b, ..)` became `let b: Tile<..> = ..` in the caller's block, so the caller's
    `b` (a block index, read after the call) was a tile: `expected i32, found Tile` in cargo."""
    body = _entry(tmp_path, """
        def scaled(t, b):
            b = ct.astype(b, ct.float32)
            s = t * b
            return s

        @ct.kernel
        def k(x, w, y, TILE: ConstInt):
            b = ct.bid(0)
            s = ct.load(x, index=(b, 0), shape=(1, TILE))
            tw = ct.load(w, index=(0, 0), shape=(1, TILE))
            r = scaled(s, tw)
            ct.store(y, index=(b, 0), tile=r + s)
    """)
    assert has_line(body, "let b_1: Tile<f32, { [1, TILE] }> = tw;"), body
    assert has_line(body, "let s_1: Tile<f32, { [1, TILE] }> = s * b_1;"), body
    assert has_line(body, "let sum: Tile<f32, { [1, TILE] }> = r + s;"), body
    assert "[b, 0i32], ordering" in body.split("store_view_tko_mut")[1]


def test_a_spin_lock_condition_hands_its_atomic_token_to_the_loop_carries(tmp_path):
    """The token of the CAS in a `while` condition was used by the body and after the loop, but it is a
    name local to the condition's block in Rust (`locks_tok` not in scope), and cutile-rs carries nothing
    assigned there: the loop computes the test first and breaks, as cuTile's loop does."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, acc, locks, TILE: ConstInt):
            g = ct.bid(0)
            while ct.atomic_cas(locks, g, 0, 1, memory_order=ct.MemoryOrder.ACQUIRE) == 1:
                pass
            a = ct.load(acc, index=(g,), shape=(TILE,))
            ct.store(acc, index=(g,), tile=a + ct.load(x, index=(g,), shape=(TILE,)))
            ct.atomic_xchg(locks, g, 0, memory_order=ct.MemoryOrder.RELEASE)
    """, configs={"k": [{"x": "f32", "acc": "f32", "locks": "i32", "TILE": 128}]})
    assert "while" not in body, body
    end = body.index("load_view_raw(&acc_view")
    loop = body[body.index("loop {"):end]
    assert "atomic_cas_tko(" in loop and loop.count("locks_last_op = locks_tok;") == 2, loop
    assert loop.count("acquire_last_acquire = locks_tok;") == 2, loop
    assert "locks_tok" not in body[end:]
    assert has_line(loop, "let {_}: Token = join_tokens(&[acc_token, acquire_last_acquire]);"), loop


def test_and_or_of_runtime_scalars_short_circuit_as_cutile_does(tmp_path):
    """`a and b` of runtime scalars was `a & b`; cuTile evaluates `b` only when `a` holds: an `if` with a
    bool result (`or`: `if a { a } else { b }`). A constant first operand folds the branch."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, y, TM: ConstInt, TN: ConstInt, FLAG: ConstBool):
            bm = ct.bid(0)
            bn = ct.bid(1)
            if bm < ct.cdiv(x.shape[0], TM) and bn < ct.cdiv(x.shape[1], TN):
                t = ct.load(x, index=(bm, bn), shape=(TM, TN))
                ct.store(y, index=(bn, bm), tile=ct.transpose(t))
            if bm > 2 or bn > 3:
                ct.store(y, index=(bm, bn), tile=ct.zeros((TN, TM), dtype=ct.float32))
            if FLAG and bm > 4:
                ct.store(y, index=(bn, bn), tile=ct.zeros((TN, TM), dtype=ct.float32))
    """, kernel="k_flag1", configs={"k": [{"x": "f32", "y": "f32", "TM": 32, "TN": 64, "FLAG": True}]})
    lines = [ln.strip() for ln in body.splitlines()]
    at = lines.index("let sel: bool = if cond {")  # `and`: the second test computed in the branch
    assert lines[at + 1:at + 8] == ["let x_dim1: i32 = if X_LEN1 == 1 { 1i32 } else { if X_LEN0 == 1 "
                                    "{ x.shape()[0] } else { x.shape()[1] } };",
                                    "let n_1: i32 = ceil_div(x_dim1, TN);", "let cond_1: bool = bn < n_1;",
                                    "cond_1", "} else {", "cond", "};"], lines[at:]
    at = lines.index("let sel_1: bool = if cond_1 {")  # `or`: the first test, else the second
    assert lines[at + 1:at + 6] == ["cond_1", "} else {", "let cond_2: bool = bn > 3i32;", "cond_2", "};"]
    assert "let cond_2: bool = bm > 4i32;" in lines and "if cond_2 {" in lines  # `FLAG and ..`, FLAG true


def test_rank_from_a_scalar_index_and_an_index_read_from_memory(tmp_path):
    """`ct.load(a, i, shape=())` indexes a rank-1 array (one index, not a tuple): the rank was unknown
    ("cannot tell the rank of array parameter"). An index loaded from memory makes its array an index
    array (i64, as token ids are), converted to i32 for the view access as cuTile does (`trunci`)."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, ids, scale, y, TILE: ConstInt):
            row = ct.bid(0)
            j = row + 1
            s = ct.load(scale, j, shape=())
            for i in range(2):
                ct.store(scale, i, tile=s)
            src = ct.load(ids, j, shape=())
            t = ct.load(x, index=(src, 0), shape=(1, TILE))
            ct.store(y, index=(row, 0), tile=t * s)
    """)
    assert "ids: &Tensor<i64, { [IDS_LEN0] }>" in body and "scale: &Tensor<E, { [SCALE_LEN0] }>" in body, body
    assert has_line(body, "let src_i32: Tile<i32, { [] }> = trunci_fixed(src, overflow::None);"), body
    assert "load_view_tko(&x_view, [src_i32_s, 0i32]," in body


def test_an_index_that_may_be_a_tuple_leaves_the_rank_unknown(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            idx = (ct.bid(0), 0)
            ct.store(y, idx, tile=ct.load(x, index=(0, 0), shape=(1, TILE)))
    """)
    (result,) = run(path).results
    assert not result.ok and "rank of array parameter `y`" in result.diagnostic.message


def test_constants_without_values_stay_generic_or_runtime(tmp_path):
    """No values known: a float constant is a runtime parameter even when a bool of the kernel is
    enumerated (it was refused once anything was pinned); int constants compared with each other or a
    literal stay const generics, the comparison computed from them (it was refused)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, eps: ct.Constant[float], MODE: ConstInt, FLAG: ConstBool, N: ConstInt, TILE: ConstInt):
            row = ct.bid(0)
            t = ct.load(x, index=(row, 0), shape=(1, TILE))
            if MODE == 2:
                t = t * 2.0
            if FLAG:
                t = t + eps
            if N * TILE < x.shape[1]:
                t = t / eps
            ct.store(y, index=(row, 0), tile=t)
    """)
    report = run(path)
    (result,) = report.results
    assert result.ok, result.diagnostic
    assert result.entries == ["k_flag0", "k_flag1"]
    body = entry_text(module_text(report, path), "k_flag1")
    assert body.splitlines()[0].strip().endswith("eps: f32) {"), body
    assert "const MODE: i32, const N: i32, const TILE: i32" in body.splitlines()[0]
    assert has_line(body, "let cond: bool = MODE == 2i32;"), body
    assert has_line(body, "let cond_1: bool = (N * TILE) < x_dim1;"), body


def test_a_constant_whose_branch_changes_a_type_still_needs_values(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, MODE: ConstInt, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if MODE == 2:
                t = ct.astype(t, ct.float16)
            ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    (result,) = run(path).results
    assert not result.ok and result.diagnostic.construct == "specialization", result.diagnostic
    assert "MODE" in result.diagnostic.message


def test_an_int_constant_only_tested_for_truth_is_a_flag_with_an_entry_per_value(tmp_path):
    """`HAS_BETA: ConstInt` passed as `int(beta is not None)`, tested by `if HAS_BETA:` around a variable
    defined under it: neither generic nor runtime works (the variable exists for one value only), so it was
    refused without values; its values are 0 and 1. `MODE`, compared with 2, still needs values."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, db, HAS_BETA: ConstInt, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if HAS_BETA:
                acc = t * 2.0
            if not HAS_BETA:
                t = t + 1.0
            ct.store(y, index=(ct.bid(0),), tile=t)
            if HAS_BETA:
                ct.store(db, index=(ct.bid(0),), tile=acc)

        @ct.kernel
        def m(x, y, MODE: ConstInt, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if MODE == 2:
                acc = t * 2.0
            if MODE == 2:
                ct.store(y, index=(ct.bid(0),), tile=acc)
    """)
    report = run(path)
    results = {r.kernel: r for r in report.results}
    k, m = results["k"], results["m"]
    assert k.ok, k.diagnostic
    assert k.entries == ["k_has_beta0", "k_has_beta1"]
    text = module_text(report, path)
    assert "&mut db_out" not in entry_text(text, "k_has_beta0") and "&mut db_out" in entry_text(text, "k_has_beta1")
    assert "if has_beta == 1 {" in text  # the launcher picks the entry by the argument's value
    assert not m.ok and m.diagnostic.construct == "specialization" and "MODE" in m.diagnostic.message


def test_a_dtype_called_on_a_value_is_that_value_of_the_dtype(tmp_path):
    """`ct.float32(0.0)` (a typed zero to accumulate into) was "this call is not supported in kernels"."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            total = ct.float32(0.0) + ct.sum(ct.astype(t, ct.float32), 0)
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(total, ct.float16) + ct.float16(1))
    """, configs={"k": [{"x": "f32", "y": "f16", "TILE": 128}]})
    assert has_line(body, "let c: Tile<f32, { [] }> = 0.0f32.broadcast(shape![]);"), body
    assert has_line(body, "let c_1: Tile<f16, { [] }> = constant_lit(1.0f32, shape![]);"), body


def test_a_variable_defined_in_both_branches_of_a_runtime_if_is_the_ifs_result(tmp_path):
    """`if n > 4: res = a` / `else: res = b`, `res` read after: "undefined name `res`" once; cuTile yields
    it from the `if`."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if n > 4:
                res = ct.exp(t)
            else:
                res = t + 1.0
            ct.store(y, index=(ct.bid(0),), tile=res)
    """, configs={"k": [{"x": "f32", "y": "f32", "n": "i32", "TILE": 128}]})
    lines = [ln.strip() for ln in body.splitlines()]
    at = lines.index("let sel: Tile<f32, { [TILE] }> = if cond {")
    assert lines[at + 1:at + 3] == ["let res: Tile<f32, { [TILE] }> = exp(t);", "res"], lines[at:]
    assert has_line(body, "};") and "store_view_tko_mut(&mut y_out, res," in body, body


def test_both_branches_defining_several_new_variables_yield_each(tmp_path):
    """`if n > 4: a = ..; b = ..` / `else: b = ..; a = ..`, both read after: was "one such variable is
    supported". cutile-rs yields no tuple from an `if`: each is declared before it (a zero no path reads)
    and assigned by both branches, as the common type of the branches' values."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if n > 4:
                a = t
                b = ct.exp(t)
                s = n * 2
            else:
                b = t + 1.0
                a = t
                s = 1
            ct.store(y, index=(ct.bid(0),), tile=a + b + s)
    """, configs={"k": [{"x": "f32", "y": "f32", "n": "i32", "TILE": 128}]})
    lines = [ln.strip() for ln in body.splitlines()]
    at, orelse = lines.index("if cond {"), lines.index("} else {")
    assert lines[at - 3:at] == ["let mut a_1: Tile<f32, { [TILE] }> = 0.0f32.broadcast(shape![TILE]);",
                                "let mut b_1: Tile<f32, { [TILE] }> = 0.0f32.broadcast(shape![TILE]);",
                                "let mut s_1: i32 = 0i32;"], lines[:at]
    assert lines[orelse - 3:orelse] == ["a_1 = a;", "b_1 = b;", "s_1 = s;"], lines
    end = lines.index("}", orelse)
    assert lines[end - 3:end] == ["a_1 = a;", "b_1 = b;", "s_1 = 1i32;"], lines
    assert has_line(body, "let sum: Tile<f32, { [TILE] }> = a_1 + b_1;"), body


def test_a_branch_missing_one_of_several_variables_is_located(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, n, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if n > 4:
                a = t
                b = t
            else:
                a = t + 1.0
                if n > 2:
                    b = t
                else:
                    b = a
            ct.store(y, index=(ct.bid(0),), tile=a + b)
    """)
    (result,) = run(path).results
    assert result.ok, result.diagnostic


def test_a_fill_computed_from_constants_is_a_literal_per_value(tmp_path):
    """`ct.full((TILE,), K * 2 + 3, ..)` was refused; cuTile folds it: one entry per value of K (computed
    from K when no value is known)."""
    src = """
        @ct.kernel
        def k(y, TILE: ConstInt, K: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.full((TILE,), K * 2 + 3, dtype=ct.float32))
    """
    body = _entry(tmp_path, src, kernel="k_k4", configs={"k": [{"y": "f32", "TILE": 128, "K": 4}]})
    assert has_line(body, "let c: Tile<f32, { [TILE] }> = constant(11.0f32, shape![TILE]);"), body
    body = _entry(tmp_path, src)
    assert body.splitlines()[0].strip().startswith("pub unsafe fn k<const TILE: i32, const K: i32,"), body
    assert has_line(body, "let fill: i32 = ((K * 2i32) + 3i32);"), body


def test_integer_power_of_runtime_values_is_refused_as_cutile_refuses_it(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(a, y, n, TILE: ConstInt):
            t = ct.load(a, index=(ct.bid(0) ** 2 + n,), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    (result,) = run(path).results
    d = result.diagnostic
    assert d.construct == "operator" and (d.loc.line, d.loc.col) == (8, 27) and "cuTile Python" in d.message, d


def test_a_factory_argument_every_call_gives_the_same_value_is_a_constant(tmp_path):
    """`def make(occupancy): @ct.kernel(occupancy=occupancy) ...` with `K = make(4)` in the file: the kernel
    is that one kernel (its hint 4); with calls that differ, the argument is a located `closure` refusal."""
    src = """
        def make(occupancy, scale):
            @ct.kernel(occupancy=occupancy)
            def k(x, y, TILE: ConstInt):
                t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
                ct.store(y, index=(ct.bid(0),), tile=t * scale)
            return k

        K = make(4, scale=0.5)
    """
    path = write_kernels(tmp_path, src)
    report = run(path)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    text = module_text(report, path)
    assert "#[cutile::entry(optimization_hints = (default = (occupancy = 4,),))]" in text
    assert "0.5f32" in entry_text(text, "k")
    path = write_kernels(tmp_path, src.replace("K = make(4, scale=0.5)", "K = make(4, scale=0.5)\n        K2 = make(2, scale=0.5)"),
                         name="two.py")
    (result,) = run(path).results
    assert result.diagnostic.construct == "closure" and "occupancy" in result.diagnostic.message


def test_an_early_return_guards_the_rest_of_the_kernel(tmp_path):
    """`if c: ..; return` then more statements: the port had `return;` in a branch, which cutile-rs refuses
    ("`return` is only supported at the top level"); the rest now runs in the branches that do not return,
    nested returns included."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, y, a, b, TILE: ConstInt):
            row = ct.bid(0)
            if a > 0:
                if b > 0:
                    return
                ct.store(y, index=(row,), tile=ct.zeros((TILE,), dtype=ct.float32))
            ct.store(y, index=(row + 1,), tile=ct.load(x, index=(row,), shape=(TILE,)))
    """, configs={"k": [{"x": "f32", "y": "f32", "a": "i32", "b": "i32", "TILE": 128}]})
    assert "return" not in body, body
    lines = [ln.strip() for ln in body.splitlines()]
    at = lines.index("if cond {")
    shape = [("if" if ln.startswith("if ") else ln) for ln in lines[at:] if ln.startswith(("if ", "}"))
             or "[sum]" in ln or "[row]" in ln and "store" in ln]
    assert shape == ["if", "if", "} else {", "let y_tok: Token = unsafe { store_view_raw(&y_view, c, [row], Some(y_token), ordering::Weak, "
                     "scope::TileBlock, tma::Enabled, None, [false]) };",
                     "unsafe { store_view_raw(&y_view_1, x_tile, [sum], Some(y_tok), ordering::Weak, scope::TileBlock, "
                     "tma::Enabled, None, [false]) };", "}", "} else {",
                     "unsafe { store_view_tko_mut(&mut y_out, x_tile, [sum], ordering::Weak, scope::TileBlock, None, "
                     "tma::Enabled) };", "}", "}"], shape


def test_casts_from_and_to_bool_as_cutile_converts_them(tmp_path):
    """Refused once ("casts from or to bool are not supported yet"): bool -> float `itof` and bool -> int
    `exti` (unsigned), float -> bool `ftoi` toward zero, int -> bool a comparison with zero."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, y, z, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            m = t > 0.5
            i = ct.astype(m, ct.int32)
            f = ct.astype(m, ct.float32) + ct.astype(ct.astype(t, ct.bool_), ct.float32)
            ct.store(y, index=(ct.bid(0),), tile=f)
            ct.store(z, index=(ct.bid(0),), tile=ct.astype(ct.astype(i, ct.bool_), ct.int32))
    """, configs={"k": [{"x": "f32", "y": "f32", "z": "i32", "TILE": 128}]})
    assert has_line(body, "let m_f32: Tile<f32, { [TILE] }> = itof(m, rounding::NearestEven);"), body
    assert has_line(body, "let i: Tile<i32, { [TILE] }> = exti(m);"), body
    assert has_line(body, "let t_bool: Tile<bool, { [TILE] }> = ftoi(t, rounding::NearestIntToZero);"), body
    assert "cmpi(i, " in body and "predicate::NotEqual" in body, body


def test_a_gather_from_a_0d_array_is_located_not_an_internal_error(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, g, TILE: ConstInt):
            s = ct.gather(g, (), check_bounds=False)
            ct.store(x, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)) * s)
    """)
    (result,) = run(path).results
    d = result.diagnostic
    assert d.construct == "ct.gather" and (d.loc.line, d.loc.col) == (8, 9) and "0-d array" in d.message, d


def test_bitwise_on_a_dtype_conditional_integer_type_gets_one_entry_per_dtype(tmp_path):
    """`it = ct.int32 if a.dtype == ct.float32 else ct.int16` and a literal of `it`: "literal of generic
    integer type E2" (cutile-rs spells no such literal); now one entry per dtype, each with its literal."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(a, y, TILE: ConstInt):
            t = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
            it = ct.int32 if a.dtype == ct.float32 else ct.int16
            bits = ct.bitcast(t, it)
            mask = ct.full((TILE,), 0x7F, dtype=it)
            ct.store(y, index=(ct.bid(0),), tile=ct.bitcast((bits & ~mask) | (bits ^ mask), a.dtype))
    """)
    report = run(path, {"k": [{"a": "f32", "y": "f32", "TILE": 128}, {"a": "f16", "y": "f16", "TILE": 128}]})
    (result,) = report.results
    assert result.ok and result.entries == ["k_f32", "k_f16"], result.diagnostic
    text = module_text(report, path)
    assert has_line(entry_text(text, "k_f32"), "let mask: Tile<i32, { [TILE] }> = constant(127i32, shape![TILE]);")
    assert has_line(entry_text(text, "k_f16"), "let mask: Tile<i16, { [TILE] }> = constant(127i16, shape![TILE]);")


def test_a_scalar_annotated_scalarint64_is_an_i64_parameter(tmp_path):
    """cuTile launches a Python int as an int32 unless the parameter says `ct.ScalarInt64`: the port's
    parameter must be the i64 cuTile compiles (seeds, offsets past 2^31), imported name or attribute."""
    body = _entry(tmp_path, """
        from cuda.tile import ScalarInt64

        @ct.kernel
        def k(x, y, seed: ct.ScalarInt64, offset: ScalarInt64, n, TILE: ConstInt):
            b = ct.bid(0)
            t = ct.load(x, index=(b,), shape=(TILE,))
            ct.store(y, index=(b,), tile=t + ct.astype(seed + offset + n, ct.float32))
    """, configs={"k": [{"x": "f32", "y": "f32", "TILE": 128}]})
    assert "seed: i64" in body and "offset: i64" in body and "n: i32" in body, body


def test_a_token_ordered_load_reassigned_in_a_loop_binds_a_fresh_name(tmp_path):
    """`acc = ct.load(out, ..)` (the array stored after it: the load is token-ordered and its handler binds
    `(value, token)` itself), then `acc = acc + ..` in a loop: was "`load` results cannot be reassigned in
    loops or branches yet". The load binds a fresh name, the loop variable is `let mut` of it; a load
    reassigned inside the loop is assigned from its fresh name."""
    body = _entry(tmp_path, """
        @ct.kernel
        def k(x, out, n, TILE: ConstInt):
            b = ct.bid(0)
            acc = ct.load(out, index=(b,), shape=(TILE,))
            last = ct.load(out, index=(b,), shape=(TILE,))
            for i in range(n):
                acc = acc + ct.load(x, index=(i,), shape=(TILE,))
                last = ct.load(out, index=(i,), shape=(TILE,))
            ct.store(out, index=(b,), tile=acc + last)
    """, configs={"k": [{"x": "f32", "out": "f32", "n": "i32", "TILE": 128}]})
    lines = [ln.strip() for ln in body.splitlines()]
    assert "let mut acc: Tile<f32, { [TILE] }> = acc_value;" in lines, body
    assert "let mut last: Tile<f32, { [TILE] }> = last_value;" in lines, body
    loop = lines[next(i for i, ln in enumerate(lines) if ln.startswith("for i in")):]
    assert "last = last_value_1;" in loop and any(ln.startswith("let (last_value_1, ") for ln in loop), body
