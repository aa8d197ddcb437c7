"""Coordinator core: loop config, next_plan (mixture, ADR ranges, loss weights, stop), seeds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from clawgym_ros import constants as C
from clawgym_ros.coordinator.config import (
    MODE_OPEN,
    LoopConfig,
    cell_key,
    load_loop_config,
    loop_config_from_dict,
)
from clawgym_ros.coordinator.plan import (
    LoopState,
    apply_floor,
    derive_seed,
    family_stability,
    initial_state,
    intensity_levels,
    next_plan,
)
from clawgym_ros.coordinator.runner import resolve_group_weights
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.config import EvalConfig
from clawgym_ros.evaluation.suites import expand, parse_suite
from clawgym_ros.evaluation.synthetic import SyntheticModel, synthetic_results
from clawgym_ros.report.build import build_report
from clawgym_ros.synthesis.mixture import MixtureSpec

ROOT = Path(__file__).resolve().parents[1]
SUITE = parse_suite({
    "name": "t", "seed": 0, "episodes_per_cell": 40,
    "tasks": [{"task": "pick_place", "templates": ["cube", "cylinder"],
               "held_out_templates": ["torus"]}],
    "cells": {"nominal": True, "sweeps": [
        {"family": "lighting", "intensities": [0.2, 0.4, 0.6, 0.8, 1.0]},
        {"family": "dynamics", "intensities": [0.2, 0.4, 0.6, 0.8, 1.0]}]},
}, "test")


def make_cfg(**kw) -> LoopConfig:
    base = {
        "name": "t", "seed": 3, "iterations": 4, "episodes_per_iteration": 30,
        "train_steps": 100, "eval_suite": "smoke",
        "mixture": [{"task": "pick_place", "family": "none", "weight": 2},
                    {"task": "pick_place", "family": "lighting", "weight": 1},
                    {"task": "pick_place", "family": "dynamics", "weight": 1}],
        "ranges": {"lighting": [0.0, 0.8], "dynamics": [0.0, 0.4]},
        "targets": {"functional": 0.95, "robustness": 0.95},
        "mixture_floor": 0.1,
    }
    base.update(kw)
    return loop_config_from_dict(base)


def report_for(model: SyntheticModel) -> dict:
    results = synthetic_results(expand(SUITE, seed=0), model)
    return build_report(results, SUITE, EvalConfig(suite="t"))


def cube_report(model: SyntheticModel, families) -> dict:
    """Report of a suite without held-out templates (no generalization gap): nominal plus a
    0.5 / 1.0 sweep of each family."""
    suite = parse_suite({
        "name": "t", "seed": 0, "episodes_per_cell": 40,
        "tasks": [{"task": "pick_place", "templates": ["cube"]}],
        "cells": {"nominal": True, "sweeps": [{"family": f, "intensities": [0.5, 1.0]}
                                              for f in families]}}, "t")
    return build_report(synthetic_results(expand(suite, seed=0), model), suite,
                        EvalConfig(suite="t"))


#: lighting collapses at high intensity, dynamics barely matters.
WEAK_LIGHTING = SyntheticModel(nominal=0.9, drop={"lighting": 1.0, "dynamics": 0.0},
                               held_out_factor=0.9)


def after_first(cfg: LoopConfig) -> LoopState:
    state = initial_state(cfg, "c" * 64)
    plan = next_plan(state, None, cfg)
    return dataclasses.replace(state, iteration=1, weights=plan.weights, ranges=plan.ranges,
                               episodes_used=plan.episodes, steps_used=plan.train_steps,
                               history=({"iteration": 0, "scores": {}, "report_id": "r" * 64},))


def test_config_files_load_and_errors_name_the_field(tmp_path):
    for name in ("pick_place", "pick_place_ablation", "pick_place_rl", "gps_nav", "multi_task"):
        cfg = load_loop_config(ROOT / "config" / "loop" / f"{name}.yaml")
        assert Path(cfg.eval_suite).is_file()
        assert cfg.tasks
    bad = tmp_path / "bad.yaml"
    bad.write_text("loop:\n  mixture: [{task: pick_place, family: fog}]\n")
    with pytest.raises(ConfigError, match=r"mixture\[0\]\.family='fog'"):
        load_loop_config(bad)
    with pytest.raises(ConfigError, match=r"ranges.lighting"):
        make_cfg(ranges={"dynamics": [0.0, 0.4]})
    with pytest.raises(ConfigError, match="mixture_floor"):
        make_cfg(mixture_floor=0.5)
    with pytest.raises(ConfigError, match="targets.speed"):
        make_cfg(targets={"speed": 1.0})
    assert load_loop_config(ROOT / "config/loop/pick_place.yaml", iterations=7).iterations == 7


def test_apply_floor_and_levels():
    shares = apply_floor([100.0, 1.0, 1.0, 0.001], 0.1)
    assert abs(sum(shares) - 1.0) < 1e-5
    assert min(shares) >= 0.1 - 1e-9
    assert shares[0] == max(shares)
    assert apply_floor([1, 1], 0.0) == [0.5, 0.5]
    assert intensity_levels(0.0, 0.6, 2) == [0.3, 0.6]
    assert intensity_levels(0.4, 0.4, 3) == [0.4]


def test_first_plan_uses_config_shares_and_valid_mixture():
    cfg = make_cfg()
    plan = next_plan(initial_state(cfg), None, cfg)
    assert not plan.stop
    assert plan.weights[cell_key({"task": "pick_place", "family": "none"})] == 0.5
    spec = MixtureSpec.from_entries(plan.mixture)   # valid for the Synthesize action
    lighting = [c.intensity for c in spec.cells if c.family == "lighting"]
    assert lighting == [0.4, 0.8]
    assert plan.seeds["evaluate"] == derive_seed(3, "evaluate", 0)
    assert plan.seeds["synthesize"] != derive_seed(3, "synthesize", 1)
    assert plan.decision["reasons"]


def test_weak_family_gets_more_share_and_its_range_narrows():
    cfg = make_cfg()
    state = after_first(cfg)
    report = report_for(WEAK_LIGHTING)
    assert any(g["family"] == "lighting" for g in report["gaps"])
    plan = next_plan(state, report, cfg)
    k_light = cell_key({"task": "pick_place", "family": "lighting"})
    k_dyn = cell_key({"task": "pick_place", "family": "dynamics"})
    assert plan.weights[k_light] > state.weights[k_light]
    assert plan.weights[k_dyn] < state.weights[k_dyn]
    assert min(plan.weights.values()) >= cfg.mixture_floor - 1e-9
    # ADR: lighting collapses at 0.8 -> narrow; dynamics holds at 0.4 -> widen.
    assert plan.ranges["lighting"][1] == pytest.approx(0.7)
    assert plan.ranges["dynamics"][1] == pytest.approx(0.5)
    assert plan.decision["adr"]["lighting"]["action"] == "narrow"
    assert plan.decision["adr"]["dynamics"]["action"] == "widen"
    # The reasons name the gap that drove the change.
    light_gap = next(g for g in report["gaps"] if g["family"] == "lighting")
    assert any(light_gap["condition"] in r for r in plan.decision["reasons"])
    assert plan.decision["drivers"][k_light][0]["condition"] == light_gap["condition"]
    # Loss weights follow the deviation, capped (nominal: the held-out template's gap).
    weights = plan.group_weights
    assert weights["pick_place/*/lighting"] > weights.get("pick_place/*/none", 1.0)
    assert weights.get("pick_place/*/dynamics", 1.0) < weights["pick_place/*/lighting"]
    assert max(weights.values()) <= cfg.max_group_weight
    # No observation-side gap (lighting, dynamics) and no gain: hardening stays as configured.
    assert plan.hardening_share == cfg.hardening_share == 0.0


def test_functional_shortfall_lifts_every_cell_of_the_task():
    """A weak task: nominal and perturbed cells alike get more (perturbed demonstrations are
    whole demonstrations); the failing family more still, one the policy copes with stays
    level with nominal."""
    weak = SyntheticModel(nominal=0.3, drop={"lighting": 0.8, "dynamics": 0.0},
                          held_out_factor=1.0)
    cfg = make_cfg(mixture=[{"task": "pick_place", "family": f, "weight": 1}
                            for f in ("none", "lighting", "dynamics")])
    state = after_first(cfg)
    report = cube_report(weak, ("lighting", "dynamics"))
    plan = next_plan(state, report, cfg)
    k = {f: cell_key({"task": "pick_place", "family": f})
         for f in ("none", "lighting", "dynamics")}
    assert plan.weights[k["lighting"]] > plan.weights[k["none"]]
    assert plan.weights[k["dynamics"]] == pytest.approx(plan.weights[k["none"]])
    drivers = plan.decision["drivers"]
    assert [d["kind"] for d in drivers[k["dynamics"]]] == ["functional"]
    assert [d["kind"] for d in drivers[k["lighting"]]] == ["functional", "perturbation"]
    # The shortfall all cells share does not enter the (relative) loss weights.
    assert set(plan.group_weights) == {"pick_place/*/lighting"}


def test_weak_task_gets_more_share_and_a_shared_shortfall_does_not_inflate_loss_weights():
    """Two tasks: the one failing more gets more of its cells; loss weights are relative to
    the least deficient task, so a task without own gaps keeps weight 1."""
    cfg = make_cfg(mixture=[{"task": "pick_place", "family": "none", "weight": 1},
                            {"task": "peg_insert", "family": "none", "weight": 1}],
                   ranges={}, targets={"functional": 0.9})

    def funnel(value):
        return [{"stage": "grasp", "value": 1.0}, {"stage": "success", "value": value}]

    report = {"gaps": [], "scores": {"functional": {"value": 0.5}},
              "aggregated": {"functional": {"funnel": {"pick_place": funnel(0.8),
                                                       "peg_insert": funnel(0.2)}}}}
    plan = next_plan(after_first(cfg), report, cfg)
    pick, peg = (cell_key({"task": t, "family": "none"}) for t in ("pick_place", "peg_insert"))
    assert plan.weights[peg] > plan.weights[pick]
    expected = (1 + 2 * 0.7) / (1 + 2 * 0.1)
    assert plan.group_weights == {"peg_insert/*/none": pytest.approx(expected)}
    assert plan.decision["drivers"][peg][0]["condition"] == "functional<target:peg_insert"


def test_hardening_follows_observation_gaps_in_the_closed_loop_only():
    noisy = SyntheticModel(nominal=0.9, drop={"sensor_noise": 0.8, "lighting": 0.0},
                           held_out_factor=1.0)
    report = cube_report(noisy, ("sensor_noise", "lighting"))
    gap = next(g for g in report["gaps"] if g["family"] == "sensor_noise")
    mixture = [{"task": "pick_place", "family": f, "weight": 1}
               for f in ("none", "sensor_noise", "lighting")]
    ranges = {"sensor_noise": [0.0, 0.5], "lighting": [0.0, 0.5]}
    cfg = make_cfg(mixture=mixture, ranges=ranges, hardening_share=0.1, hardening_gain=1.0,
                   max_hardening_share=0.4)
    plan = next_plan(after_first(cfg), report, cfg)
    assert plan.hardening_share == pytest.approx(min(0.4, 0.1 + gap["deviation"]))
    assert plan.decision["hardening_share"] == plan.hardening_share
    # Hardened rows draw sensor-noise intensities up to the family's (ADR) range.
    assert plan.hardening_intensity == plan.ranges["sensor_noise"][1]
    assert plan.decision["hardening_intensity"] == plan.hardening_intensity
    no_noise = make_cfg(mixture=mixture[:1] + mixture[2:], ranges={"lighting": [0.0, 0.5]})
    assert next_plan(after_first(no_noise), report, no_noise).hardening_intensity == \
        C.DEFAULT_HARDENING_INTENSITY
    assert plan.decision["drivers"]["hardening"][0]["condition"] == gap["condition"]
    assert any(r.startswith("hardening share") for r in plan.decision["reasons"])
    opened = dataclasses.replace(cfg, mode=MODE_OPEN)
    assert next_plan(after_first(opened), report, opened).hardening_share == 0.1
    # A lighting-only gap does not harden (observations are not what it perturbs).
    dark = SyntheticModel(nominal=0.9, drop={"sensor_noise": 0.0, "lighting": 0.8},
                          held_out_factor=1.0)
    report = cube_report(dark, ("sensor_noise", "lighting"))
    assert next_plan(after_first(cfg), report, cfg).hardening_share == 0.1
    with pytest.raises(ConfigError, match="max_hardening_share"):
        make_cfg(hardening_share=0.5, max_hardening_share=0.3)


def test_adr_keeps_ranges_while_nominal_success_is_below_min_nominal():
    cfg = make_cfg(adr={"min_nominal": 0.99})   # nominal success here: 0.95
    plan = next_plan(after_first(cfg), report_for(WEAK_LIGHTING), cfg)
    assert plan.ranges == after_first(cfg).ranges
    assert {e["action"] for e in plan.decision["adr"].values()} == {"keep"}
    assert all("adr.min_nominal" in e["note"] for e in plan.decision["adr"].values())


def test_plan_is_deterministic():
    cfg = make_cfg()
    state = after_first(cfg)
    report = report_for(WEAK_LIGHTING)
    assert next_plan(state, report, cfg).to_dict() == next_plan(state, report, cfg).to_dict()


def test_stop_on_targets_and_on_budget():
    strong = SyntheticModel(nominal=1.0, drop={"lighting": 0.0, "dynamics": 0.0},
                            held_out_factor=1.0)
    cfg = make_cfg(targets={"functional": 0.9})
    plan = next_plan(after_first(cfg), report_for(strong), cfg)
    assert plan.stop and plan.stop_reason == "targets met"
    cfg = make_cfg(iterations=1)
    plan = next_plan(after_first(cfg), report_for(WEAK_LIGHTING), cfg)
    assert plan.stop and "iteration budget" in plan.stop_reason
    cfg = make_cfg(budget={"episodes": 50})
    plan = next_plan(after_first(cfg), report_for(WEAK_LIGHTING), cfg)
    assert plan.stop and "episode budget" in plan.stop_reason
    cfg = make_cfg(budget={"train_steps": 150})
    plan = next_plan(after_first(cfg), report_for(WEAK_LIGHTING), cfg)
    assert plan.stop and "training-step budget" in plan.stop_reason


def test_stop_at_targets_false_runs_on_with_the_same_steering():
    """``stop_at_targets: false``: targets met, the loop plans the next iteration (the same
    mixture, ranges and weights as a loop whose targets are not met would get from this
    report), says so in the decision, and still stops at its iteration budget; the key is
    left out of the config's dict at its default (config ids unchanged)."""
    strong = SyntheticModel(nominal=1.0, drop={"lighting": 0.0, "dynamics": 0.0},
                            held_out_factor=1.0)
    cfg = make_cfg(targets={"functional": 0.9}, stop_at_targets=False)
    plan = next_plan(after_first(cfg), report_for(strong), cfg)
    assert not plan.stop and plan.stop_reason == ""
    assert any("stop_at_targets: false" in r for r in plan.decision["reasons"])
    steering = dataclasses.replace(cfg, targets={"functional": 0.9, "robustness": 2.0})
    other = next_plan(after_first(steering), report_for(strong), steering)
    assert (plan.weights, plan.ranges, plan.group_weights) == \
        (other.weights, other.ranges, other.group_weights)
    last = dataclasses.replace(cfg, iterations=1)
    plan = next_plan(after_first(last), report_for(strong), last)
    assert plan.stop and "iteration budget" in plan.stop_reason
    assert "stop_at_targets" not in make_cfg().to_dict()
    assert cfg.to_dict()["stop_at_targets"] is False
    assert loop_config_from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="stop_at_targets"):
        make_cfg(stop_at_targets="no")


