"""Element-wise vector addition c = a + b over 1-D arrays (f32 / f16 / bf16).

One tile block adds one TILE-sized slice. The last slice is ragged: `ct.load` pads it (the padded
lanes are never stored) and `ct.store` drops the out-of-bounds lanes, so no mask is needed. Loads and
stores are view accesses (`make_partition_view` + `load_view_tko` / `store_view_tko`), which tileiras
may lower to TMA bulk copies.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def vector_add_kernel(a, b, c, TILE: ConstInt):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,))
    tb = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=ta + tb)
