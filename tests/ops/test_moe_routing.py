"""MoE routing specs (ops/specs/moe_*.py) with torch on the CPU (skipped where torch is not installed).

The kernels themselves are held to NumPy references by the interpreter (eval/interp/corpus.py: moe
problems, cuTile Python's IR and the port's); here the torch references the GPU check uses are held to
a plain Python construction, and the integer comparison of the GPU check is shown to be exact. The three
align kernels also run in turn in the interpreter, sized as the plan sizes them, against the same construction.
"""

from __future__ import annotations

import random

import pytest

from tileport.ops.specs import moe_route, moe_topk_sigmoid, moe_topk_softmax


@pytest.fixture(scope="module")
def torch_mod():
    return pytest.importorskip("torch", reason="torch is not installed: the routing references need it")


def _align_by_hand(ids: list[int], experts: int, block: int):
    sorted_ids, expert_ids = [], []
    for e in range(experts):
        slots = [i for i, x in enumerate(ids) if x == e]
        padded = -(-len(slots) // block) * block
        sorted_ids += slots + [len(ids)] * (padded - len(slots))
        expert_ids += [e] * (padded // block)
    total = len(sorted_ids)
    n_sorted, n_blocks = moe_route.sizes(len(ids), experts, block)
    return (sorted_ids + [len(ids)] * (n_sorted - total), expert_ids + [-1] * (n_blocks - len(expert_ids)), [total])


@pytest.mark.parametrize("ids,experts,block", [([3, 0, 3, 1, 3, 3, 0, 2], 5, 2), ([7] * 9, 8, 4), ([0], 1, 16)])
def test_align_reference_matches_the_definition(torch_mod, ids, experts, block):
    got = moe_route.align_reference(torch_mod.tensor(ids, dtype=torch_mod.int32).view(-1, 1), experts, block)
    assert [t.tolist() for t in got] == list(_align_by_hand(ids, experts, block))


def test_topk_reference_breaks_ties_by_the_lowest_id_and_renormalizes(torch_mod):
    logits = torch_mod.tensor([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5]])
    for spec in (moe_topk_softmax, moe_topk_sigmoid):
        weights, ids = spec.reference(logits, 2)
        assert ids.tolist() == [[1, 2], [0, 1]] and ids.dtype == torch_mod.int32
        assert torch_mod.allclose(weights, torch_mod.full((2, 2), 0.5))
    weights, _ = moe_topk_softmax.reference(torch_mod.tensor([[0.0, 1.0, 2.0]]), 2)
    assert torch_mod.allclose(weights, torch_mod.softmax(torch_mod.tensor([[2.0, 1.0]]), dim=1))


@pytest.mark.parametrize("shape,k", [((4, 8), 3), ((4, 8), 16), ((4, 2), 4)])
def test_routing_plans_refuse_unsupported_k(torch_mod, shape, k):
    logits = torch_mod.empty(shape, device="meta")
    with pytest.raises(ValueError, match="k must be a power of two"):
        moe_topk_softmax.plan(logits, k, moe_topk_softmax.allocate(logits, k))


def test_route_plan_refuses_a_block_size_not_a_power_of_two(torch_mod):
    logits = torch_mod.empty((4, 8), device="meta")
    with pytest.raises(ValueError, match="block_size must be a power of two"):
        moe_route.plan(logits, 2, 48, moe_route.allocate(logits, 2, 48))


def test_gpu_compare_is_exact_on_integer_outputs(torch_mod):
    from tileport.gpu.check import compare
    ref = torch_mod.tensor([5, 200000, -1], dtype=torch_mod.int32)
    assert compare(ref.clone(), ref, 1e-5, 1e-5)[0]
    off = ref.clone()
    off[1] += 1  # within atol + rtol * |ref| = 2: a float comparison would pass it
    ok, max_abs, _, msg = compare(off, ref, 1e-5, 1e-5)
    assert not ok and max_abs == 1 and "integer values differ" in msg


def _align_by_interpreter(ids: list[int], experts: int, block: int):
    """The plan's three align kernels (cuTile Python's IR, its sizes from align_config) run in turn by the Tile IR
    interpreter, each on the arrays the previous one left."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed: the kernels' IR needs it")
    from tileport.ops.capture_ref import reference_bytecode
    from tileport.tileir import read_module
    from tileport.tileir.interp.executor import Array, run_kernel
    n = len(ids)
    c = moe_route.align_config(n, experts)
    n_sorted, n_blocks = moe_route.sizes(n, experts, block)
    arrays = {"topk_ids": np.array(ids, dtype=np.int32), "sorted_ids": np.full(n_sorted, -7, dtype=np.int32),
              "counts": np.full((c["chunks"], c["E_PAD"]), -7, dtype=np.int32),
              "offsets": np.full((c["chunks"], c["E_PAD"]), -7, dtype=np.int32),
              "expert_ends": np.full(c["E_PAD"], -7, dtype=np.int32),
              "expert_ids": np.full(n_blocks, -7, dtype=np.int32), "num_post_pad": np.full(1, -7, dtype=np.int32)}
    for cap in moe_route.align_captures((n, experts, 1, block)):
        module = read_module(reference_bytecode(moe_route.SPEC, cap))
        grid = (1 if cap.kernel == "moe_align_offsets_kernel" else c["chunks"], 1, 1)
        arrays.update(run_kernel(module, [(name, Array(arrays[name], "i32")) for name in cap.arrays], grid))
    return [arrays[name].tolist() for name in ("sorted_ids", "expert_ids", "num_post_pad")]


@pytest.mark.parametrize("tokens,experts,k,block", [(3, 8, 2, 16), (100, 60, 4, 64), (300, 256, 8, 64),
                                                     (1100, 256, 8, 16)])
def test_align_kernels_in_turn_match_the_definition(tokens, experts, k, block):
    """Several chunks, a ragged last tile, several tiles per chunk (1100 x 8 slots: STEPS 2), empty experts, E not
    a power of two."""
    rng = random.Random(tokens)
    ids = [min(int(rng.expovariate(0.05)), experts - 1) for _ in range(tokens * k)]
    assert _align_by_interpreter(ids, experts, block) == list(_align_by_hand(ids, experts, block))
