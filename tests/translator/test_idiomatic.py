"""The idiomatic rendering (tileport.emit.rust.idiom, launch.py), translate-only: what it writes, what it keeps of
the faithful rendering (the C ABI, the manifest's parameters), and the committed crate's counts.

The proof that both renderings compile to the same Tile IR and machine code is test_idiomatic_proof.py (cargo) and
bench/results/idiomatic-vs-faithful.json (eval/idiomatic_proof.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport import cli
from tileport.corpus import translate_corpus
from tp_helpers import module_text, run, write_kernels

REPO = Path(__file__).resolve().parents[2]
CRATE = REPO / "rust"
KERNELS = REPO / "src" / "tileport" / "ops" / "kernels"


def idiomatic(path: Path, configs=None) -> str:
    report = run(path, configs, faithful=False)
    assert report.ok, [str(r.diagnostic) for r in report.results]
    return module_text(report, path)


@pytest.fixture(scope="module")
def corpus_files():
    """Both renderings of the corpus (unformatted), by relative path."""
    return translate_corpus(None).files, translate_corpus(None, faithful=True).files


def test_vector_add_reads_like_cutile_rs(tmp_path):
    path = tmp_path / "vector_add.py"
    path.write_text((KERNELS / "vector_add.py").read_text())
    text = idiomatic(path, {"vector_add_kernel": [{"a": "f32", "b": "f32", "c": "f32", "TILE": 1024}]})
    device = text[:text.index("use crate::support::*;")]
    assert "pub fn vector_add_kernel<" in device and "unsafe" not in device
    assert "c: &mut Tensor<f32, { [TILE] }>" in device  # the block's own tile of the output
    assert "c.store(ta + tb);" in device  # the sum folded into its one use
    assert "let a_tiles = view(a, shape![TILE]);" in device  # cuTile's default load: no padding, no modes
    assert "ordering::" not in device and "tma::" not in device
    assert "macro_rules!" not in text and 'pub extern "C" fn tileport_vector_add_kernel(' in text


def test_faithful_keeps_one_operation_per_line(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)) * 2.0)
    """)
    configs = {"k": [{"x": dt, "y": dt, "TILE": 128} for dt in ("f32", "f16")]}
    faithful = module_text(run(path, configs), path)
    assert "pub unsafe fn k<" in faithful and "make_partition_view(" in faithful and "macro_rules! launch" in faithful
    text = idiomatic(path, configs)
    assert "pub fn k<" in text and "make_partition_view(" not in text and "macro_rules!" not in text


def test_cli_faithful_flag(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))
    """)
    for flag, entry in (([], "pub fn k<"), (["--faithful"], "pub unsafe fn k<")):
        out = tmp_path / f"crate{len(flag)}"
        result = CliRunner().invoke(cli.app, ["translate", str(path), "-o", str(out), *flag])
        assert result.exit_code == 0, result.output
        assert entry in (out / "src" / "kern.rs").read_text()
    assert (tmp_path / "crate0" / "src" / "tiles.rs").is_file()
    assert not (tmp_path / "crate1" / "src" / "tiles.rs").exists()


def test_operands_are_parenthesized_by_precedence(tmp_path):
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(a, b, c, y, TILE: ConstInt):
            i = ct.bid(0)
            ta = ct.load(a, index=(i,), shape=(TILE,))
            tb = ct.load(b, index=(i,), shape=(TILE,))
            tc = ct.load(c, index=(i,), shape=(TILE,))
            out = (ta + tb) / tc - ta / (tb - tc)
            ct.store(y, index=(i,), tile=out)
    """)
    text = idiomatic(path, {"k": [{"a": "f32", "b": "f32", "c": "f32", "y": "f32", "TILE": 128}]})
    assert "let out = (ta + tb) / tc - ta / (tb - tc);" in text


