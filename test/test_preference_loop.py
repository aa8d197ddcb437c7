"""Human judgments reach the report's preference score and the coordinator's decisions.

A judged policy's preference score is (1 - w) x comfort + w x its judged strength (the mean
Bradley-Terry probability that it is preferred over the other judged items); judgments that
arrive after an evaluation are refitted when the coordinator decides, and decisions.jsonl
records which (count, digest, cut-off time). The loop runs with the in-process ToyExecutor of
test_coordinator_runner (real datasets and reports, no physics).
"""

from __future__ import annotations

import json
import math

import pytest

from clawgym_ros import constants as C
from clawgym_ros.coordinator.runner import LoopRunner, read_report
from clawgym_ros.evaluation.preference import (
    JUDGMENT_WEIGHT,
    Judgment,
    add_judgments,
    at_decision,
    fit_bradley_terry,
    judged_preference,
    judged_section,
    judgments_digest,
    read_store,
    refresh_preference,
    snapshot,
    store_path,
)
from test.test_coordinator_runner import ToyExecutor, loop_cfg

COMFORT = {"value": 0.6, "ci": [0.5, 0.7], "n": 10}


def judgments(winner: str, loser: str, wins: int, losses: int = 0) -> list[Judgment]:
    return ([Judgment(winner, loser, "a") for _ in range(wins)]
            + [Judgment(winner, loser, "b") for _ in range(losses)])


def test_judged_strength_and_combined_score():
    js = judgments("x", "y", 4, 1)
    fit = fit_bradley_terry(js)
    x, y = judged_preference(fit, "x"), judged_preference(fit, "y")
    # two items: the model probability that one beats the other, and its complement
    d = fit.scores[fit.items.index("x")] - fit.scores[fit.items.index("y")]
    assert x.value == pytest.approx(1 / (1 + math.exp(-d)))
    assert x.value + y.value == pytest.approx(1.0) and x.value > 0.5 and x.n == 5
    assert x.low < x.value < x.high
    assert judged_preference(fit, "z") is None       # never judged: no judged strength
    fitted, part = judged_section(js, "x", COMFORT, 0.01, 0.95)
    assert fitted["n"] == 5 and fitted["digest"] == judgments_digest(js)
    w = JUDGMENT_WEIGHT
    assert part["item"] == "x" and part["weight"] == w
    assert part["score"]["value"] == pytest.approx((1 - w) * 0.6 + w * x.value)
    assert part["score"]["ci"][0] == pytest.approx((1 - w) * 0.5 + w * x.low)
    _, other = judged_section(js, "y", COMFORT, 0.01, 0.95)
    assert other["score"]["value"] < 0.6 < part["score"]["value"]
    # a policy nobody judged keeps the comfort score (no policy part)
    assert judged_section(js, "z", COMFORT, 0.01, 0.95)[1] is None
    assert judged_section([], "x", COMFORT, 0.01, 0.95) == (None, None)


def test_store_lines_carry_arrival_time_and_snapshot_digest(tmp_path):
    empty = snapshot(tmp_path)
    assert empty.to_dict()["count"] == 0 and empty.digest == judgments_digest(())
    add_judgments(tmp_path, judgments("x", "y", 2), "s1", "test")
    add_judgments(tmp_path, judgments("y", "x", 1), "s2", "test")
    lines = [json.loads(x) for x in store_path(tmp_path).read_text().splitlines()]
    assert all(line["received"].endswith("+00:00") for line in lines)
    snap = snapshot(tmp_path)
    assert snap.judgments == tuple(read_store(tmp_path))
    assert snap.to_dict()["count"] == 3 and snap.digest == judgments_digest(snap.judgments)
    assert max(line["received"] for line in lines) <= snap.cutoff