def test_open_loop_keeps_uniform_mixture_and_ranges():
    cfg = make_cfg(mode=MODE_OPEN)
    state = after_first(cfg)
    plan = next_plan(state, report_for(WEAK_LIGHTING), cfg)
    assert len(set(plan.weights.values())) == 1
    assert plan.ranges == state.ranges
    assert plan.group_weights == {} and plan.frozen_groups == ()


def test_freeze_when_functional_met():
    cfg = make_cfg(targets={"functional": 0.5, "robustness": 0.99},
                   freeze_when_functional_met=["head"])
    plan = next_plan(after_first(cfg), report_for(WEAK_LIGHTING), cfg)
    assert plan.frozen_groups == ("head",)
    assert any(r.startswith("freeze head") for r in plan.decision["reasons"])


def test_family_stability_interpolates_and_handles_unmeasured():
    report = report_for(WEAK_LIGHTING)
    s_low, _ = family_stability(report, "lighting", 0.2)
    s_high, note = family_stability(report, "lighting", 1.0)
    assert s_low > s_high
    s_beyond, note = family_stability(report, "dynamics", 1.0)
    assert s_beyond is not None
    none, note = family_stability(report, "gps_dropout", 0.5)
    assert none is None and "not measured" in note


def test_state_round_trip_and_group_weight_resolution():
    cfg = make_cfg()
    state = after_first(cfg)
    assert LoopState.from_dict(state.to_dict()) == state
    groups = ["pick_place/cube/lighting", "pick_place/cylinder/lighting", "pick_place/cube/none"]
    assert resolve_group_weights({"pick_place/*/lighting": 2.5}, groups) == {
        "pick_place/cube/lighting": 2.5, "pick_place/cylinder/lighting": 2.5}