def test_source_names_comments_and_docstrings_are_kept(tmp_path):
    path = write_kernels(tmp_path, '''
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            """Scale a row.

            Twice."""
            i = ct.bid(0)
            # the row, doubled
            doubled = ct.load(x, index=(i,), shape=(TILE,)) * 2.0  # trailing note
            ct.store(y, index=(i,), tile=ct.exp(doubled))
    ''')
    text = idiomatic(path, {"k": [{"x": "f32", "y": "f32", "TILE": 128}]})
    assert "    /// Scale a row.\n    ///\n    /// Twice.\n" in text
    lines = [line.strip() for line in text.splitlines()]
    at = lines.index("// the row, doubled")
    assert lines[at + 1] == "// trailing note" and lines[at + 2].startswith("let x_tile")
    assert any(line.startswith("let doubled = ") for line in lines)  # a source name stays bound


def test_scalar_functions_keep_their_type(tmp_path):
    """`min` / `max` / `ceil_div` of i32 scalars stay typed `let`s with plain operands: cutile types an
    unannotated one, or one written inside another expression, by the kernel's element type."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            n = ct.num_tiles(x, axis=0, shape=(TILE,))
            last = min(ct.bid(0) + 1, n - 1)
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(max(last - 1, 0),), shape=(TILE,)))
    """)
    text = idiomatic(path, {"k": [{"x": "f16", "y": "f16", "TILE": 128}, {"x": "f32", "y": "f32", "TILE": 128}]})
    lines = [line.strip() for line in text.splitlines()]
    assert [line.split(" = ")[0] for line in lines if re.search(r"\b(min|max)\(", line)] == \
        ["let last: i32", "let hi: i32"], lines
    assert not any(re.search(r"\b(min|max)\([^)]*[-+]", line) for line in lines)


