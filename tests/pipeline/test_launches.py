"""Launch specs (schema, merge, atomic write) and launch inference from a kernel file's host code."""

from __future__ import annotations

import json

import pytest

from tileport.launches import (LaunchSpecError, captures, fit_problems, for_kernel, infer_launches, load_spec,
                               merge, records_hash, write_spec)

from conftest import DATA


def spec(*launches) -> dict:
    return {"format": "tileport-launches", "version": 1, "launches": list(launches)}


SCALE = {"framework": "cutile", "kernel": "scale_kernel", "file": "/elsewhere/rp_scale.py", "grid": [4],
         "args": [{"name": "x", "kind": "array", "dtype": "torch.float16", "shape": [1000], "strides": [1]},
                  {"name": "y", "kind": "array", "dtype": "f16", "shape": [1000], "strides": [1]},
                  {"name": "alpha", "kind": "scalar", "dtype": "float32", "value": 0.5},
                  {"name": "TILE", "kind": "const", "value": 256}]}
PARAMS = [{"name": "x", "kind": "array", "rank": 1}, {"name": "y", "kind": "array", "rank": 1},
          {"name": "alpha", "kind": "scalar"}, {"name": "TILE", "kind": "const"}]


def test_spec_round_trip_merge_and_captures(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(spec(SCALE, SCALE, {**SCALE, "grid": [8, 1, 1]})))
    recs = load_spec(p)
    assert [r.grid for r in recs] == [(4, 1, 1), (4, 1, 1), (8, 1, 1)]
    assert recs[0].args[0].dtype == "float16" and recs[0].args[1].dtype == "float16"  # spellings normalized
    merged = merge(recs)
    assert [m.count for m in merged] == [2, 1]
    out = tmp_path / "sub" / "o.json"
    write_spec(out, merged)
    again = load_spec(out)
    assert [r.key() for r in again] == [r.key() for r in merged] and [r.count for r in again] == [2, 1]
    assert not list(out.parent.glob(".o.json.*"))  # the temporary file of the atomic write is gone
    caps = captures(merged)  # both launches are one specialization
    assert len(caps) == 1 and caps[0].arrays == {"x": ("float16", 1), "y": ("float16", 1)}
    assert caps[0].scalars == {"alpha": "float32"} and caps[0].constants == {"TILE": 256}
    assert records_hash(merged) == records_hash(list(reversed(again)))
    assert records_hash(merged) != records_hash(merged[:1])


def test_records_match_the_kernel_by_name_and_file_name():
    recs = merge([r for r in load_spec_dict(spec(SCALE))])
    assert for_kernel(recs, DATA / "rp_scale.py", "scale_kernel") == recs
    assert for_kernel(recs, DATA / "rp_take.py", "scale_kernel") == []
    assert for_kernel(recs, DATA / "rp_scale.py", "other") == []


def load_spec_dict(data):
    from tileport.launches import parse_spec
    return parse_spec(data)


@pytest.mark.parametrize("bad,where", [
    ({"format": "x", "version": 1, "launches": []}, "format"),
    (spec({**SCALE, "grid": [0]}), "launches/0/grid/0"),
    (spec({**SCALE, "args": [{"name": "x", "kind": "array", "dtype": "float16"}]}), "launches/0/args/0"),
    (spec({**SCALE, "args": [{"name": "x", "kind": "array", "dtype": "float99", "shape": [1], "strides": [1]}]}),
     "launches/0"),
    (spec({**SCALE, "args": [{"name": "x", "kind": "array", "dtype": "float16", "shape": [1, 2], "strides": [1]}]}),
     "launches/0"),
])
def test_bad_specs_say_where(tmp_path, bad, where):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(LaunchSpecError, match=f"{p}: (at )?{where}"):
        load_spec(p)