def test_paired_differences_intervals():
    from clawgym_ros.coordinator.ablation import format_table, paired_differences

    def scores(v):
        return {d: {"value": v, "ci": [v, v], "n": 10} for d in
                ("functional", "robustness", "generalization")} | {
            "preference": {"value": None, "ci": [None, None], "n": 0}}

    closed = {0: scores(0.8), 1: scores(0.7), 2: scores(0.9)}
    open_ = {0: scores(0.6), 1: scores(0.6), 2: scores(0.6)}
    result = paired_differences(closed, open_)
    rob = result["robustness"]
    assert rob["diff"] == pytest.approx([0.2, 0.1, 0.3])
    assert rob["mean_diff"] == pytest.approx(0.2)
    lo, hi = rob["t_ci"]
    # t(0.975, 2) = 4.303; sd = 0.1 -> half width 0.2484
    assert lo == pytest.approx(0.2 - 0.2484, abs=1e-3) and hi == pytest.approx(0.4484, abs=1e-3)
    blo, bhi = rob["bootstrap_ci"]
    assert 0.1 - 1e-9 <= blo <= 0.2 <= bhi <= 0.3 + 1e-9
    assert result["preference"]["n"] == 0 and result["preference"]["mean_diff"] is None
    assert len(format_table(result)) == 5
    # One seed: no t interval (infinite bounds), said in words; the bootstrap one is a point.
    one = format_table(paired_differences({0: scores(0.8)}, {0: scores(0.6)}))
    assert "n/a (1 seed)" in one[2] and "inf" not in "".join(one)