def test_block_ids_stay_bound_before_a_helper_call(tmp_path):
    """`ct.bid(0)` written inside a load's index is bound first: cutile cannot type `get_tile_block_id().0` passed
    to a `tiles` helper (an inlined function); an operator takes it as it is."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y):
            t = ct.load(x, index=(ct.bid(0),), shape=(16,))
            ct.store(y, index=(ct.bid(0) + ct.num_blocks(0) - 1,), tile=t)
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "y": "f32"}]})
    calls = [line.strip() for line in text.splitlines() if "load(" in line or "store(" in line]
    assert calls and not any("get_tile_block_id" in line or "get_num_tile_blocks" in line for line in calls), calls
    assert "get_tile_block_id().0 + get_num_tile_blocks().0 - 1i32" in text


def test_method_chains_stay_bound_before_a_helper_call(tmp_path):
    """A 0-d tile broadcast into a product (`s.reshape(..).broadcast(..)`, a method called on a method call's
    value) is bound before the store helper takes it: cutile cannot type the chain inside an inlined function's
    argument. One method call there is taken as it is (softmax's `exp_approx(t - m.broadcast(..))`)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, scale, y, TILE: ConstInt):
            row = ct.bid(0)
            s = ct.load(scale, 0, shape=())
            t = ct.load(x, index=(0, row), shape=(1, TILE))
            ct.store(y, index=(0, row), tile=t * s)
    """)
    text = idiomatic(path, {"k": [{"x": "f16", "scale": "f16", "y": "f16", "TILE": 128}]})
    lines = [line.strip() for line in text.splitlines()]
    assert "let prod = t * s.reshape(shape![1, 1]).broadcast(shape![1, TILE]);" in lines, lines
    assert "store(&mut y_tiles, prod, [0i32, row]);" in lines, lines


def test_calls_stay_bound_before_a_load_or_store_helper(tmp_path):
    """A store helper (generic in the element type) takes no call (`maxf(..)`): cutile cannot type it inside the
    helper's argument. An output's own `Tensor::store` does (the corpus relu: `y.store(maxf(..))`)."""
    text = idiomatic(REPO / "src" / "tileport" / "ops" / "triton_kernels" / "relu.py")
    lines = [line.strip() for line in text.splitlines()]
    assert "let v = maxf(x, c_1, nan::Disabled, ftz::Disabled);" in lines, lines
    assert "store_no_tma(&mut y_ptr_tiles, v, [pid]);" in lines, lines  # a Triton store: no TMA (memory_paths.py)
    assert "y.store(maxf(tx, c, nan::Disabled, ftz::Disabled));" in (CRATE / "src" / "relu.rs").read_text()


def test_kernels_with_one_body_share_it(tmp_path):
    path = write_kernels(tmp_path, '''
        def body(x, y, TILE):
            """The shared part."""
            i = ct.bid(0)
            ct.store(y, index=(i, 0), tile=ct.exp(ct.load(x, index=(i, 0), shape=(1, TILE))))

        @ct.kernel(occupancy=2)
        def k2(x, y, TILE: ConstInt):
            body(x, y, TILE)

        @ct.kernel(occupancy=4)
        def k4(x, y, TILE: ConstInt):
            body(x, y, TILE)
    ''')
    config = [{"x": "f32", "y": "f32", "TILE": 128}]
    text = idiomatic(path, {"k2": config, "k4": config})
    assert text.count("    /// The shared part.\n    fn body<") == 1
    assert text.count("body::<TILE, X_LEN0, X_LEN1, Y_LEN0, Y_LEN1>(x, y);") == 2


def test_shared_bodies_of_one_kernel_get_distinct_names():
    """Groups of one kernel's entries (different generics, each group one body) share one function each, named
    `<kernel>_body`, `<kernel>_body_1`, .., each called by its own group."""
    text = idiomatic(REPO / "tests" / "triton" / "data" / "library.py")
    names = re.findall(r"^    fn (masked_last_kernel_body\w*)<", text, re.M)
    assert names == ["masked_last_kernel_body", "masked_last_kernel_body_1", "masked_last_kernel_body_2"], names
    assert all(text.count(f"{n}::<") >= 1 for n in names)


def test_owned_outputs_only_where_cutile_passes_the_same_parameters(tmp_path):
    """An output is a block's `&mut Tensor` only when stored once at the block's tile and last among the entry's
    parameters (cutile passes it with its partition's shape and strides after it)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def last(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))

        @ct.kernel
        def first(y, x, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))

        @ct.kernel
        def shifted(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0) + 1,), tile=ct.load(x, index=(ct.bid(0),), shape=(TILE,)))
    """)
    config = [{"x": "f32", "y": "f32", "TILE": 128}]
    text = idiomatic(path, {"last": config, "first": config, "shifted": config})
    assert text.count("&mut Tensor") == 1 and "y: &mut Tensor<f32, { [TILE] }>" in text
    assert text.count("view_mut(y, shape![TILE])") == 2


def test_entries_split_by_dtype_are_chosen_by_the_descriptors_dtype(tmp_path):
    """A kernel compiled per dtype (its body depends on `a.dtype`) has one entry per dtype; the launcher picks it
    by the checked array's descriptor (`a.desc.dtype`)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(a, y, TILE: ConstInt):
            t = ct.load(a, index=(ct.bid(0),), shape=(TILE,))
            it = ct.int32 if a.dtype == ct.float32 else ct.int16
            ct.store(y, index=(ct.bid(0),), tile=ct.bitcast(ct.bitcast(t, it) ^ 1, a.dtype))
    """)
    text = idiomatic(path, {"k": [{"a": dt, "y": dt, "TILE": 128} for dt in ("f32", "f16")]})
    assert "pub fn k_f32<" in text and "pub fn k_f16<" in text
    assert "if matches!(a.desc.dtype, dtype::F32) && matches!(y.desc.dtype, dtype::F32) {" in text
    assert "matches!(a.dtype" not in text


def test_a_load_cast_to_f32_is_one_helper_call(tmp_path):
    """`ct.astype(ct.load(..), ct.float32)`: one `load_f32` (`load_no_tma_f32` without TMA); a loaded tile read
    again keeps its own `let`."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(a, b, c, y, TILE: ConstInt):
            bid = ct.bid(0)
            ta = ct.astype(ct.load(a, index=(bid,), shape=(TILE,)), ct.float32)
            tb = ct.astype(ct.load(b, index=(bid,), shape=(TILE,), allow_tma=False), ct.float32)
            tc = ct.load(c, index=(bid,), shape=(TILE,))
            t = ta * tb + ct.astype(tc, ct.float32) + ct.astype(tc * tc, ct.float32)
            ct.store(y, index=(bid,), tile=t)
    """)
    text = idiomatic(path, {"k": [{"a": "f16", "b": "f16", "c": "f16", "y": "f32", "TILE": 128}]})
    assert "let ta: Tile<f32, { [TILE] }> = load_f32(&a_tiles, [bid]);" in text
    assert "let tb: Tile<f32, { [TILE] }> = load_no_tma_f32(&b_tiles, [bid]);" in text
    assert "let tc: Tile<f16, { [TILE] }> = load(&c_tiles, [bid]);" in text


def test_an_owned_output_stores_a_cast_through_one_helper(tmp_path):
    """An output the block owns, stored as a cast of the value before: one `store_cast` (cutile types a cast by
    its `let` only, not inside `Tensor::store`); the helper takes no call as its operand (a generic helper)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            ct.store(y, index=(ct.bid(0),), tile=ct.astype(ct.maximum(t, 0.0) * 2.0, y.dtype))
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "y": "f16", "TILE": 128}]})
    assert "let hi = maxf(t, " in text and "store_cast(y, hi * c_1);" in text
    assert "convert_tile(" not in text[:text.index("use crate::support::*;")]


