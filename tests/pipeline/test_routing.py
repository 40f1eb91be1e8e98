"""The router, exhaustively: every stage x attempt x verdict x class/owner x run state, against an
oracle written from the TileGym routing table (porting-protocol-tilegym.md §2.2-2.3) and the
architecture's verdict protocol, plus the caps and repair limits on whole simulated runs."""

from __future__ import annotations

import itertools

import pytest

from tileport.pipeline.routing import CAPS, TABLE, RunState, Terminal, match, next_step
from tileport.pipeline.verdicts import VERDICTS, Stage

S, T = Stage, Terminal
CLASSES = (None, "host", "kernel", "env")
OWNERS = (None, "host", "kernel")


def oracle(stage: Stage, attempt: int, verdict: str, fail_class, owner, st: RunState):
    """Expected next step: a (Stage, attempt) or a Terminal. Written independently of routing.py."""
    def go(target: Stage):
        if st.runs[target] >= CAPS[target]:
            return T.COMPLETE
        return (target, st.runs[target] + 1)

    def f_or_complete():
        return go(S.F) if st.residual else T.COMPLETE

    if verdict == "BLOCKED" and fail_class == "env" and stage != S.F:
        return T.BLOCKED_ENV
    if stage == S.A:
        return go(S.B) if verdict == "PASS" else T.STOPPED
    if stage == S.B:
        return go(S.D) if verdict == "COMPILED" else T.STOPPED
    if stage == S.D:
        if verdict == "ALL_PASS":
            return go(S.E)
        if verdict == "FAIL_FIXABLE":  # no launches: only the user can supply them
            return T.STOPPED
        if fail_class == "env":  # FAIL with class env
            return T.BLOCKED_ENV
        if attempt >= 2:
            return T.COMPLETE
        if fail_class == "host":
            return go(S.D)
        return go(S.C) if not st.ran(S.C) else T.COMPLETE  # kernel, or no class
    if stage == S.E:
        if verdict == "DONE":
            return T.DONE
        if attempt >= 2:
            return f_or_complete() if verdict == "INVESTIGATE" else T.COMPLETE
        if not st.ran(S.C) and not st.respawned(S.B):
            return go(S.C)
        return f_or_complete() if verdict == "INVESTIGATE" else T.COMPLETE
    if stage == S.C:
        if verdict == "FAIL_FIXABLE":
            if owner == "host":
                return go(S.D) if not st.respawned(S.D) else T.COMPLETE
            return go(S.B) if not st.respawned(S.B) else T.COMPLETE
        if verdict in ("PASS", "PASS_WITH_NOTES") and st.residual and st.last_e == "INVESTIGATE":
            return go(S.F)
        return T.COMPLETE
    if stage == S.F:
        return T.COMPLETE
    raise AssertionError(stage)


def states():
    """Run states: how often each stage ran before (within caps), F enabled or not, last E verdict."""
    for b, c, d, e, f in itertools.product((1, 2), (0, 1), (0, 1, 2), (0, 1, 2), (0, 1)):
        for residual in (False, True):
            for last_e in ((None,) if e == 0 else ("INVESTIGATE", "BLOCKED")):
                st = RunState(residual=residual)
                st.runs.update({S.A: 1, S.B: b, S.C: c, S.D: d, S.E: e, S.F: f})
                st.last_e = last_e
                yield st


def cases():
    for stage in Stage:
        for verdict in VERDICTS[stage]:
            for attempt in range(1, CAPS[stage] + 1):
                for cls in CLASSES:
                    for owner in OWNERS:
                        yield stage, attempt, str(verdict), cls, owner


@pytest.mark.parametrize("stage", list(Stage))
def test_every_verdict_of_every_stage_routes_like_the_table(stage):
    n = 0
    for st in states():
        for s, attempt, verdict, cls, owner in cases():
            if s != stage or st.runs[s] < attempt:
                continue  # the stage has run at least `attempt` times when its verdict is routed
            step = next_step(st, s, attempt, verdict, cls, owner)
            got = step.terminal if step.is_terminal else (step.stage, step.attempt)
            want = oracle(s, attempt, verdict, cls, owner, st)
            assert got == want, (f"{s}({attempt}) {verdict} class={cls} owner={owner} runs={dict(st.runs)} "
                                 f"residual={st.residual} last_e={st.last_e}: got {got}, want {want} ({step.why})")
            assert step.why
            n += 1
    assert n > 100


def test_every_row_of_the_table_is_reachable():
    used = set()
    for s, attempt, verdict, cls, owner in cases():
        used.add(TABLE.index(match(s, attempt, verdict, cls, owner)))
    assert used == set(range(len(TABLE))), [TABLE[i] for i in set(range(len(TABLE))) - used]


def test_unknown_verdicts_are_refused():
    with pytest.raises(ValueError):
        match(S.A, 1, "COMPILED")
    with pytest.raises(ValueError):
        match(S.E, 1, "FAIL")  # E never fails


def test_caps_are_the_architecture_caps():
    assert CAPS == {S.A: 1, S.B: 2, S.C: 1, S.D: 2, S.E: 2, S.F: 1}


def simulate(verdicts, residual=False):
    """Feed a sequence of (verdict, class, owner) to the router; returns the route and the terminal."""
    st = RunState(residual=residual)
    stage, attempt, route = S.A, 1, []
    for verdict, cls, owner in verdicts:
        st.record(stage, verdict)
        route.append(f"{stage}{'' if attempt == 1 else f'({attempt})'}")
        step = next_step(st, stage, attempt, verdict, cls, owner)
        if step.is_terminal:
            return route, step.terminal
        stage, attempt = step.stage, step.attempt
    raise AssertionError(f"route did not terminate: {route}, next {stage}({attempt})")