def test_unreadable_spec(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(LaunchSpecError, match="x.json"):
        load_spec(tmp_path / "x.json")


def test_fit_problems():
    rec = load_spec_dict(spec(SCALE))[0]
    assert fit_problems(rec, PARAMS) == []
    assert "arguments" in fit_problems(rec, PARAMS[:3])[0]
    wrong = [dict(PARAMS[0], rank=2)] + PARAMS[1:]
    assert fit_problems(rec, wrong) == ["`x`: rank 1 vs the kernel's rank 2"]
    kinds = PARAMS[:2] + [{"name": "alpha", "kind": "const"}, PARAMS[3]]
    assert "takes a const" in fit_problems(rec, kinds)[0]


def test_inference_derives_the_launch_the_host_code_fixes():
    inf = infer_launches(DATA / "rp_scale.py")
    assert inf.sites == 2 and len(inf.records) == 1
    r = inf.records[0]
    assert (r.kernel, r.grid, r.origin) == ("scale_kernel", (16, 1, 1), "inferred")
    assert r.where.endswith("rp_scale.py:28:5")
    assert [(a.name, a.kind, a.dtype, a.shape, a.strides, a.value) for a in r.args] == [
        ("x", "array", "float32", [4096], [1], None), ("y", "array", "float32", [4096], [1], None),
        ("alpha", "scalar", "float32", None, None, 2.0), ("TILE", "const", "", None, None, 256)]
    # the other call site takes its arrays from its caller: located, with a hint, no record
    assert {(m.line, m.kernel) for m in inf.missing} == {(21, "scale_kernel"), (22, "scale_kernel")}
    assert any("parameter `x` of `scale` has no default" in m.what and m.hint for m in inf.missing)


def test_inference_reports_what_it_cannot_derive(tmp_path):
    src = tmp_path / "k.py"
    src.write_text('''import cuda.tile as ct
import torch
import numpy as np
ConstInt = ct.Constant[int]
B = 64


@ct.kernel
def k(a, b, n, TILE: ConstInt):
    pass


def run(m=100, dtype=torch.bfloat16):
    a = torch.zeros((m, 8), dtype=dtype)
    b = torch.empty_strided((m,), (1,), dtype=np.int32)
    ct.launch(None, (ct.cdiv(m, B), 2), k, (a, b, m * 2, B))
    for i in range(3):
        ct.launch(None, (i, 1, 1), k, (a, b, i, B))
    c = torch.randn(m)
    ct.launch(None, (1,), k, (c, b, 1, B))
    ct.launch(None, (1,), k, (a, b))
''')
    inf = infer_launches(src)
    assert inf.sites == 4 and len(inf.records) == 1
    r = inf.records[0]
    assert r.grid == (2, 2, 1)
    args = {a.name: a for a in r.args}
    assert (args["a"].dtype, args["a"].shape, args["a"].strides) == ("bfloat16", [100, 8], [8, 1])
    assert (args["b"].dtype, args["b"].shape) == ("int32", [100])
    assert (args["n"].kind, args["n"].dtype, args["n"].value) == ("scalar", "int32", 200)
    assert (args["TILE"].kind, args["TILE"].value) == ("const", 64)  # through the ConstInt alias
    lines = {m.line: m.what for m in inf.missing}
    assert "control flow" in lines[18]                     # `i` is a loop variable
    assert "gives no dtype=" in lines[19]                  # torch.randn(m): the framework's default dtype
    assert "2 arguments for 4 parameters" in lines[21]


def test_inference_never_runs_the_file(tmp_path):
    marker = tmp_path / "ran"
    src = tmp_path / "k.py"
    src.write_text(f"open({str(marker)!r}, 'w').write('x')\nimport cuda.tile as ct\n"
                   f"@ct.kernel\ndef k(a):\n    pass\nct.launch(None, (1,), k, (open({str(marker)!r}),))\n")
    inf = infer_launches(src)
    assert not marker.exists() and inf.sites == 1 and not inf.records and inf.missing


def test_syntax_error_gives_no_launches(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("def (:\n")
    assert infer_launches(src).sites == 0


def test_launches_differing_only_in_index_values_merge_their_ranges():
    def with_range(r):
        return {**SCALE, "args": SCALE["args"][:1] + [{"name": "y", "kind": "array", "dtype": "int32",
                                                       "shape": [1000], "strides": [1], "range": r}] + SCALE["args"][2:]}
    recs = load_spec_dict(spec(with_range([3, 9]), with_range([0, 5]), with_range([4, 12])))
    merged = merge(recs)
    assert len(merged) == 1 and merged[0].count == 3 and merged[0].args[1].range == [0, 12]
    assert recs[0].args[1].range == [3, 9]  # the inputs of merge are not modified
    assert merge(recs + load_spec_dict(spec(with_range(None))))[0].args[1].range is None


def test_hostile_host_code_is_a_located_diagnostic_not_a_crash_or_a_hang(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("""import cuda.tile as ct


@ct.kernel
def k(n):
    pass


def run():
    ct.launch(None, (1 // 0,), k, (1,))
    ct.launch(None, (1,), k, (2 ** 10 ** 10,))
    ct.launch(None, (1,), k, ("ab" * 10 ** 12,))
    ct.launch(None, (1,), k, ((1, 2)[7],))
""")
    inf = infer_launches(src)
    assert inf.sites == 4 and not inf.records
    assert [m.line for m in inf.missing] == [10, 11, 12, 13]
    assert "ZeroDivisionError" in inf.missing[0].what and "too large" in inf.missing[1].what
    assert "not numbers" in inf.missing[2].what and "IndexError" in inf.missing[3].what


def test_inference_follows_the_file_s_own_callers_and_main_block(tmp_path):
    src = tmp_path / "k.py"
    src.write_text('''import cuda.tile as ct
import torch
TILE = 128


@ct.kernel
def k(x, y, TILE: ct.Constant[int]):
    pass


def launch_k(x, y, tile=TILE):
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.shape[0], tile),), k, (x, y, tile))


def bench():
    a = torch.randn(1000, dtype=torch.float16, device="cuda")
    launch_k(a, torch.empty_like(a))


if __name__ == "__main__":
    n = 4096
    x = torch.zeros(n, dtype=torch.float32)
    launch_k(x, x, tile=256)
    ct.launch(None, (n // TILE,), k, (x, x, TILE))
    for i in range(2):
        launch_k(x, x, tile=i)
''')
    inf = infer_launches(src)
    got = sorted((r.grid[0], r.args[0].dtype, r.args[0].shape[0], r.args[2].value) for r in inf.records)
    assert got == [(8, "float16", 1000, 128), (16, "float32", 4096, 256), (32, "float32", 4096, 128)]
    assert inf.sites == 2 and inf.missing == []  # the loop's call binds nothing derivable: other calls did
    where = {r.where.rsplit(":", 2)[-2] for r in inf.records}
    assert where == {"12", "24"}  # every record names its ct.launch call site


def test_port_targets_take_launches_before_config_and_inference(tmp_path):
    from tileport.pipeline import TargetError, resolve_targets
    sp = tmp_path / "s.json"
    sp.write_text(json.dumps(spec(SCALE)))
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"scale_kernel": [{"x": "float32", "y": "float32", "TILE": 64}],
                               "take_kernel": [{"src": "float32", "idx": "int32", "out": "float32", "TILE": 32}]}))
    files = [str(DATA / "rp_scale.py"), str(DATA / "rp_take.py")]
    t = {x.kernel: x for x in resolve_targets(files, config=cfg, launches=sp)}
    scale, take = t["scale_kernel"], t["take_kernel"]
    assert scale.config_source == f"launches:spec:{sp}" and scale.launch_source == f"spec:{sp}"
    assert [c.constants for c in scale.captures] == [{"TILE": 256}] and len(scale.launches) == 1
    assert scale.configs["scale_kernel"].configs == ({"x": "f16", "y": "f16", "alpha": "f32", "TILE": 256},)
    assert take.config_source == f"config:{cfg}" and take.launches == [] and take.launch_missing
    assert take.config_entries == [{"src": "float32", "idx": "int32", "out": "float32", "TILE": 32}]
    inferred = resolve_targets([str(DATA / "rp_scale.py")])[0]  # no spec: the host code's launch
    assert inferred.launch_source == "inferred" and inferred.config_source == "launches:inferred"
    assert inferred.launches[0].grid == (16, 1, 1)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(spec({**SCALE, "grid": []})))
    with pytest.raises(TargetError, match=r"--launches: .*bad.json: at launches/0/grid"):
        resolve_targets(files, launches=bad)