def _launcher(text: str, symbol: str) -> str:
    start = text.index(f'pub extern "C" fn {symbol}(')
    return text[start:text.index("\n}\n", start)]


def test_a_boolean_specialized_both_ways_indexes_a_table_of_its_entries(tmp_path):
    """Entries for both values of one boolean: the launcher indexes them by it; no call is left unspecialized.
    Array descriptors cross as `Desc`, the grid goes straight to `launch`, checks that return the `Launch` are
    chained, integer constants are given together (`ints`), a float scalar without a name (`arg`)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, scale: float, n: int, TILE: ConstInt, BLOCK: ConstInt, UP: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if UP:
                t = t * scale
            ct.store(y, index=(ct.bid(0),), tile=t + n + BLOCK)
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "y": "f32", "TILE": 128, "BLOCK": 2, "UP": up}
                                  for up in (True, False)]})
    launcher = _launcher(text, "tileport_k")
    assert "let entry = [crate::entry!(kern::k_up0), crate::entry!(kern::k_up1)][up as usize];" in launcher
    assert "unspecialized" not in launcher and "if up" not in launcher
    assert "fn tileport_k(x: Desc, y: Desc, scale: f32, n: i32," in launcher
    assert 'launch("k", [grid_x, grid_y, grid_z], device_id, stream, |l| {' in launcher
    assert re.search(r"l\.require\(&\[x, y\], dtype::F32\)\?\.tiles\(", launcher)
    assert ".ints(&[tile, block])" in launcher and ".arg(scale)" in launcher and '.scalar("n", n)' in launcher
    assert "let call = l.call(entry)" in launcher  # a by-value builder: no `let mut call`


def test_entries_selected_by_several_constants_are_a_table(tmp_path):
    """Entries selected by several booleans: a table of them (`Entries`) written before the launcher, read by
    `l.entry` (a call no entry is specialized for is an error); entries whose launches differ get a table per
    launch, found in turn (`Entries::find`)."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt, NEG: ConstBool, WIDE: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if NEG:
                t = -t
            if WIDE:
                ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, ct.float32))
            else:
                ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    one = [{"x": "f32", "y": "f32", "TILE": 128, "NEG": neg, "WIDE": wide}
           for neg, wide in ((False, False), (True, False), (True, True))]
    text = idiomatic(path, {"k": one})
    assert "const K: Entries<bool, 2> = Entries {" in text and 'names: ["NEG", "WIDE"],' in text
    assert "([true, true], crate::entry!(kern::k_wide1_neg1))," in text
    assert "let entry = l.entry(&K, [neg, wide])?;" in _launcher(text, "tileport_k")
    both = [{"x": "f16", "y": "f32", "TILE": 128, "NEG": neg, "WIDE": True} for neg in (False, True)]
    text = idiomatic(path, {"k": both + [{"x": "f32", "y": "f32", "TILE": 128, "NEG": neg, "WIDE": False}
                                         for neg in (False, True)]})
    assert "const K_0: Entries<bool, 2>" in text
    assert "if let Some(entry) = K_0.find([neg, wide]) {" in _launcher(text, "tileport_k")