def test_happy_path_ends_done():
    assert simulate([("PASS", None, None), ("COMPILED", None, None), ("ALL_PASS", None, None),
                     ("DONE", None, None)]) == (["A", "B", "D", "E"], T.DONE)


def test_planted_defect_route_a_b_d_c_b2():
    route, term = simulate([("PASS", None, None), ("COMPILED", None, None), ("FAIL", "kernel", None),
                            ("FAIL_FIXABLE", None, "kernel"), ("COMPILED", None, None), ("ALL_PASS", None, None),
                            ("DONE", None, None)])
    assert route == ["A", "B", "D", "C", "B(2)", "D(2)", "E"] and term == T.DONE


def test_b_is_respawned_at_most_once():
    # E INVESTIGATE -> C -> B(2) -> D(2) -> E(2) INVESTIGATE ends the run (no second C, no B(3))
    route, term = simulate([("PASS", None, None), ("COMPILED", None, None), ("ALL_PASS", None, None),
                            ("INVESTIGATE", None, None), ("FAIL_FIXABLE", None, "kernel"), ("COMPILED", None, None),
                            ("ALL_PASS", None, None), ("INVESTIGATE", None, None)])
    assert route == ["A", "B", "D", "E", "C", "B(2)", "D(2)", "E(2)"] and term == T.COMPLETE


def test_c_runs_once():
    # D host -> D(2) kernel failure ends the run; D kernel -> C -> B(2) -> D(2) kernel failure: COMPLETE
    route, term = simulate([("PASS", None, None), ("COMPILED", None, None), ("FAIL", "kernel", None),
                            ("FAIL_FIXABLE", None, "kernel"), ("COMPILED", None, None), ("FAIL", "kernel", None)])
    assert route == ["A", "B", "D", "C", "B(2)", "D(2)"] and term == T.COMPLETE


def test_d_host_failure_is_repaired_once():
    route, term = simulate([("PASS", None, None), ("COMPILED", None, None), ("FAIL", "host", None),
                            ("FAIL", "host", None)])
    assert route == ["A", "B", "D", "D(2)"] and term == T.COMPLETE


def test_c_host_owner_goes_to_d2_unless_d_was_respawned():
    route, term = simulate([("PASS", None, None), ("COMPILED", None, None), ("FAIL", "kernel", None),
                            ("FAIL_FIXABLE", None, "host"), ("ALL_PASS", None, None), ("DONE", None, None)])
    assert route == ["A", "B", "D", "C", "D(2)", "E"] and term == T.DONE
    st = RunState()
    st.runs.update({S.A: 1, S.B: 1, S.C: 1, S.D: 2, S.E: 1})
    assert next_step(st, S.C, 1, "FAIL_FIXABLE", None, "host").terminal == T.COMPLETE


def test_env_block_stops_at_any_stage_and_says_so():
    for stage in (S.A, S.B, S.C, S.D, S.E):
        st = RunState()
        st.runs.update({x: 1 for x in Stage})
        step = next_step(st, stage, 1, "BLOCKED", "env", None)
        assert step.terminal == T.BLOCKED_ENV and "environment" in step.why


def test_missing_class_takes_the_kernel_route():
    st = RunState()
    st.runs.update({S.A: 1, S.B: 1, S.D: 1})
    step = next_step(st, S.D, 1, "FAIL", None, None)
    assert step.stage == S.C
    st.runs[S.C] = 1
    step = next_step(st, S.C, 1, "FAIL_FIXABLE", None, None)  # owner missing -> kernel
    assert step.stage == S.B and step.attempt == 2


def test_done_is_terminal_and_residual_runs_only_when_enabled():
    for residual in (False, True):
        st = RunState(residual=residual)
        st.runs.update({S.A: 1, S.B: 1, S.D: 1, S.E: 1, S.C: 1})
        assert next_step(st, S.E, 1, "DONE").terminal == T.DONE
        step = next_step(st, S.E, 1, "INVESTIGATE")  # C already ran
        assert (step.stage == S.F) if residual else (step.terminal == T.COMPLETE)
    route, term = simulate([("PASS", None, None), ("COMPILED", None, None), ("ALL_PASS", None, None),
                            ("INVESTIGATE", None, None), ("PASS_WITH_NOTES", None, None), ("ALIGNED", None, None)],
                           residual=True)
    assert route == ["A", "B", "D", "E", "C", "F"] and term == T.COMPLETE


def test_a_route_always_terminates_within_the_caps():
    """Whatever the stages answer, a run ends after at most sum(CAPS) stage runs."""
    import random
    rng = random.Random(0)
    for _ in range(3000):
        st, stage, attempt, n = RunState(residual=rng.random() < 0.5), S.A, 1, 0
        while True:
            verdict = rng.choice([str(v) for v in VERDICTS[stage]])
            cls, owner = rng.choice(CLASSES), rng.choice(OWNERS)
            st.record(stage, verdict)
            n += 1
            assert st.runs[stage] <= CAPS[stage]
            step = next_step(st, stage, attempt, verdict, cls, owner)
            if step.is_terminal:
                break
            stage, attempt = step.stage, step.attempt
        assert n <= sum(CAPS.values())
