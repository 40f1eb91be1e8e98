"""A kernel the translator refuses (test input of tests/pipeline): a cumulative sum along axis 1.

cuTile Python compiles it (so stage A captures the reference IR), but cutile-rs scans along axis 0
only, so the translator refuses it and stage B must stop with the diagnostic and its file:line:col.
"""
import cuda.tile as ct


@ct.kernel
def add_three_kernel(x, y):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(16, 64))
    t = t + 3
    t = ct.cumsum(t, axis=1)
    ct.store(y, index=(bid, 0), tile=t)