def test_variants_covering_a_boolean_make_the_last_one_the_fallthrough(tmp_path):
    """Entries whose launches differ (one per dtype rule of a boolean) and cover both of its values: the last
    one is launched without a test, and no unspecialized error follows it."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt, WIDE: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if WIDE:
                ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, ct.float32))
            else:
                ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    text = idiomatic(path, {"k": [{"x": "f16", "y": "f32", "TILE": 128, "WIDE": True},
                                  {"x": "f32", "y": "f32", "TILE": 128, "WIDE": False}]})
    launcher = _launcher(text, "tileport_k")
    assert launcher.count("if ") == 1 and "if wide {" in launcher
    assert "unspecialized" not in launcher


def test_a_kernel_cuTile_python_does_not_launch_keeps_cutiles_claims(tmp_path):
    """The launch claims cuTile Python's divisibility by default; a Triton port (no `launch_unit_axes`) asks for
    cutile's own (`cutile_claims`) and passes its arrays with dynamic lengths."""
    import dataclasses

    from tileport.emit.rust.ffi import KernelGroup
    from tileport.emit.rust.launch import emit_launcher
    from tileport.emit.rust.names import RUST_NAMING
    from tileport.frontends.cutile import translate_file
    from tp_helpers import kernel_configs
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0), 0), tile=ct.load(x, index=(ct.bid(0), 0), shape=(1, TILE)))
    """)
    configs = kernel_configs({"k": [{"x": "f32", "y": "f32", "TILE": 128}]})
    (kernel,) = translate_file(str(path), configs, None, RUST_NAMING).module.kernels
    for k, python in ((kernel, True), (dataclasses.replace(kernel, launch_unit_axes=False), False)):
        launcher = emit_launcher(KernelGroup("tileport_k", "k", "kern", [k]), lambda _: {})
        assert (".cutile_claims()" in launcher) is not python, launcher
        assert (".unit_arrays(&[x, y])" in launcher) is python and (".arrays(&[x, y])" in launcher) is not python


def test_array_arguments_bring_their_unit_axes(tmp_path):
    """A cuTile Python kernel's arrays take their length-1 axes as constants: given with the arguments
    (`unit_arrays`) when that keeps the generics' order."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            ct.store(y, index=(ct.bid(0), 0), tile=ct.load(x, index=(ct.bid(0), 0), shape=(1, TILE)))
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "y": "f32", "TILE": 128}]})
    launcher = _launcher(text, "tileport_k")
    assert ".unit_arrays(&[x, y])" in launcher and ".unit_axes(" not in launcher


def _c_signatures(text: str) -> dict[str, list[tuple[str, str]]]:
    """Every launcher's C parameters, by symbol: (name, type), a descriptor pointer spelled one way."""
    out = {}
    for m in re.finditer(r'pub (?:unsafe )?extern "C" fn (\w+)\(([^)]*)\) -> i32', text):
        params = [tuple(p.strip().split(": ", 1)) for p in m.group(2).split(",") if p.strip()]
        out[m.group(1)] = [(n, "*const TensorDesc" if t == "Desc" else t) for n, t in params]
    return out


def test_the_c_abi_and_the_manifest_parameters_are_the_faithful_ones(corpus_files):
    idiom, faithful = corpus_files
    for rel in idiom:
        if rel.startswith("src/") and rel not in ("src/support.rs", "src/lib.rs", "src/tiles.rs"):
            assert _c_signatures(idiom[rel]) == _c_signatures(faithful[rel]), rel
    a, b = json.loads(idiom["kernels.json"]), json.loads(faithful["kernels.json"])
    assert [(e["symbol"], e["params"], e["tile_dims"]) for e in a["entries"]] == \
        [(e["symbol"], e["params"], e["tile_dims"]) for e in b["entries"]]