def _records(nominal, combined, other, held_out, n=10):
    """Per-episode records of one final report: n episodes per group, the first k successes."""
    recs = []
    for family, split, k in (("none", "train", nominal), ("lighting+sensor_noise", "train",
                                                           combined),
                             ("sensor_noise", "train", other), ("none", "held_out", held_out)):
        recs += [{"split": split, "family": family, "success": i < k} for i in range(n)]
    return recs


def test_design_figures_pool_the_seeds_and_bootstrap_them():
    from clawgym_ros.coordinator.ablation import (
        cell_counts,
        design_figures,
        format_design_figures,
    )

    counts = cell_counts(_records(8, 6, 7, 2))
    assert counts == {"nominal": [8, 10], "combined": [6, 10], "in_distribution": [21, 30],
                      "held_out": [2, 10]}
    closed = {0: cell_counts(_records(9, 8, 8, 2)), 1: cell_counts(_records(7, 7, 7, 1))}
    open_ = {0: cell_counts(_records(6, 4, 6, 1)), 1: cell_counts(_records(6, 5, 6, 0)),
             2: cell_counts(_records(1, 1, 1, 1))}           # seed 2: open arm only, left out
    f = design_figures(closed, open_)
    assert f["counts"]["seeds"] == [0, 1]
    assert f["functional_gain"]["value"] == pytest.approx(16 / 12 - 1)
    assert f["generalization_ratio"]["value"] == pytest.approx((3 / 46) / (1 / 33))
    assert f["combined_stability"]["value"] == pytest.approx(15 / 16)
    assert f["combined_stability"]["open_value"] == pytest.approx(9 / 12)
    for name, bar in (("functional_gain", 0.224), ("generalization_ratio", 1.8),
                      ("combined_stability", 0.867)):
        e = f[name]
        assert e["bar"] == bar and e["met"] is True
        lo, hi = e["bootstrap_ci"]
        assert lo <= e["value"] and (hi is None or e["value"] <= hi)   # None: unbounded
        assert 0 <= e["share_at_bar"] <= 1
    assert design_figures(closed, open_) == f                # seeded: the same twice
    # No held-out success in the open arm: the ratio has no value, it is not "met"
    none = design_figures({0: cell_counts(_records(5, 5, 5, 3))},
                          {0: cell_counts(_records(5, 5, 5, 0))})
    assert none["generalization_ratio"]["value"] is None
    assert none["generalization_ratio"]["met"] is False
    assert none["combined_stability"]["value"] == pytest.approx(1.0)
    assert none["generalization_ratio"]["note"].startswith("unbounded")
    lines = format_design_figures(none)
    assert len(lines) == 4 and "n/a" in lines[2] and "+22.4%" in lines[1]
    # No share of resamples "at the bar" beside a figure that has no value.
    assert "unbounded" in lines[2] and "resamples" not in lines[2]
    # One seed whose open arm never succeeds held out: resamples of that seed alone have an
    # infinite ratio, above the bar; the interval's upper end is unbounded (None, JSON-safe)
    three, none_held = cell_counts(_records(5, 5, 5, 3)), cell_counts(_records(5, 5, 5, 0))
    mixed = design_figures({0: three, 1: three}, {0: none_held, 1: three})
    gen = mixed["generalization_ratio"]
    assert gen["value"] == pytest.approx(2.0) and gen["bootstrap_ci"][1] is None
    assert 0.2 < gen["share_at_bar"] < 1.0                  # 1/4 of resamples inf, 1/2 at 2.0
    json.dumps(mixed, allow_nan=False)
    assert "inf]" in format_design_figures(mixed)[2]
    with pytest.raises(ValueError, match="at least one seed"):
        design_figures({0: counts}, {1: counts})


