"""Disturbance cells and the recovery metric (issue 22, item 4).

The ``disturbance`` family fires one seeded event per episode (object knocked out of the
gripper, object displaced after the grasp, goal moved, arm pushed) after the task's trigger
stage; the pick_place expert notices and replans; the evaluator records per episode whether a
disturbance happened, when, whether the episode still delivered and the steps until the lost
stage was regained, and the report gives the recovery rate and the median time to recover per
task, cell and event with CIs.

The expert's recovery rate on object drops is measured here on a few episodes (``make test``);
the full 40-episode measurement is the opt-in test at the end (``CLAWGYM_ACCEPTANCE=1``).
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import yaml

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C
from clawgym_ros import perturbations as P
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.perturbations.disturbance import (
    EVENT_ANY,
    Disturbance,
    DisturbanceConfig,
    RecoveryWatch,
)

#: Recovery bar of the scripted expert on pick_place object drops (the issue's acceptance).
RECOVERY_BAR = 0.9
STAGES = ("reach", "grasp", "lift", "transport", "place", "release")
EVENTS = {"object_drop": "lift", "object_displace": "grasp", "goal_move": "lift",
          "arm_push": "lift"}


def _core(**kw):
    return P.make(C.FAMILY_DISTURBANCE, {"intensity": 1.0, "seed": 5, **kw})


# --------------------------------------------------------------------------------- the core
def test_family_is_registered_and_its_config_checks_its_fields():
    assert C.FAMILY_DISTURBANCE in C.PERTURBATION_FAMILIES
    assert C.FAMILY_DISTURBANCE not in C.OBSERVATION_FAMILIES      # acts on the simulator
    assert isinstance(_core(), Disturbance)
    for field, value in (("event", "earthquake"), ("max_delay_steps", -1),
                         ("displacement_m", 0.5), ("push_steps", 0)):
        with pytest.raises(ConfigError, match=field):
            DisturbanceConfig(intensity=1.0, **{field: value})


def test_trigger_delay_and_size_come_from_the_seeded_streams():
    def fire(seed: int, episode_seed: int) -> tuple[int, dict]:
        core = P.make(C.FAMILY_DISTURBANCE, {"intensity": 0.5, "seed": seed})
        core.reset(episode_seed)
        core.bind(EVENTS, "pick_place")
        step = next(k for k in range(1, 200)
                    if core.before_step(["reach", "grasp", "lift"] if k > 10 else []))
        return step, core.draw()

    a, b = fire(1, 7), fire(1, 7)
    assert a == b                                            # same seeds, same event
    assert 11 <= a[0] <= 11 + 40                              # trigger stage + delay
    others = {fire(1, s)[0] for s in range(8)} | {fire(s, 7)[0] for s in range(2, 6)}
    assert len(others) > 2                                    # the delay is drawn
    full = P.make(C.FAMILY_DISTURBANCE, {"intensity": 1.0, "seed": 1})
    full.reset(7)
    assert full.draw()["distance"] == pytest.approx(2 * a[1]["distance"])   # intensity scales
    off = P.make(C.FAMILY_DISTURBANCE, {"intensity": 0.0})
    off.reset(0)
    off.bind({}, "peg_insert")                                # disabled: nothing to bind
    assert not any(off.before_step(STAGES) for _ in range(100))


def test_an_event_the_task_does_not_support_is_one_clear_error():
    core = _core(event="arm_push")
    core.reset(0)
    with pytest.raises(ConfigError, match="event='arm_push'.*supported by pick_place"):
        core.bind({"object_drop": "lift"}, "pick_place")
    with pytest.raises(ConfigError, match="peg_insert supports no disturbance"):
        core.bind({}, "peg_insert")
    picked = set()
    for seed in range(12):
        core = _core(event=EVENT_ANY)
        core.reset(seed)
        core.bind(EVENTS, "pick_place")
        picked.add(core.event)
        assert core.trigger_stage == EVENTS[core.event]
    assert picked == set(EVENTS)                              # any: drawn per episode


class _Tracker:
    """A stage tracker stand-in: ``held`` says which stage indices hold now."""

    stages = STAGES

    def __init__(self, reached: int) -> None:
        self.reached = [(s, 0.0) for s in STAGES[:reached]]
        self.held: set[int] = set(range(reached))

    def check(self, index, state):
        return index in self.held


def test_recovery_is_the_lost_stage_regained_or_new_progress():
    # object drop: lift (index 2) stops holding, then holds again 50 steps later
    t, w = _Tracker(3), RecoveryWatch()
    w.start("object_drop", 100, 2.0, 3)
    t.held = {0}
    for step in range(100, 150):
        w.observe(step, t, {})
    t.held = {0, 1, 2}
    w.observe(150, t, {})
    rec = w.record()
    assert (rec["lost_stage"], rec["recovered_step"], rec["steps_to_recover"]) == \
        ("lift", 150, 50)
    # goal moved: nothing lost; recovered when the next stage is reached
    t, w = _Tracker(3), RecoveryWatch()
    w.start("goal_move", 10, 0.2, 3)
    w.observe(10, t, {})
    assert w.record()["recovered_step"] is None
    t.reached.append(("transport", 1.0))
    w.observe(42, t, {})
    assert w.record()["steps_to_recover"] == 32 and w.record()["lost_stage"] == ""
    # never regained
    t, w = _Tracker(3), RecoveryWatch()
    w.start("object_drop", 5, 0.1, 3)
    t.held = set()
    for step in range(5, 500):
        w.observe(step, t, {})
    assert w.record()["steps_to_recover"] is None and w.record()["disturbed"]


# ------------------------------------------------------------------------ records, metrics
def _result(index: int, success: bool, recovery: dict | None) -> EpisodeResult:
    family = C.FAMILY_DISTURBANCE if recovery is not None else C.FAMILY_NONE
    return EpisodeResult(index=index, seed=index, task="pick_place", template="cube",
                         success=success, stages=STAGES, family=family,
                         families=(family,) if recovery is not None else (),
                         intensity=1.0 if recovery is not None else 0.0, recovery=recovery)


def _disturbed(step: int, ttr: int | None) -> dict:
    return {"disturbed": True, "event": "object_drop", "step": step, "time_s": step * 0.02,
            "stages_before": 3, "lost_stage": "lift",
            "recovered_step": None if ttr is None else step + ttr, "steps_to_recover": ttr}


def test_the_recovery_field_is_left_out_where_there_is_no_disturbance():
    plain = _result(0, True, None)
    assert "recovery" not in plain.to_dict()
    assert EpisodeResult.from_dict(plain.to_dict()) == plain
    hit = _result(1, False, _disturbed(120, None))
    data = hit.to_dict()
    assert data["recovery"]["delivered"] is False and data["recovery"]["step"] == 120
    assert EpisodeResult.from_dict(data) == hit
    quiet = _result(2, True, {"disturbed": False, "event": "object_drop"})
    assert quiet.recovery == {"disturbed": False, "event": "object_drop", "delivered": True}
    with pytest.raises(ConfigError, match="recovery.colour"):
        _result(3, True, {"disturbed": True, "colour": 1})
    with pytest.raises(ConfigError, match="recovery.step"):
        _result(3, True, {**_disturbed(10, 5), "step": -4})


def test_report_metrics_give_recovery_rate_and_median_steps_with_cis():
    from clawgym_ros.evaluation.metrics import MetricsConfig, median_ci, robustness

    cfg = MetricsConfig()
    nominal = [_result(i, True, None) for i in range(4)]
    assert "disturbance_recovery" not in robustness(nominal, cfg)    # old reports keep ids
    ttrs = [150, 160, 170, 180, 190, 200, 210, 220, None, None]
    eps = [_result(10 + i, t is not None, _disturbed(100, t)) for i, t in enumerate(ttrs)]
    eps.append(_result(30, False, {"disturbed": False, "event": "object_drop"}))
    rows = robustness(nominal + eps, cfg)["disturbance_recovery"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["task"], row["family"], row["event"]) == ("pick_place", "disturbance",
                                                         "object_drop")
    assert (row["episodes"], row["disturbed"]) == (11, 10)
    assert row["recovery_rate"]["value"] == 0.8 and row["recovery_rate"]["n"] == 10
    lo, hi = row["recovery_rate"]["ci"]
    assert 0.4 < lo < 0.8 < hi < 1.0
    assert row["steps_to_recover"]["value"] == 185.0 and row["steps_to_recover"]["n"] == 8
    assert row["steps_to_recover"]["ci"] == [150.0, 220.0]
    # the order-statistic interval covers the median at about its level
    rng = np.random.default_rng(0)
    cover = np.mean([(lambda e: e.low <= np.log(2) <= e.high)(median_ci(rng.exponential(
        size=30))) for _ in range(1000)])
    assert 0.93 <= cover <= 0.99


def test_the_report_shows_recovery_per_task_cell_and_event(tmp_path):
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.suites import parse_suite
    from clawgym_ros.report.build import build_report
    from clawgym_ros.report.html import render_html

    data = copy.deepcopy(BASE)
    data["cells"]["nominal"] = True
    suite = parse_suite(data, "s.yaml")
    nominal = [_result(i, True, None) for i in range(4)]
    eps = [_result(4 + i, t is not None, _disturbed(100, t))
           for i, t in enumerate([150, 170, 190, None])]
    report = build_report(nominal + eps, suite, EvalConfig(suite="d"))   # schema-checked
    assert "recovery" not in report["per_episode"][0]
    assert report["per_episode"][4]["recovery"]["steps_to_recover"] == 150
    row = report["aggregated"]["robustness"]["disturbance_recovery"][0]
    assert row["recovery_rate"]["value"] == 0.75 and row["steps_to_recover"]["value"] == 170
    line = next(x for x in report["diagnosis"] if x.startswith("Disturbance"))
    assert "object_drop on pick_place (intensity 1): 75% of 4 disturbed episodes still " \
        "delivered; median 170" in line
    page = render_html(report)
    assert "<h3>Disturbances</h3>" in page and "object_drop" in page
    plain = build_report(nominal, parse_suite(copy.deepcopy(data), "s.yaml"),
                         EvalConfig(suite="d"))
    assert "disturbance_recovery" not in plain["aggregated"]["robustness"]
    assert "Disturbances" not in render_html(plain)


# ------------------------------------------------------------------------------- suites
BASE = {"name": "d", "seed": 0, "episodes_per_cell": 2,
        "tasks": [{"task": "pick_place", "templates": ["cube"]}],
        "cells": {"nominal": False,
                  "sweeps": [{"family": "disturbance", "intensities": [1.0]}]}}


def _load(tmp_path, data):
    from clawgym_ros.evaluation.suites import load_suite

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_suite(path), path


def test_suites_name_the_family_and_its_event_and_refuse_unsupported_ones(tmp_path):
    from clawgym_ros.evaluation.suites import expand

    suite, _ = _load(tmp_path, BASE)
    specs = expand(suite)
    assert [s.family for s in specs] == ["disturbance"] * 2 and specs[0].event == ""
    assert "event" not in suite.to_dict()["cells"][0]
    data = copy.deepcopy(BASE)
    data["cells"]["sweeps"][0]["event"] = "goal_move"
    suite, _ = _load(tmp_path, data)
    assert {s.event for s in expand(suite)} == {"goal_move"}
    assert suite.to_dict()["cells"][0]["event"] == "goal_move"
    for mutate, fragment in (
            (lambda d: d["tasks"].append({"task": "gps_nav", "templates": ["square_route"]}),
             "cells.sweeps[disturbance].event='object_drop' is invalid; allowed: one of "
             "gps_outage or any (supported by gps_nav)"),
            (lambda d: d["cells"]["sweeps"][0].update(event="gps_outage"),
             "cells.sweeps[disturbance].event='gps_outage' is invalid; allowed: one of "
             "object_drop, object_displace, goal_move, arm_push or any (supported by "
             "pick_place)"),
            (lambda d: d["cells"]["sweeps"][0].update(event="quake"),
             "cells.sweeps[0].event='quake'"),
            (lambda d: d["cells"]["sweeps"].append({"family": "lighting", "event": "goal_move",
                                                    "intensities": [0.5]}),
             "cells.sweeps[1].event='goal_move' is invalid; allowed: no event for family "
             "lighting")):
        bad = copy.deepcopy(BASE)
        mutate(bad)
        with pytest.raises(ConfigError) as info:
            _load(tmp_path, bad)
        assert fragment in str(info.value) and str(tmp_path / "s.yaml") in str(info.value)


def test_the_shipped_disturbance_suite_loads():
    from clawgym_ros.evaluation.suites import expand, load_suite

    suite = load_suite("disturbance")
    cells = {(c.label, c.event) for c in suite.cells}
    assert cells == {("none", ""), ("disturbance", "object_drop")}
    assert len(expand(suite)) == 80


def test_a_family_registered_after_suites_were_imported_is_accepted(tmp_path, monkeypatch):
    from clawgym_ros.evaluation.suites import parse_suite

    monkeypatch.setattr(P, "_REGISTRY", dict(P._REGISTRY))
    data = copy.deepcopy(BASE)
    data["cells"]["sweeps"] = [{"family": "late_family", "intensities": [0.5]}]
    with pytest.raises(ConfigError, match="late_family"):
        parse_suite(copy.deepcopy(data), "s.yaml")
    P.add_family(P.FamilyEntry("late_family", "m:Core", "m:Wrapper"))
    assert parse_suite(data, "s.yaml").cells[0].families == ("late_family",)


def test_eval_cli_refuses_an_unsupported_disturbance_with_one_line(tmp_path, capsys):
    from clawgym_ros.cli import main

    data = copy.deepcopy(BASE)
    data["tasks"] = [{"task": "peg_insert", "templates": ["round_peg"]}]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    assert main(["eval", "--policy", "scripted:peg_insert", "--suite", str(path), "--seed",
                 "0", "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "peg_insert supports no disturbance" in err, err
    assert not (out / "artifacts").exists() or not any((out / "artifacts").rglob("*.json"))


def test_eval_cli_refuses_a_gps_outage_on_an_arm_task_with_one_line(tmp_path, capsys):
    from clawgym_ros.cli import main

    data = copy.deepcopy(BASE)
    data["cells"]["sweeps"][0]["event"] = "gps_outage"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    for mode in ("in_process", "ros"):
        assert main(["eval", "--policy", "scripted:pick_place", "--suite", str(path), "--seed",
                     "0", "--out", str(out), "--workers", "1", "--mode", mode]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "event='gps_outage' is invalid" in err, err
        assert "(supported by pick_place)" in err and not out.exists()


def test_a_gps_outage_holds_the_fix_mid_route_and_recovery_is_the_next_waypoint():
    """gps_nav's outage fires after waypoint_1 (+ the drawn delay), holds the observed fix
    with no-fix status for its drawn length, then fixes come again; it takes no stage away,
    so recovery is the next waypoint reached; the scripted navigator still arrives."""
    import gymnasium as gym

    from clawgym_ros.evaluation.rollout import PolicySource
    from clawgym_ros.perturbations.disturbance import DisturbanceWrapper
    from clawgym_ros.perturbations.gps import STATUS_NO_FIX

    core = _core(event="gps_outage")
    env = DisturbanceWrapper(gym.make(C.ENV_GPS_NAV, control_mode=C.CONTROL_DICT,
                                      template="square_route").unwrapped, core)
    policy = PolicySource.parse("scripted:gps_nav").load()
    obs, info = env.reset(seed=3)
    policy.reset()
    fixes, no_fix, info = [], [], {}
    for _ in range(2500):
        obs, _, terminated, _, info = env.step(policy.act(obs))
        fixes.append(obs[C.OBS_GPS].copy())
        no_fix.append(info.get(C.INFO_GPS_STATUS) == STATUS_NO_FIX)
        if terminated:
            break
    rec = info[C.INFO_DISTURBANCE]
    fired = core.fired_step
    assert rec["disturbed"] and rec["step"] == fired and rec["stages_before"] == 2
    assert 0.5 * 8.0 <= core.size <= 8.0 and core.outage_steps == round(core.size / 0.02)
    window = range(fired - 1, fired - 1 + core.outage_steps)      # observations without fix
    assert [i for i, n in enumerate(no_fix) if n] == list(window)
    assert all((fixes[i] == fixes[fired - 2]).all() for i in window)
    assert not (fixes[window[-1] + 1] == fixes[fired - 2]).all()
    assert rec["lost_stage"] == "" and rec["steps_to_recover"] > 0
    assert terminated and info["success"]
    env.close()


def test_synth_refuses_a_disturbance_mixture_the_task_does_not_support(tmp_path, capsys):
    from clawgym_ros.cli import main

    mix = tmp_path / "mix.yaml"
    mix.write_text("mixture:\n  - {task: peg_insert, family: disturbance, intensity: 1.0}\n")
    out = tmp_path / "run"
    assert main(["synth", "--mixture", str(mix), "--task", "peg_insert", "--episodes", "2",
                 "--seed", "0", "--workers", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("mixture[0].disturbance.event='object_drop' is invalid; allowed: "
                        "none: task peg_insert supports no disturbance"), err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_ros_mode_refuses_a_family_it_cannot_apply(tmp_path, capsys, monkeypatch):
    """A family the ROS graph cannot apply (no interposer, and here sim_node's disturbance
    part taken away): refused before anything starts, rather than run undisturbed under the
    family's name. (Disturbance cells through ROS: test_disturbance_ros.py.)"""
    from clawgym_ros.evaluation import ros_mode
    from clawgym_ros.evaluation.config import EvalConfig

    monkeypatch.setattr(ros_mode, "SIM_NODE_FAMILIES", ())
    from clawgym_ros.evaluation.rollout import PolicySource
    from clawgym_ros.orchestration.evaluation import run_evaluation

    _, path = _load(tmp_path, BASE)
    with pytest.raises(ConfigError, match="disturbance runs in_process only"):
        run_evaluation(EvalConfig(suite=str(path), seed=0, mode="ros"),
                       PolicySource.parse("scripted:pick_place"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ episodes (real physics)
def test_an_evaluated_episode_records_the_disturbance_and_its_recovery():
    """In-process evaluation of the scripted pick-and-lift baseline in a disturbance cell:
    the drop fires after it lifts, the record says when and that it never regained ``lift``
    (the baseline does not replan); the same spec gives the same record."""
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
    from clawgym_ros.evaluation.suites import EpisodeSpec

    runner = Runner(PolicySource.parse("scripted:pick_place:grasp_height=0.015").load(),
                    RolloutOptions(world="task", max_steps=260, failure_states=False))
    records = []
    for seed in range(6):
        spec = EpisodeSpec(index=0, task="pick_place", template="cube", split="train",
                           family="disturbance", families=("disturbance",), intensity=1.0,
                           schedule="constant", seed=seed, perturbation_seed=11)
        records.append(runner.run(spec))
    hit = [r for r in records if r.recovery["disturbed"]]
    assert hit, [r.stages_reached for r in records]
    for r in hit:
        rec = r.recovery
        assert rec["event"] == "object_drop" and rec["stages_before"] >= 3
        assert rec["lost_stage"] == "lift" and rec["steps_to_recover"] is None
        assert not rec["delivered"] and r.perturbation["disturbance.fired_step"] == rec["step"]
    for r in records:
        if not r.recovery["disturbed"]:        # never lifted: nothing to knock out
            assert "lift" not in r.stages_reached
    again = runner.run(EpisodeSpec(index=0, task="pick_place", template="cube", split="train",
                                   family="disturbance", families=("disturbance",),
                                   intensity=1.0, schedule="constant",
                                   seed=records.index(hit[0]), perturbation_seed=11))
    assert again == hit[0] and again.to_dict() == hit[0].to_dict()
    # The replanning baseline re-picks the dropped object: lift regained, steps counted.
    runner = Runner(PolicySource.parse("scripted:pick_place:grasp_height=0.015,replan=1"
                                       ).load(),
                    RolloutOptions(world="task", max_steps=420, failure_states=False))
    regained = []
    for seed in [records.index(r) for r in hit]:
        r = runner.run(EpisodeSpec(index=0, task="pick_place", template="cube", split="train",
                                   family="disturbance", families=("disturbance",),
                                   intensity=1.0, schedule="constant", seed=seed,
                                   perturbation_seed=11))
        assert r.recovery["disturbed"] and r.recovery["lost_stage"] == "lift"
        regained.append(r.recovery["steps_to_recover"])
    assert sum(s is not None for s in regained) >= len(regained) / 2, regained
    assert all(s is None or 0 < s < 300 for s in regained)


def _expert_episodes(n: int, event: str = "object_drop", replans: int | None = None,
                     first_seed: int = 1000):
    """The pick_place expert (synthesis path) on ``n`` disturbance episodes."""
    import clawgym_ros.tasks.pick_place as PP
    from clawgym_ros.synthesis.episode import EpisodeSpec
    from clawgym_ros.tasks import expert as E

    out = []
    saved = PP.MAX_REPLANS
    # the event as a mixture cell gives it: a perturbation override in the spec's options
    options = {"perturbation": {C.FAMILY_DISTURBANCE: {"event": event}}}
    try:
        if replans is not None:
            PP.MAX_REPLANS = replans
        for i in range(n):
            spec = EpisodeSpec(index=i, seed=first_seed + i, task="pick_place",
                               family=C.FAMILY_DISTURBANCE, intensity=1.0, options=options)
            expert = PP.PickPlaceExpert(spec, PP.PickPlace(), PP.PickPlaceEnv)
            assert expert.perturbations[C.FAMILY_DISTURBANCE].config.event == event
            record = E.run_expert(expert, PP.PickPlaceExpert.run)
            out.append((record, expert.env.watch.record()))
    finally:
        PP.MAX_REPLANS = saved
    return out


def test_the_expert_replans_after_object_drops():
    """A few object drops: every one fires, the expert notices (a skill ends ``disturbed``)
    and delivers anyway at the bar; with replanning off the same episodes fail, so the
    disturbance really takes the object away."""
    runs = _expert_episodes(5)
    assert all(w["disturbed"] and w["lost_stage"] == "lift" for _, w in runs)
    delivered = [r.outcome.success for r, _ in runs]
    assert sum(delivered) / len(runs) >= RECOVERY_BAR, [r.outcome.reason for r, _ in runs]
    for record, w in runs:
        if record.outcome.success:
            assert w["steps_to_recover"] is not None and w["steps_to_recover"] > 0
        assert any(c.detail.startswith("disturbed:") for c in record.skill_calls)
    blind = _expert_episodes(2, replans=0)
    assert not any(r.outcome.success for r, _ in blind)


def test_the_expert_carries_on_to_a_moved_goal():
    runs = _expert_episodes(2, event="goal_move")
    for record, w in runs:
        assert w["disturbed"] and record.outcome.success, record.outcome.reason
        assert record.achieved["bin"] == record.goal["bin"]            # the moved goal
        moved = [c.detail for c in record.skill_calls if "goal moved" in c.detail]
        assert moved == [f"disturbed: the goal moved to {record.goal['bin']}"]


@pytest.mark.parametrize("event,lost", [("object_displace", {"grasp", "lift"}),
                                        ("arm_push", {""})])
def test_the_expert_recovers_from_displacement_and_pushes(event, lost):
    for record, w in _expert_episodes(2, event=event):
        assert w["disturbed"] and w["lost_stage"] in lost and record.outcome.success, \
            (record.outcome.reason, w)


def test_a_mixture_cell_names_its_event_for_the_episodes_it_plans(tmp_path):
    """``event`` in a mixture cell: only on the disturbance family, carried to its episodes as
    a perturbation override, absent from the forms of cells without one (their ids stay),
    and carried by a ROS goal's MixtureEntry."""
    from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes

    mix = MixtureSpec.from_entries([
        {"task": "gps_nav", "family": "disturbance", "intensity": 1.0, "event": "gps_outage"},
        {"task": "pick_place", "family": "disturbance", "intensity": 1.0}])
    assert "event" not in mix.to_dict()["mixture"][1]
    assert mix.to_dict()["mixture"][0]["event"] == "gps_outage"
    specs = plan_episodes(mix, 4, 0, options={"images": True})
    by_task = {s.task: s.options for s in specs}
    assert by_task["gps_nav"] == {"images": True,
                                  "perturbation": {"disturbance": {"event": "gps_outage"}}}
    assert by_task["pick_place"] == {"images": True}
    with pytest.raises(ConfigError, match=r"mixture\[0\].event='goal_move' is invalid; "
                                          "allowed: no event for family lighting"):
        MixtureSpec.from_entries([{"task": "pick_place", "family": "lighting",
                                   "intensity": 0.5, "event": "goal_move"}])
    # a ROS goal carries it (MixtureEntry.event) and gives the same cells back
    from clawgym_interfaces.msg import MixtureEntry

    entries = [MixtureEntry(**cell.to_msg_fields()) for cell in mix.cells]
    assert entries[0].event == "gps_outage" and entries[1].event == ""
    assert MixtureSpec.from_entries(entries) == mix


@pytest.mark.parametrize("entry,fragment", [
    ("{task: pick_place, family: disturbance, intensity: 1.0, event: gps_outage}",
     "mixture[0].event='gps_outage' is invalid; allowed: one of object_drop, object_displace, "
     "goal_move, arm_push or any (supported by pick_place)"),
    ("{task: gps_nav, family: disturbance, intensity: 1.0, event: quake}",
     "mixture[0].event='quake' is invalid; allowed: one of gps_outage or any (supported by "
     "gps_nav)")])
def test_synth_refuses_a_mixture_event_it_cannot_run_with_one_line(tmp_path, capsys, entry,
                                                                   fragment):
    from clawgym_ros.cli import main

    mix = tmp_path / "mix.yaml"
    mix.write_text(f"mixture:\n  - {entry}\n")
    out = tmp_path / "run"
    assert main(["synth", "--mixture", str(mix), "--episodes", "2", "--seed", "0",
                 "--workers", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(fragment), err
    assert not out.exists()


def test_gps_outage_demonstrations_from_the_gps_nav_expert(tmp_path, capsys):
    """A mixture cell with ``event: gps_outage``: the gps_nav expert drives through the
    outage (its estimate coasts on odometry and IMU) and the episode is signed off."""
    import json

    from clawgym_ros.cli import main

    mix = tmp_path / "mix.yaml"
    mix.write_text("mixture:\n  - {task: gps_nav, template: square_route, family: "
                   "disturbance, intensity: 1.0, event: gps_outage}\n")
    assert main(["synth", "--mixture", str(mix), "--episodes", "1", "--seed", "0",
                 "--workers", "1", "--out", str(tmp_path / "run")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["accepted"] == 1, summary
    (episodes,) = (tmp_path / "run").rglob("episodes.jsonl")
    (row,) = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert row["perturbation"]["disturbance.event"] == 4.0 and row["stages"][-1] == "arrive"


def test_pick_place_demonstrations_under_each_arm_event(tmp_path, capsys):
    """Mixture cells naming pick_place's other events (the object displaced after the grasp,
    the goal moved, the arm pushed): the expert runs each one as named, replans and its
    episodes pass the dual sign-off."""
    import json

    from clawgym_ros.cli import main
    from clawgym_ros.perturbations.disturbance import EVENTS

    events = ("object_displace", "goal_move", "arm_push")
    mix = tmp_path / "mix.yaml"
    mix.write_text("mixture:\n" + "".join(
        f"  - {{task: pick_place, template: cube, family: disturbance, intensity: 1.0, "
        f"event: {e}}}\n" for e in events))
    assert main(["synth", "--mixture", str(mix), "--episodes", "3", "--seed", "5",
                 "--workers", "1", "--out", str(tmp_path / "run")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["accepted"] == 3, summary
    (episodes,) = (tmp_path / "run").rglob("episodes.jsonl")
    rows = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert sorted(EVENTS[int(r["perturbation"]["disturbance.event"])] for r in rows) == \
        sorted(events)


def test_disturbed_expert_episodes_are_signed_off_with_only_the_events_allowances():
    """Recovery demonstrations: a disturbed expert episode passes the task's dual sign-off
    (the interrupted skill ends a legal prefix, the restart follows the resume grammar, the
    finger snap of the firing step is excused); the same record with an illegal restart, a
    finger excess one step later or an arm-joint excess at the firing step is rejected."""
    import dataclasses

    from clawgym_ros.tasks.registry import get_task

    task = get_task("pick_place")
    signoff = task.signoff()
    (record, watch), = _expert_episodes(1)
    assert watch["disturbed"] and record.outcome.success
    assert signoff(record) == []
    t_fire = signoff.physical.excuse.fired_time(record)
    assert t_fire == pytest.approx(watch["time_s"], abs=1e-9)
    # Without the allowances (the plain validators): both rejections come back.
    plain = dataclasses.replace(signoff.semantic[task.name], resume_grammar=None)
    assert [r.code for r in plain.check(record)] == [C.REJECT_SKILL_SEQUENCE]
    physical = dataclasses.replace(signoff.physical, excuse=None)
    assert [r.code for r in physical.check(record)] == [C.REJECT_JOINT_VELOCITY]
    # An illegal restart: the object picked again without a grasp.
    cut = next(i for i, c in enumerate(record.skill_calls) if c.detail.startswith("disturbed"))
    calls = list(record.skill_calls)
    regrasp = next(i for i in range(cut + 1, len(calls)) if calls[i].name == "grasp")
    bad = dataclasses.replace(record, skill_calls=calls[:regrasp] + calls[regrasp + 1:])
    problems = [str(r) for r in signoff(bad)]
    assert len(problems) == 1 and "after disturbance 1" in problems[0], problems
    # Speed excess elsewhere: fingers one step after the firing step, an arm joint at it.
    step = int(np.argmin(np.abs(record.time - (t_fire + 0.02))))
    for joint, at in ((C.GRIPPER_JOINTS[0], step + 1), (C.ARM_JOINTS[0], step)):
        vel = record.joint_velocity.copy()
        vel[at, record.joint_names.index(joint)] = 5.0
        codes = [r.code for r in signoff(dataclasses.replace(record, joint_velocity=vel))]
        assert codes == [C.REJECT_JOINT_VELOCITY], (joint, codes)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get("CLAWGYM_ACCEPTANCE") != "1",
                    reason="opt-in (CLAWGYM_ACCEPTANCE=1): 40 expert episodes, ~1 min")
def test_acceptance_expert_recovers_object_drops_on_40_episodes():
    """The issue's bar: the scripted expert recovers >= 0.9 of object-drop episodes."""
    runs = _expert_episodes(40)
    hit = [(r, w) for r, w in runs if w["disturbed"]]
    assert len(hit) == 40
    rate = sum(r.outcome.success for r, _ in hit) / len(hit)
    print(f"expert recovery on object drops: {rate:.3f} of {len(hit)}")
    assert rate >= RECOVERY_BAR
