"""Loop-carried values by liveness on the source AST (frontends/liveness.py)."""

from __future__ import annotations

import ast

from tileport.frontends.liveness import Frames

HELPER = '''
def stats_and_last(x, n):
    t = load(x, 0)
    for c in range(1, n):
        t = load(x, c)
    return t
'''


def _loop_frame(src: str) -> Frames:
    fn = ast.parse(src).body[0]
    frames = Frames()
    body = fn.body[:-1]  # an inlined helper is lowered without its final return (its value is the call's)
    loop = next(i for i, st in enumerate(body) if isinstance(st, ast.For))
    frames.stack.append([body, loop, fn])
    return frames


def test_a_value_only_the_helpers_return_reads_is_live_after_its_loop():
    """The slip: `t` was a fresh local of each iteration, and the port returned the value from before
    the loop (2 loop results in cuTile's IR, 1 in the port's)."""
    assert _loop_frame(HELPER).live_after("t")


def test_a_value_the_return_does_not_read_is_not_live():
    assert not _loop_frame(HELPER.replace("return t", "return n")).live_after("t")
    assert not _loop_frame(HELPER.replace("    return t\n", "    pass\n")).live_after("t")