def test_final_suite_yaml_keeps_the_cells_with_more_episodes(tmp_path):
    import yaml

    from clawgym_ros.coordinator.ablation import final_suite_yaml

    path = ROOT / "config/loop/suites/pick_place_eval.yaml"
    data = yaml.safe_load(final_suite_yaml(path, 20))
    source = yaml.safe_load(path.read_text())
    assert data["episodes_per_cell"] == 20 and data["name"] == source["name"] + "_final"
    assert data["cells"] == source["cells"] and data["tasks"] == source["tasks"]
    with pytest.raises(ConfigError, match="--final-episodes"):
        final_suite_yaml(path, 0)
    assert "held_out_episodes_per_cell" not in data
    dense = yaml.safe_load(final_suite_yaml(path, 20, 100))
    assert dense["held_out_episodes_per_cell"] == 100 and dense["episodes_per_cell"] == 20
    assert "100 per held-out template cell" in dense["description"]
    with pytest.raises(ConfigError, match="--final-held-out-episodes"):
        final_suite_yaml(path, 20, -1)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nepisodes_per_cell: 2\n")
    with pytest.raises(ConfigError):
        final_suite_yaml(bad, 5)


def _report_with_failure_states():
    """A report of a policy at nominal success ~0.5 whose failed episodes list failure
    states (as an in-process evaluation does), and its nominal success."""
    weak = SyntheticModel(nominal=0.5, drop={"lighting": 0.0}, held_out_factor=1.0)
    report = cube_report(weak, ("lighting",))
    for e in report["per_episode"]:
        if not e["success"]:
            e["failure_states"] = [{"name": f"ep{e['index']:05d}_stall"}]
    return report, report["aggregated"]["robustness"]["nominal"]["value"]