def test_committed_crate_counts():
    """rust/ (the idiomatic corpus port): no `unsafe` kernel entry, at most 133 `unsafe` in all (130 now; issue 35's
    bar is 150, 755 in the faithful rendering of the 39 kernels then; each C-ABI launcher's `#[unsafe(no_mangle)]`
    included), no launcher macro, and every launcher within 25 lines."""
    texts = {p.name: p.read_text() for p in (CRATE / "src").glob("*.rs")}
    assert not any(re.search(r"#\[cutile::entry\([^\n]*\)\]\n\s*pub unsafe fn", t) for t in texts.values())
    assert sum(len(re.findall(r"\bunsafe\b", t)) for t in texts.values()) <= 133
    assert texts["attention.rs"].count("assume_div_by::<") == 1  # single-element gathers: in `load_element` only
    # tile gathers and scatters, `Array.slice` views loaded with zero padding: in the module's `gather_tile`,
    # `scatter_tile`, `slice_view_2d` (grouped_gemm: c's view, stored through `store_after`, keeps its 6)
    assert texts["moe_routing.rs"].count("store_ptr_tko(") == 1 and texts["grouped_gemm.rs"].count("unsafe") == 9
    assert not any("macro_rules!" in t for name, t in texts.items() if name != "support.rs")
    for name, text in texts.items():
        if name in ("support.rs", "tiles.rs", "lib.rs"):
            continue
        lines = text.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("/// Enqueue")]
        assert starts, name
        for start in starts:
            end = next(i for i in range(start, len(lines)) if lines[i] == "}")
            assert end - start + 1 <= 25, (name, lines[start + 3])


def test_committed_proof_covers_the_corpus():
    """bench/results/idiomatic-vs-faithful.json has a result for every corpus capture, each clean and compiled
    (sm_90) to the faithful port's machine code (test_idiomatic_proof.py re-checks a sample with cargo)."""
    from tileport.corpus import captures_by_kernel
    from tileport.ops.specs import all_specs
    doc = json.loads((REPO / "bench" / "results" / "idiomatic-vs-faithful.json").read_text())
    labels = {c.label for _, caps in captures_by_kernel(all_specs()).values() for c in caps}
    assert {c["capture"] for c in doc["captures"]} == labels
    assert doc["summary"]["captures"] == len(labels)
    for c in doc["captures"]:
        assert (c["ir_verdict"] in ("PASS", "PASS_WITH_NOTES") and not c["critical"] and not c["warn"]
                and not c["error"] and c["sass_equal_to_faithful"]["sm_90"] is True), c["capture"]


def test_a_single_element_gather_is_one_call_of_the_modules_load_element(tmp_path):
    """`ct.gather` of one element (its pointer's alignment stated, its bounds checked): one call of the module's
    private `load_element`, written once per module, which holds the two `unsafe` operations; a gather of a tile
    keeps the pointer load."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, lens, y, TILE: ConstInt):
            b = ct.bid(0)
            n = ct.gather(lens, b)
            m = ct.gather(lens, b + 1)
            t = ct.load(x, index=(b,), shape=(TILE,))
            ct.store(y, index=(b,), tile=t + ct.gather(x, ct.arange(TILE, dtype=ct.int32)) + n * m)
    """)
    text = idiomatic(path, {"k": [{"x": "i32", "lens": "i32", "y": "i32", "TILE": 128}]})
    device = text[:text.index("use crate::support::*;")]
    assert device.count("fn load_element<E: ElementType, const ALIGN: i32>(") == 1
    assert "pub fn load_element" not in device  # its safety rests on its callers: private to the module
    entry = device[device.index("pub fn k<"):]
    assert entry.count("load_element::<i32, 4>(") == 2 and "assume_div_by" not in entry
    assert "unsafe" not in entry and entry.count("gather_tile(") == 1  # the tile's gather: the module's helper