def test_triton_dtype_constants_read_as_triton_names():
    """Liger's launches recorded `X_dtype=tl.float32` as its repr "triton.language.float32": the port's
    entries are pinned to Triton's name "fp32", so no entry matched and 9 kernels failed stage B."""
    from tileport.launches import TRITON_DTYPE, parse_spec
    from tileport.launches.record import const_value
    rec = {"framework": "triton", "kernel": "k", "file": "k.py", "grid": [1],
           "args": [{"name": "D", "kind": "const", "value": "triton.language.float32"},
                    {"name": "E", "kind": "const", "value": "triton.language.bfloat16"},
                    {"name": "mode", "kind": "const", "value": "mean"}]}
    spec = {"format": "tileport-launches", "version": 1, "launches": [rec]}
    [r] = parse_spec(spec)
    assert [a.value for a in r.args] == ["fp32", "bf16", "mean"]
    assert [a.type for a in r.args] == [TRITON_DTYPE, TRITON_DTYPE, ""]  # a replay passes the first two as dtypes
    assert r.args[0].to_dict() == {"name": "D", "kind": "const", "value": "fp32", "type": TRITON_DTYPE}
    assert parse_spec({**spec, "launches": [r.to_dict()]})[0].args == r.args  # the typed form reads back
    cutile = parse_spec({**spec, "launches": [{**rec, "framework": "cutile"}]})[0]
    assert cutile.args[0].value == "triton.language.float32"  # only Triton specs

    class dtype:  # stands for triton.language.core.dtype
        primitive_bitwidth = 32
        def __str__(self): return "fp32"
        def __repr__(self): return "triton.language.float32"
    dtype.__module__ = "triton.language.core"
    assert const_value(dtype()) == ("fp32", TRITON_DTYPE) and const_value(3) == (3, "")
    assert const_value(object())[0].startswith("<object")