def test_recovery_episodes_follow_the_functional_shortfall_in_the_closed_loop_only():
    report, nominal = _report_with_failure_states()
    cfg = make_cfg(recovery_gain=1.0, max_recovery_share=0.6,
                   targets={"functional": 0.9, "robustness": 0.95})
    plan = next_plan(after_first(cfg), report, cfg)
    expected = round(min(0.6, 0.9 - nominal) * 30)
    assert plan.recovery_episodes == expected > 0
    assert plan.episodes + plan.recovery_episodes == 30          # the same budget
    assert plan.recovery_report == "r" * 64 and "recover" in plan.seeds
    assert plan.decision["recovery_episodes"] == expected
    assert any(r.startswith(f"recovery episodes {expected} of 30") for r in
               plan.decision["reasons"])
    # The open loop never uses it; without failure states or without gain there is none.
    opened = dataclasses.replace(cfg, mode=MODE_OPEN)
    assert next_plan(after_first(opened), report, opened).recovery_episodes == 0
    for e in report["per_episode"]:
        e.pop("failure_states", None)
    plan = next_plan(after_first(cfg), report, cfg)
    assert plan.recovery_episodes == 0 and plan.episodes == 30
    assert any("no failure states" in r for r in plan.decision["reasons"])
    assert "recovery_episodes" not in next_plan(after_first(make_cfg()), report,
                                                make_cfg()).decision
    with pytest.raises(ConfigError, match="max_recovery_share"):
        make_cfg(max_recovery_share=0.95)