def test_launches_differing_in_dtypes_and_strides_read_them_from_a_layout_table(tmp_path):
    """Entries whose launches differ only in their arrays' dtypes (one element type generic each) and stride
    arguments: one launch, the entry, dtypes and strides from a `Layouts` table."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt, NEG: ConstBool, WIDE: ConstBool):
            t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
            if NEG:
                t = -t
            if WIDE:
                ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, ct.float32))
            else:
                ct.store(y, index=(ct.bid(0),), tile=t)
    """)
    text = idiomatic(path, {"k": [{"x": dt, "y": "f32" if wide else dt, "TILE": 128, "NEG": neg, "WIDE": wide}
                                  for dt in ("f16", "bf16") for neg in (False, True) for wide in (False, True)]})
    assert "const K: Layouts<bool, 2> = Layouts {" in text
    assert ("([false, true], crate::entry!(kern::k_wide1_neg0), "
            "Layout { dtypes: &[GENERIC, dtype::F32], strides: &[] }),") in text
    assert "Layout { dtypes: &[GENERIC, GENERIC], strides: &[] }" in text
    launcher = _launcher(text, "tileport_k")
    assert "let arrays = [x, y];" in launcher and "let (entry, layout) = l.layout(&K, [neg, wide])?;" in launcher
    assert "l.typed(&arrays, layout, &[dtype::F16, dtype::BF16])?" in launcher
    assert "if " not in launcher and "l.require(" not in launcher and "find(" not in launcher


def test_a_name_another_function_of_the_file_assigns_does_not_keep_a_let(tmp_path):
    """A value keeps its `let` when the kernel (or a helper it inlines) names it; a name only another function
    of the file assigns does not keep one."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def a(x, y, TILE: ConstInt):
            bid = ct.bid(0)
            ct.store(y, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)))

        @ct.kernel
        def b(x, y, TILE: ConstInt):
            split = ct.num_blocks(0) - 1 - ct.bid(0)
            ct.store(y, index=(split,), tile=ct.load(x, index=(split,), shape=(TILE,)))
    """)
    cfg = [{"x": "f32", "y": "f32", "TILE": 128}]
    text = idiomatic(path, {"a": cfg, "b": cfg})
    entry = text[text.index("pub fn b<"):]
    assert "let split = get_num_tile_blocks().0 - 1i32 - get_tile_block_id().0;" in entry, entry


def test_a_kernel_named_as_a_generated_helper_is_renamed(tmp_path):
    """The module's and the crate's device helpers are reserved names: a kernel (or value) named `load_element`
    does not shadow the helper its module calls."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def load_element(lens, y):
            b = ct.bid(0)
            ct.store(y, index=(b,), tile=ct.reshape(ct.gather(lens, b), (1,)))
    """)
    text = idiomatic(path, {"load_element": [{"lens": "i32", "y": "i32"}]})
    assert text.count("fn load_element<") == 1 and "pub fn load_element<" not in text
    assert "pub fn load_element_<" in text and "load_element::<i32, 4>(" in text