def test_recorded_index_values_round_trip_and_survive_merge_only_when_equal():
    """A routing table (MoE tile_row_start / tile_expert) is replayed as recorded: drawn at random in its
    range it made four grouped-GEMM kernels race with themselves and miscompare."""
    from tileport.launches import parse_spec

    def with_values(v):
        table = {"name": "y", "kind": "array", "dtype": "int32", "shape": [3], "strides": [1], "range": [0, 8],
                 "values": v}
        return {**SCALE, "args": SCALE["args"][:1] + [table] + SCALE["args"][2:]}
    [r] = parse_spec(spec(with_values([0, 4, 8])))
    assert r.args[1].values == [0, 4, 8] and r.args[1].to_dict()["values"] == [0, 4, 8]
    assert parse_spec(spec(r.to_dict()))[0].args == r.args
    assert "values" not in parse_spec(spec(SCALE))[0].args[1].to_dict()
    same = parse_spec(spec(with_values([0, 4, 8]), with_values([0, 4, 8]), with_values([8, 0, 4])))
    assert merge(same[:2])[0].args[1].values == [0, 4, 8] and len(merge(same)) == 1  # one launch, other tables
    assert merge(same)[0].args[1].values is None and merge(same)[0].count == 3
    with pytest.raises(LaunchSpecError):
        parse_spec(spec(with_values(["zero"])))


def test_record_keeps_the_values_of_small_contiguous_integer_arrays():
    import numpy as np
    from tileport.launches.record import MAX_RECORDED_VALUES, _values
    assert _values(np.array([[3, 1], [2, 0]], np.int32), "int32") == [3, 1, 2, 0]
    assert _values(np.arange(8, dtype=np.int64)[::2], "int64") is None  # strided: memory order is not the list
    assert _values(np.zeros(MAX_RECORDED_VALUES + 1, np.int32), "int32") is None
    assert _values(np.zeros(4, np.float32), "float32") is None
