"""Autotune on CPU: the declared configuration spaces, the validity of every candidate as a kernel
specialization on both backends, the on-disk cache and how plans use it, and the search's rule that
only a correct candidate can win. No torch: plans run on stand-in tensors (shape, strides, dtype)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tileport.gpu import autotune as gpu_autotune
from tileport.gpu.timing import Timing
from tileport.ops import autotune
from tileport.ops.backends_cutile import positional_args
from tileport.ops.spec import KERNELS_DIR
from tileport.ops.specs import all_specs
from tileport.ops.specs import _tune

SPECS = all_specs()
TUNABLE = sorted(n for n, s in SPECS.items() if s.tune is not None)
MANIFEST = json.loads((Path(__file__).resolve().parents[2] / "rust" / "kernels.json").read_text())
RUST_ENTRIES = {e["kernel"]: e for e in MANIFEST["entries"]}


class Device:
    def __init__(self, kind: str):
        self.type, self.index = kind, 0


class FakeTensor:
    """What the plans read of a tensor: shape, strides (contiguous), dtype, device, views."""

    def __init__(self, shape, dtype="float16", device="meta"):
        self.shape = tuple(shape)
        self.dtype = f"torch.{dtype}"
        self.device = Device(device)

    def dim(self):
        return len(self.shape)

    def stride(self, i):
        return math.prod(self.shape[i + 1:])

    def is_contiguous(self):
        return True

    def view(self, *shape):
        return FakeTensor(shape, self.dtype.removeprefix("torch."), self.device.type)

    def __getitem__(self, rows):
        """A row slice (the split softmax plan runs row groups on slices)."""
        start, stop, _ = rows.indices(self.shape[0])
        return FakeTensor((stop - start,) + self.shape[1:], self.dtype.removeprefix("torch."), self.device.type)


class FakeTorch:
    """What a plan allocates with (workspaces): torch.empty and the float32 dtype."""
    float32 = "float32"

    @staticmethod
    def empty(shape, dtype, device):
        return FakeTensor(shape, dtype, device.type)


def fake_call(op: str, shape: tuple, dtype: str, device: str = "meta"):
    """(inputs, outs) stand-ins for one call of `op`."""
    x = FakeTensor(shape, dtype, device)
    if op.startswith("softmax"):
        return (x,), FakeTensor(shape, dtype, device)
    if op == "rms_norm":
        return (x, FakeTensor((shape[1],), dtype, device)), FakeTensor(shape, dtype, device)
    if op == "layer_norm":
        w = FakeTensor((shape[1],), dtype, device)
        rows = FakeTensor((shape[0],), "float32", device)
        return (x, w, w), (FakeTensor(shape, dtype, device), rows, rows)
    if op == "rope":
        table = FakeTensor((shape[1], shape[3] // 2), "float32", device)
        return (x, table, table), FakeTensor(shape, dtype, device)
    raise AssertionError(f"no stand-in inputs for {op}")


@pytest.fixture(autouse=True)
def cpu_plans(monkeypatch, tmp_path):
    """132 SMs without torch, and an empty cache directory of the test's own."""
    import importlib
    for name in TUNABLE:
        mod = importlib.import_module(f"tileport.ops.specs.{name}")
        if hasattr(mod, "num_sms"):
            monkeypatch.setattr(mod, "num_sms", lambda device: 132)
        if hasattr(mod, "torch"):
            monkeypatch.setattr(mod, "torch", lambda: FakeTorch)
    monkeypatch.setenv(autotune.DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(autotune.ENABLE_ENV, raising=False)
    autotune.forget_loaded()
    yield
    autotune.forget_loaded()


def problems(spec):
    for shape in list(spec.bench_shapes) + list(spec.shapes):
        for dtype in spec.dtypes:
            yield tuple(shape), dtype


def test_the_weak_kernels_declare_a_space():
    assert {"softmax", "softmax_tma", "softmax_online", "softmax_gather", "layer_norm", "rms_norm",
            "rope"} <= set(TUNABLE)


@pytest.mark.parametrize("op", TUNABLE)
def test_space_is_declared_and_default_is_a_candidate(op):
    spec = SPECS[op]
    by_class: dict[tuple, list] = {}
    for shape, dtype in problems(spec):
        cands = spec.tune.candidates(shape, dtype)
        assert cands, (op, shape, dtype)
        assert len({json.dumps(c, sort_keys=True) for c in cands}) == len(cands), "duplicate candidates"
        assert spec.tune.default(shape, dtype) in cands, (op, shape, dtype)
        for c in cands:
            for k, v in c.items():
                assert v in spec.tune.axes[k], f"{op}: {k}={v} outside the declared axis"
        prev = by_class.setdefault((spec.tune.shape_class(shape), dtype), cands)
        assert prev == cands, f"{op}: one shape class, two candidate lists ({shape})"


@pytest.mark.parametrize("op", TUNABLE)
def test_every_candidate_is_a_valid_specialization_on_both_backends(op):
    """The plan of every candidate launches an entry of the op with every parameter given once
    (the cuTile backend's check), tile constants that are powers of two (the cdylib's check, read
    from its manifest), a non-empty grid, and a row tile within the entry's register budget."""
    spec = SPECS[op]
    occupancy = _occupancies(op)
    for shape, dtype in problems(spec):
        inputs, outs = fake_call(op, shape, dtype)
        for cfg in spec.tune.candidates(shape, dtype):
            for launch in spec.plan(*inputs, outs, config=cfg):
                check_launch(op, spec, cfg, launch, occupancy)


def check_launch(op, spec, cfg, launch, occupancy):
    assert launch.kernel in spec.kernels
    entry = RUST_ENTRIES[launch.kernel]
    positional_args([p["name"] for p in entry["params"]], launch)
    for p in entry["params"]:
        if p["kind"] == "const" and p["name"] in entry.get("tile_dims", []):
            v = launch.args[p["name"]]
            assert v > 0 and v & (v - 1) == 0, (op, cfg, p["name"], v)
    assert len(launch.grid) == 3 and min(launch.grid) >= 1
    if "BLOCK_M" in launch.args and launch.kernel in occupancy:
        width = launch.args.get("TILE", launch.args.get("CHUNK"))
        assert launch.args["BLOCK_M"] * width <= _tune.tile_budget(occupancy[launch.kernel])


def _occupancies(op):
    import importlib
    return getattr(importlib.import_module(f"tileport.ops.specs.{op}"), "OCCUPANCY", {})


def test_grid_policies_of_a_row_kernel():
    spec = SPECS["softmax_tma"]
    (x,), y = fake_call("softmax_tma", (4096, 4096), "float16")
    base = {"variant": "tma", "kernel": "softmax_tma_kernel", "BLOCK_M": 2}
    (full,) = spec.plan(x, y, config={**base, "grid": "full"})
    (pers,) = spec.plan(x, y, config={**base, "grid": "persistent"})
    assert full.grid == (2048, 1, 1) and pers.grid == (132 * 4, 1, 1)
    assert full.args["BLOCK_M"] == pers.args["BLOCK_M"] == 2


def test_default_plans_are_the_measured_configurations():
    """Without a cache the plans take the configurations measured fastest on H200 (the op specs'
    default rules)."""
    (x,), y = fake_call("softmax", (1024, 16384), "float16")
    (launch,) = SPECS["softmax"].plan(x, y)
    assert (launch.kernel, launch.grid, launch.args["BLOCK_M"]) == ("softmax_tma_prefetch_kernel", (264, 1, 1), 1)
    (x,), y = fake_call("softmax", (1024, 16384), "float32")  # the prefetch entry cannot hold an f32 row
    (launch,) = SPECS["softmax"].plan(x, y)
    assert launch.kernel == "softmax_tma_wide_kernel"
    (x,), y = fake_call("softmax", (8192, 1000), "float16")
    (launch,) = SPECS["softmax"].plan(x, y)
    assert (launch.kernel, launch.grid) == ("softmax_gather_kernel", (8192, 1, 1))
    (x,), y = fake_call("softmax_online", (256, 131072), "bfloat16")  # few long rows: split
    stats, write = SPECS["softmax_online"].plan(x, y)
    assert (stats.kernel, write.kernel, stats.grid) == ("softmax_split_stats_kernel", "softmax_split_write_kernel",
                                                        (64, 256, 1))
    for dtype in ("bfloat16", "float32"):  # enough rows: online, pass 2 last chunk first, 4096-wide chunks
        (x,), y = fake_call("softmax_online", (1024, 16384), dtype)
        (launch,) = SPECS["softmax_online"].plan(x, y)
        assert (launch.kernel, launch.grid, launch.args["CHUNK"]) == ("softmax_online_rev_kernel", (528, 1, 1), 4096)
    inputs, outs = fake_call("layer_norm", (16384, 2048), "float16")
    (launch,) = SPECS["layer_norm"].plan(*inputs, outs)
    assert (launch.kernel, launch.grid, launch.args["BLOCK_M"]) == ("layer_norm_fwd_occ4_kernel", (528, 1, 1), 1)
    inputs, outs = fake_call("layer_norm", (8192, 4096), "float16")
    (launch,) = SPECS["layer_norm"].plan(*inputs, outs)
    assert (launch.kernel, launch.args["BLOCK_M"]) == ("layer_norm_fwd_kernel", 1)
    inputs, outs = fake_call("rope", (1, 16384, 8, 128), "float16")  # a batch of one: no length-1 axis
    (launch,) = SPECS["rope"].plan(*inputs, outs)
    assert launch.kernel == "rope_rows_pair_persistent_kernel" and tuple(launch.args["x"].shape) == (16384, 8, 2, 64)
    assert (launch.args["BLOCK_S"], launch.grid[0]) == (4, 132 * 4)  # four positions per block, 4 blocks per SM
    for shape in ((1, 16386, 8, 128), (1, 16384, 16, 128)):  # 4 does not divide S / 4 x 16 x 64 is over the tile
        inputs, outs = fake_call("rope", shape, "float16")
        (launch,) = SPECS["rope"].plan(*inputs, outs)
        assert (launch.kernel, launch.args["BLOCK_S"]) == ("rope_rows_pair_kernel", 2)
    inputs, outs = fake_call("rope", (1, 4097, 8, 128), "float16")  # an odd sequence: one position per block
    (launch,) = SPECS["rope"].plan(*inputs, outs)
    assert (launch.kernel, launch.args["BLOCK_S"]) == ("rope_rows_kernel", 1)
    assert launch.grid == (4097, 1, 1) and (launch.args["BLOCK_S"], launch.args["BLOCK_H"]) == (1, 8)
    inputs, outs = fake_call("rope", (2, 4096, 8, 128), "float16")
    (launch,) = SPECS["rope"].plan(*inputs, outs)
    assert launch.kernel == "rope_kernel"
    inputs, outs = fake_call("rope", (4, 4096, 32, 128), "float16")
    (launch,) = SPECS["rope"].plan(*inputs, outs)
    assert launch.kernel == "rope_persistent_kernel" and launch.args["BLOCK_H"] == 16


def test_layer_norm_prefetch_candidates_are_one_row_blocks():
    """Two-row blocks of the prefetch entry computed wrong results on H200: the search leaves them out."""
    space = SPECS["layer_norm"].tune
    prefetch = [c for shape in ((16384, 2048), (8192, 4096), (37, 1000)) for c in space.candidates(shape, "float16")
                if c["kernel"] == "layer_norm_fwd_prefetch_kernel"]
    assert prefetch and all(c["BLOCK_M"] == 1 for c in prefetch)


# ---------------------------------------------------------------------------------------------
# The cache and the plans


GPU = "NVIDIA H200"


def _cuda_problem(monkeypatch, op="layer_norm", shape=(16384, 2048), dtype="float16"):
    monkeypatch.setattr(autotune, "_gpu_name", lambda device: GPU if device.type == "cuda" else None)
    return fake_call(op, shape, dtype, device="cuda")


def _store(op, backend, shape, dtype, config):
    spec = SPECS[op]
    return autotune.store(GPU, autotune.entry_key(spec, backend, dtype, shape), {"config": config})


def test_plan_uses_the_entry_of_its_backend_gpu_and_shape_class(monkeypatch):
    inputs, outs = _cuda_problem(monkeypatch)
    tuned = {"kernel": "layer_norm_fwd_occ4_kernel", "BLOCK_M": 4, "grid": "full"}
    path = _store("layer_norm", "cutile-rs", (16384, 2048), "float16", tuned)
    assert path.parent == Path(autotune.cache_dir()) and json.loads(path.read_text())["format"] == 1
    spec = SPECS["layer_norm"]
    with autotune.planning_for("cutile-rs"):
        (launch,) = spec.plan(*inputs, outs)
    assert (launch.kernel, launch.args["BLOCK_M"], launch.grid) == ("layer_norm_fwd_occ4_kernel", 4, (4096, 1, 1))
    with autotune.planning_for("cutile"):  # no entry for this backend: the default
        (launch,) = spec.plan(*inputs, outs)
    assert (launch.kernel, launch.args["BLOCK_M"]) == ("layer_norm_fwd_occ4_kernel", 1)
    other, outs2 = fake_call("layer_norm", (16000, 2000), "float16", device="cuda")  # same shape class
    with autotune.planning_for("cutile-rs"):
        (launch,) = spec.plan(*other, outs2)
    assert (launch.kernel, launch.args["BLOCK_M"]) == ("layer_norm_fwd_occ4_kernel", 4)
    meta, outs3 = fake_call("layer_norm", (16384, 2048), "float16")  # not a CUDA tensor: the default
    with autotune.planning_for("cutile-rs"):
        (launch,) = spec.plan(*meta, outs3)
    assert launch.args["BLOCK_M"] == 1


def test_cache_can_be_switched_off(monkeypatch):
    inputs, outs = _cuda_problem(monkeypatch)
    _store("layer_norm", "cutile", (16384, 2048), "float16",
           {"kernel": "layer_norm_fwd_occ4_kernel", "BLOCK_M": 4, "grid": "full"})
    monkeypatch.setenv(autotune.ENABLE_ENV, "0")
    with autotune.planning_for("cutile"):
        (launch,) = SPECS["layer_norm"].plan(*inputs, outs)
    assert launch.args["BLOCK_M"] == 1  # the default, not the entry's 4


def test_entry_of_another_space_or_kernel_is_a_miss(monkeypatch):
    inputs, outs = _cuda_problem(monkeypatch)
    spec = SPECS["layer_norm"]
    key = autotune.entry_key(spec, "cutile", "float16", (16384, 2048))
    stale = key.rsplit("|", 1)[0] + "|0000000000000000"
    autotune.store(GPU, stale, {"config": {"kernel": "layer_norm_fwd_occ4_kernel", "BLOCK_M": 4, "grid": "full"}})
    with autotune.planning_for("cutile"):
        (launch,) = spec.plan(*inputs, outs)
    assert launch.args["BLOCK_M"] == 1  # the default, not the stale entry's 4
    assert key.endswith(autotune.fingerprint(spec)) and len(autotune.fingerprint(spec)) == 16


def test_cached_config_that_is_not_a_candidate_raises(monkeypatch):
    inputs, outs = _cuda_problem(monkeypatch)
    _store("layer_norm", "cutile", (16384, 2048), "float16",
           {"kernel": "layer_norm_fwd_kernel", "BLOCK_M": 3, "grid": "full"})
    with autotune.planning_for("cutile"), pytest.raises(autotune.TuneCacheError, match="not a candidate"):
        SPECS["layer_norm"].plan(*inputs, outs)


def test_unreadable_cache_file_names_itself(monkeypatch):
    inputs, outs = _cuda_problem(monkeypatch)
    path = autotune.cache_path(GPU)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with autotune.planning_for("cutile"), pytest.raises(autotune.TuneCacheError, match=str(path.name)):
        SPECS["layer_norm"].plan(*inputs, outs)


def test_explicit_config_must_be_a_candidate():
    (x,), y = fake_call("softmax_online", (4096, 4096), "float16")
    with pytest.raises(autotune.TuneCacheError, match="not a candidate"):
        SPECS["softmax_online"].plan(x, y, config={"variant": "online", "CHUNK": 16384, "BLOCK_M": 1,
                                                   "grid": "full"})


def test_store_keeps_other_entries_and_writes_atomically(monkeypatch):
    _store("rope", "cutile", (1, 16384, 8, 128), "float16", {"kernel": "rope_kernel", "BLOCK_S": 2, "BLOCK_H": 8})
    _store("rope", "cutile-rs", (1, 16384, 8, 128), "float16", {"kernel": "rope_kernel", "BLOCK_S": 4, "BLOCK_H": 8})
    autotune.forget_loaded()
    entries = autotune.load(GPU)
    assert len(entries) == 2
    assert not [p for p in autotune.cache_dir().iterdir() if p.name.endswith(".tmp")]


def test_cache_directory_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(autotune.DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert autotune.cache_dir() == tmp_path / "tileport" / "autotune"
    assert autotune.cache_path("NVIDIA H200 (MIG 1g)").name == "NVIDIA_H200_MIG_1g.json"


# ---------------------------------------------------------------------------------------------
# The search


class FakeProblem:
    """Candidate i runs in TIMES[i] µs; candidate 0 is the fastest but wrong."""

    TIMES = {0: 5.0, 1: 9.0, 2: 7.0, 3: 8.0}

    def __init__(self):
        self.spec, self.shape, self.dtype = SPECS["softmax_gather"], (4096, 4096), "float16"

    def runner(self, backend, config):
        if config["i"] == 3:
            raise RuntimeError("does not compile")
        return lambda: config["i"]

    def check(self, run):
        return (run() != 0, 0.5, "" if run() != 0 else "max |error| too large")


def test_only_a_correct_candidate_can_win(monkeypatch):
    monkeypatch.setattr(gpu_autotune, "gpu_time",
                        lambda run, flush, **kw: Timing(FakeProblem.TIMES[run()], 0, 0, 0, 10, 1))
    results = gpu_autotune.search_backend(FakeProblem(), "cutile", [{"i": i} for i in range(4)], None,
                                          0.01, 0.1, 2, 4000.0)
    win = gpu_autotune._winner(results)
    assert win["config"] == {"i": 2} and win["final"]
    by_i = {r["config"]["i"]: r for r in results}
    assert not by_i[0]["ok"] and by_i[0]["us"] is None
    assert "does not compile" in by_i[3]["error"] and by_i[3]["us"] is None
    assert by_i[2]["pct_copy_bw"] == pytest.approx(100 * 2 * 4096 * 4096 * 2 / 7e-6 / 1e9 / 4000.0)


def test_no_correct_candidate_means_no_winner(monkeypatch):
    monkeypatch.setattr(gpu_autotune, "gpu_time", lambda run, flush, **kw: Timing(1, 0, 0, 0, 10, 1))
    results = gpu_autotune.search_backend(FakeProblem(), "cutile", [{"i": 0}, {"i": 3}], None, 0.01, 0.1, 2, 1.0)
    assert gpu_autotune._winner(results) is None


def test_command_needs_a_gpu_and_known_ops(capsys, tmp_path):
    with pytest.raises(SystemExit):
        gpu_autotune.main(["matmul", "--out", str(tmp_path / "a.json")])
    rc = gpu_autotune.main(["softmax", "--out", str(tmp_path / "a.json")])
    if rc == 2:
        assert "needs a CUDA GPU" in capsys.readouterr().err
        assert not (tmp_path / "a.json").exists()
    assert set(gpu_autotune.tunable_ops()) == set(TUNABLE)


def test_kernel_files_exist_for_fingerprints():
    for op in TUNABLE:
        assert (KERNELS_DIR / SPECS[op].kernel_file).is_file()
        assert autotune.fingerprint(SPECS[op])


# ---------------------------------------------------------------------------------------------
# On a GPU (skipped elsewhere): every candidate of a ragged problem is correct on both backends,
# and a search stores a winner that the next plan on that backend uses.

RAGGED = {"softmax": (37, 1000), "softmax_tma": (37, 1000), "softmax_gather": (37, 1000),
          "softmax_online": (19, 5000), "rms_norm": (37, 1000), "layer_norm": (37, 1000),
          "rope": (3, 33, 5, 96)}
# rope's rows entries take several positions per block only where they divide S: 36 (4 does, 8 does not)
MORE_RAGGED = {"rope": [(3, 36, 5, 96)]}


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cutile", "cutile-rs"])
@pytest.mark.parametrize("op", sorted(RAGGED))
def test_every_candidate_is_correct_on_the_gpu(op, backend, monkeypatch):
    from tileport.ops.backends import unavailable_reason
    if unavailable_reason(backend):
        pytest.skip(unavailable_reason(backend))
    monkeypatch.undo()  # the real SM count and device names (the CPU fixture patched them)
    failures = []
    for shape in [RAGGED[op]] + MORE_RAGGED.get(op, []):
        problem = gpu_autotune.Problem(SPECS[op], "float16", shape)
        for cfg in SPECS[op].tune.candidates(shape, "float16"):
            ok, ratio, msg = problem.check(problem.runner(backend, cfg))
            if not ok:
                failures.append((shape, cfg, msg))
    assert not failures, failures


@pytest.mark.gpu
def test_search_stores_a_winner_that_plans_use(monkeypatch, tmp_path):
    from tileport.gpu.timing import make_flush
    from tileport.ops.backends import unavailable_reason
    if unavailable_reason("cutile"):
        pytest.skip(unavailable_reason("cutile"))
    import torch
    monkeypatch.undo()
    monkeypatch.setenv(autotune.DIR_ENV, str(tmp_path))
    autotune.forget_loaded()
    spec, shape = SPECS["softmax_online"], (256, 4096)
    case = gpu_autotune.tune_case(spec, "float16", shape, ["cutile"], make_flush("cuda"), 4000.0,
                                  torch.cuda.get_device_name(0), True, 0.01, 0.02, 2)
    chosen = case["backends"]["cutile"]["chosen"]
    assert chosen is not None and case["backends"]["cutile"]["failed"] == 0
    (x,) = spec.make_inputs(shape, "float16", "cuda", 0)
    with autotune.planning_for("cutile"):
        planned = spec.plan(x, torch.empty_like(x))
    expected = spec.plan(x, torch.empty_like(x), config=chosen)  # one launch, or two (split rows)

    def launched(launches):
        return [(l.kernel, l.grid, {k: v for k, v in l.args.items() if isinstance(v, int)}) for l in launches]
    assert launched(planned) == launched(expected)