def test_a_tile_gather_and_scatter_are_calls_of_the_modules_gather_tile_and_scatter_tile(tmp_path):
    """`ct.gather` / `ct.scatter` of a tile (bounds-checked, after the array's token, default modes): one call of
    the module's private `gather_tile` / `scatter_tile` each, written once per module, which hold the `unsafe`
    pointer load and store; a scatter whose token nothing reads binds it all the same."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, idx, y, TILE: ConstInt):
            i = ct.load(idx, index=(ct.bid(0),), shape=(TILE,))
            t = ct.gather(x, i)
            u = ct.gather(x, i + 1)
            ct.scatter(y, i, t + u)
            ct.scatter(y, i + 1, t)
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "idx": "i32", "y": "f32", "TILE": 128}]})
    device = text[:text.index("use crate::support::*;")]
    assert device.count("fn gather_tile<E: ElementType, const S: [i32; N]>(") == 1
    assert device.count("fn scatter_tile<E: ElementType, const S: [i32; N]>(") == 1
    assert "pub fn gather_tile" not in device and "pub fn scatter_tile" not in device  # private to the module
    entry = device[device.index("pub fn k<"):]
    assert "unsafe" not in entry and "load_ptr_tko_tpad(" not in entry and "store_ptr_tko(" not in entry
    assert "let t: Tile<f32, { [TILE] }> = gather_tile(t_ptrs, t_in0, t_pad, x_token);" in entry
    assert entry.count("gather_tile(") == 2
    assert "let y_tok: Token = scatter_tile(y_scatter_ptrs, sum_1, y_scatter_in0, y_token);" in entry
    assert "let _stored: Token = scatter_tile(y_scatter_1_ptrs, t, y_scatter_1_in0, y_tok);" in entry


def test_an_array_slice_is_one_call_of_the_modules_slice_view(tmp_path):
    """`Array.slice` views (last axis contiguous) that only zero-padded loads read: one call each of the module's
    private `slice_view_<rank>d`, written once per module and rank, which holds the view's alignment, extent and
    stride assumptions and the view in one `unsafe` block; an extent known divisible passes its divisor (1:
    none). A view a `tiles` helper reads (a store's `view_mut`) keeps the faithful spelling: cutile cannot type
    that helper's call on a tensor a module function returns."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, w, y, n, TILE: ConstInt):
            b = ct.bid(0)
            xv = x.slice(0, 0, n).slice(1, 0, n)
            xw = x.slice(0, 0, n)
            zv = w.slice(0, 0, n * 8)
            yv = y.slice(0, 0, n * 8)
            zero = ct.PaddingMode.ZERO
            t = ct.load(xv, index=(b, 0), shape=(TILE, TILE), padding_mode=zero) \\
                + ct.load(xw, index=(b, 0), shape=(TILE, TILE), padding_mode=zero)
            ct.store(yv, index=(b,), tile=ct.sum(t, axis=1) + ct.load(zv, index=(b,), shape=(TILE,), padding_mode=zero))
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "w": "f32", "y": "f32", "n": "i32", "TILE": 64}]})
    device = text[:text.index("use crate::support::*;")]
    assert device.count("    fn slice_view_2d<E: ElementType, const ALIGN: i32, const D0: i32, const D1: i32>(") == 1
    assert device.count("    fn slice_view_1d<E: ElementType, const ALIGN: i32, const D0: i32>(") == 1
    assert "slice_view_3d" not in device and "pub fn slice_view" not in device
    helper = device[device.index("fn slice_view_2d<"):device.index("pub fn k<")]
    assert helper.count("unsafe") == 1 and "make_tensor_view(aligned, shape, strides, token)" in helper
    entry = device[device.index("pub fn k<"):]
    assert entry.count("slice_view_2d::<f32, 16, 1, 1>(") == 2 and "xv.partition(" in entry
    assert "let zv: Tensor<f32, { [-1] }> = slice_view_1d::<f32, 16, 8>(w_at, w_n, w.token());" in entry
    assert entry.count("unsafe") == 4 and entry.count("make_tensor_view(") == 1  # yv's, as the faithful port's
    assert "let yv: Tensor<f32, { [-1] }> = unsafe { make_tensor_view(y_aligned, yv_shape," in entry


def test_a_token_ordered_store_without_tma_is_a_store_after_no_tma(tmp_path):
    """A store ordered after an access of the same array, with `allow_tma=False`: the `tiles` helper
    `store_after_no_tma` (as `store_after` with TMA), no `unsafe` in the entry."""
    path = write_kernels(tmp_path, """
        @ct.kernel
        def k(x, y, TILE: ConstInt):
            b = ct.bid(0)
            t = ct.load(x, index=(b,), shape=(TILE,))
            ct.store(y, index=(b,), tile=t, allow_tma=False)
            ct.store(y, index=(b + 1,), tile=t * 2, allow_tma=False)
    """)
    text = idiomatic(path, {"k": [{"x": "f32", "y": "f32", "TILE": 128}]})
    entry = text[text.index("pub fn k<"):text.index("use crate::support::*;")]
    assert "unsafe" not in entry and entry.count("store_after_no_tma(&y_tiles, ") == 2, entry

