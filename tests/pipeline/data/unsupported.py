"""A kernel the translator refuses (test input of tests/pipeline): a `while` loop.

cuTile Python compiles it (so stage A captures the reference IR), but the translator does not lower
`while` loops, so stage B must stop with the diagnostic and its file:line:col.
"""
import cuda.tile as ct


@ct.kernel
def add_three_kernel(x, y):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(1024,))
    i = 0
    while i < 3:
        t = t + 1
        i = i + 1
    ct.store(y, index=(bid,), tile=t)