def test_refresh_changes_only_the_preference_judgments_and_score(tmp_path):
    cfg = loop_cfg(iterations=1)
    runner = LoopRunner(cfg, tmp_path, ToyExecutor())
    state = runner.load()
    while not state.history:
        state = runner.step(state)
    report = read_report(runner.store, state.history[0]["report_id"])
    checkpoint = report["config"]["checkpoint_id"]
    js = judgments(checkpoint, "scripted:pick_place", 3)
    new = refresh_preference(report, js, checkpoint)
    pref = new["aggregated"][C.DIM_PREFERENCE]
    assert pref["policy"]["item"] == checkpoint and pref["judgments"]["n"] == 3
    assert new["scores"][C.DIM_PREFERENCE] == pref["policy"]["score"]
    assert new["scores"][C.DIM_PREFERENCE]["value"] > report["scores"][C.DIM_PREFERENCE]["value"]
    for dim in (C.DIM_FUNCTIONAL, C.DIM_ROBUSTNESS, C.DIM_GENERALIZATION):
        assert new["scores"][dim] == report["scores"][dim]
    assert report["aggregated"][C.DIM_PREFERENCE]["judgments"] is None   # the input is kept
    from clawgym_ros.report.schema import validate_report

    validate_report(new)


def test_the_coordinator_uses_the_judgments_that_arrived_before_its_decision(tmp_path):
    """Judgments given after iteration 0's evaluation change the preference score the
    iteration-1 decision sees (here enough to meet a preference target and stop); the
    decision records count, digest and cut-off; judgments given later are not in it."""
    cfg = loop_cfg(iterations=3, targets={"preference": 0.6})
    runner = LoopRunner(cfg, tmp_path, ToyExecutor())
    state = runner.load()
    while not state.history:
        state = runner.step(state)
    report = read_report(runner.store, state.history[0]["report_id"])
    comfort = report["scores"][C.DIM_PREFERENCE]["value"]
    assert comfort < 0.6                     # the report alone does not meet the target
    checkpoint = state.iterations[0]["checkpoint_id"]
    given = judgments(checkpoint, "scripted:pick_place", 5)
    add_judgments(tmp_path, given, "rater-1", "test")
    state = runner.step(state)               # the decision after iteration 0
    decisions = [json.loads(x) for x in
                 (tmp_path / C.DIR_LOOP / C.FILE_DECISIONS).read_text().splitlines()]
    first, second = decisions
    assert first["iteration"] == 0 and "judgments" not in first   # nothing evaluated yet
    record = second["judgments"]
    assert record["count"] == 5 and record["digest"] == judgments_digest(given)
    assert record["in_report"] == 0 and record["refitted"] and record["policy"] == checkpoint
    assert record["preference"]["report"] == comfort
    expected = refresh_preference(report, given, checkpoint)["scores"][C.DIM_PREFERENCE]
    assert record["preference"]["decision"] == expected["value"] > 0.6
    assert second["based_on"]["scores"][C.DIM_PREFERENCE] == expected["value"]
    assert second["stop"] and second["stop_reason"] == "targets met"
    assert state.done
    # a judgment arriving after the decision is not in it
    add_judgments(tmp_path, judgments("scripted:pick_place", checkpoint, 1), "rater-2", "t")
    late = json.loads(store_path(tmp_path).read_text().splitlines()[-1])["received"]
    assert late >= record["cutoff"]


def test_a_decision_with_no_new_judgments_does_not_refit(tmp_path):
    report = {"config": {"checkpoint_id": "c" * 64},
              "aggregated": {C.DIM_PREFERENCE: {"comfort": COMFORT, "judgments": None}},
              "scores": {C.DIM_PREFERENCE: COMFORT}}
    same, record = at_decision(tmp_path, report)
    assert same is report and record["count"] == 0 and not record["refitted"]
    add_judgments(tmp_path, judgments("c" * 64, "d", 2), "s", "t")
    new, record = at_decision(tmp_path, report)
    assert record["refitted"] and record["count"] == 2
    assert new["scores"][C.DIM_PREFERENCE]["value"] > COMFORT["value"]
    # a report that already fitted exactly these judgments is taken as it is
    again, record = at_decision(tmp_path, new)
    assert again is new and not record["refitted"] and record["in_report"] == 2