def test_recovery_waits_for_nominal_success_recovery_min_nominal():
    report, nominal = _report_with_failure_states()
    targets = {"functional": 0.9, "robustness": 0.95}
    gated = make_cfg(recovery_gain=1.0, recovery_min_nominal=nominal + 0.01, targets=targets)
    plan = next_plan(after_first(gated), report, gated)
    assert plan.recovery_episodes == 0 and plan.episodes == 30
    assert any(r.startswith(f"recovery: none (nominal success {nominal:.3f} < "
                            "recovery_min_nominal") for r in plan.decision["reasons"])
    met = make_cfg(recovery_gain=1.0, recovery_min_nominal=nominal, targets=targets)
    assert next_plan(after_first(met), report, met).recovery_episodes > 0
    # the field joins the config dict (and id) only when set
    assert "recovery_min_nominal" not in make_cfg().to_dict()
    assert met.to_dict()["recovery_min_nominal"] == nominal
    with pytest.raises(ConfigError, match="recovery_min_nominal"):
        make_cfg(recovery_min_nominal=1.5)


class _FakeGraph:
    """LoopGraph's shape for `clawgym ablate`'s job scheduler: records its CPUs; closing it
    ends the loop it runs (as stopping the nodes ends a coordinator)."""

    made: list[_FakeGraph] = []

    def __init__(self, log_dir, cpus=None):
        import threading

        self.log_dir, self.cpus, self.closed = log_dir, cpus, threading.Event()
        _FakeGraph.made.append(self)

    def start_workers(self, run_dir, nodes):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed.set()


def test_ablate_jobs_run_every_loop_once_and_the_first_failure_stops_the_others(
        monkeypatch, tmp_path):
    """`_run_loops`: every loop runs once on one of the job graphs (each its own CPUs); when
    one loop fails, every graph is stopped (a loop still running ends) and that error is
    raised."""
    import threading

    from clawgym_ros.commands import ablate
    from clawgym_ros.coordinator import graph as graph_module
    from clawgym_ros.coordinator.runner import LoopError

    monkeypatch.setattr(graph_module, "LoopGraph", _FakeGraph)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    tasks = [(seed, label, label) for seed in range(3) for label in ("closed", "open")]
    ran, lock = [], threading.Lock()

    def run_one(graph, seed, label, mode, progress=None):
        with lock:
            ran.append((seed, label, graph.cpus))

    _FakeGraph.made = []
    ablate._run_loops(tasks, run_one, tmp_path, (), 2)
    assert sorted(r[:2] for r in ran) == sorted(t[:2] for t in tasks)
    assert [g.cpus for g in _FakeGraph.made] == [(0, 1), (2, 3)]
    assert [g.log_dir.name for g in _FakeGraph.made] == ["job0", "job1"]
    assert all(g.closed.is_set() for g in _FakeGraph.made)

    started = threading.Event()

    def failing(graph, seed, label, mode, progress=None):
        if label == "open":                 # waits until its graph is stopped, then ends
            started.set()
            assert graph.closed.wait(30), "the other job's graph was not stopped"
            raise LoopError("coordinator stopped")
        assert started.wait(30)
        raise LoopError(f"seed {seed} {label} failed")

    _FakeGraph.made = []
    with pytest.raises(LoopError, match="seed 0 closed failed"):
        ablate._run_loops(tasks[:2], failing, tmp_path, (), 2)
    assert all(g.closed.is_set() for g in _FakeGraph.made)
    # One job: one graph in out/logs, the loops in order.
    _FakeGraph.made, ran[:] = [], []
    ablate._run_loops(tasks, run_one, tmp_path, (), 1)
    assert [r[:2] for r in ran] == [t[:2] for t in tasks]
    assert [g.log_dir.name for g in _FakeGraph.made] == ["logs"]
