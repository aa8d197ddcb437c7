"""The transfer-template lever: a low generalization ratio widens a template family's sampled
width and shifts synthesis toward its cell; held-out templates stay held out."""

from __future__ import annotations

import json

import pytest

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.coordinator import transfer as T
from clawgym_ros.coordinator.config import loop_config_from_dict
from clawgym_ros.coordinator.plan import initial_state, next_plan
from clawgym_ros.coordinator.runner import LoopRunner
from clawgym_ros.errors import ConfigError
from test.test_coordinator_runner import SUITE, ToyExecutor

FAMILY_KEY = "pick_place/proc:objects/none/medium"
MIXTURE = [{"task": "pick_place", "template": "cube", "weight": 1},
           {"task": "pick_place", "template": "proc:objects", "weight": 1}]


def cfg(**kw):
    data = {"name": "transfer", "seed": 3, "iterations": 3, "episodes_per_iteration": 12,
            "train_steps": 10, "eval_suite": str(SUITE), "workers": 1, "mixture": MIXTURE,
            "transfer": {"threshold": 0.8, "initial_width": 0.1, "step": 0.2, "gain": 2.0},
            "mixture_floor": 0.05}
    data.update(kw)
    return loop_config_from_dict(data)


def report(held, ind, task="pick_place"):
    ratio = None if not ind else held / ind
    return {"scores": {}, "gaps": [], "aggregated": {C.DIM_GENERALIZATION: {
        "pooled": {"value": ratio},
        "tasks": {task: {"in_distribution": {"value": ind}, "held_out": {"value": held},
                         "ratio": {"value": ratio}}}}}}


def state_after_one(c):
    state = initial_state(c)
    return state.__class__(**{**state.__dict__, "iteration": 1,
                              "history": ({"iteration": 0, "scores": {}, "report_id": "r"},)})


def test_low_generalization_widens_the_family_and_raises_its_share():
    c = cfg()
    plan = next_plan(state_after_one(c), report(held=0.3, ind=0.9), c)
    assert plan.ranges["pick_place/proc:objects"] == (0.0, 0.3)
    assert plan.weights[FAMILY_KEY] > 0.5 > plan.weights["pick_place/cube/none/medium"]
    assert [e["template"] for e in plan.mixture] == ["cube", "proc:objects@0.3"]
    rec = plan.decision["transfer"]["cells"][FAMILY_KEY]
    assert rec["action"] == "widen" and rec["width_before"] == 0.1 and rec["width_after"] == 0.3
    assert rec["ratio"] == pytest.approx(1 / 3)
    assert any(r.startswith(f"template family {FAMILY_KEY}: widen width 0.1 -> 0.3 "
                            "(generalization 0.333") for r in plan.decision["reasons"])
    # the family cell's training groups are the templates sampled from it
    assert plan.group_weights == {} or all("proc:objects:*" in k or "cube" in k
                                           for k in plan.group_weights)


@pytest.mark.parametrize("rep, why", [(report(0.85, 0.9), ">= threshold 0.8"),
                                      (report(0.0, 0.0), "not measurable"),
                                      ({"scores": {}, "gaps": [], "aggregated": {}},
                                       "no held-out template in the suite")])
def test_the_lever_keeps_width_and_share_otherwise(rep, why):
    c = cfg()
    state = state_after_one(c)
    plan = next_plan(state, rep, c)
    assert plan.ranges["pick_place/proc:objects"] == (0.0, 0.1)
    assert plan.weights == state.weights
    assert any(why in r for r in plan.decision["reasons"] if r.startswith("template family"))


@pytest.mark.parametrize("ind, action", [(0.4, "keep"), (0.5, "widen"), (0.9, "widen")])
def test_the_lever_waits_for_in_distribution_success_min_in_distribution(ind, action):
    """A ratio over an in-distribution success below transfer.min_in_distribution (one or
    two successes in a loop report's few episodes) keeps width and share."""
    c = cfg(transfer={"threshold": 0.8, "initial_width": 0.1, "step": 0.2, "gain": 2.0,
                      "min_in_distribution": 0.5})
    state = state_after_one(c)
    plan = next_plan(state, report(held=0.0, ind=ind), c)
    rec = plan.decision["transfer"]["cells"][FAMILY_KEY]
    assert rec["action"] == action
    if action == "keep":
        assert plan.ranges["pick_place/proc:objects"] == (0.0, 0.1)
        assert plan.weights == state.weights
        assert any(f"in-distribution success {ind:.3f} < transfer.min_in_distribution 0.5"
                   in r for r in plan.decision["reasons"])
    else:
        assert plan.ranges["pick_place/proc:objects"] == (0.0, 0.3)


def test_open_loop_and_lever_off_keep_the_initial_width():
    for c in (cfg(mode="open"), cfg(transfer={"threshold": 0.0})):
        plan = next_plan(state_after_one(c), report(0.1, 0.9), c)
        assert plan.ranges["pick_place/proc:objects"] == (0.0, 0.1)
        assert plan.mixture[1]["template"] == "proc:objects@0.1"


def test_the_width_stops_at_max_width():
    c = cfg(transfer={"threshold": 0.8, "initial_width": 0.9, "step": 0.2, "max_width": 1.0})
    plan = next_plan(state_after_one(c), report(0.1, 0.9), c)
    assert plan.ranges["pick_place/proc:objects"] == (0.0, 1.0)


@pytest.mark.parametrize("change, field", [
    ({"mixture": [{"task": "pick_place", "template": "proc:objects@0.4"}]}, "mixture[0].template"),
    ({"mixture": [{"task": "pick_place", "template": "proc:objects", "family": "lighting"}],
      "ranges": {"lighting": [0, 0.4]}}, "mixture[0].family"),
    ({"mixture": [{"task": "pick_place", "template": "cube"}]}, "transfer.threshold"),
    ({"transfer": {"threshold": 0.8, "initial_width": 1.5}}, "transfer.initial_width"),
    ({"transfer": {"threshold": 0.8, "min_in_distribution": 1.5}},
     "transfer.min_in_distribution"),
])
def test_bad_transfer_settings_name_the_field(change, field):
    with pytest.raises(ConfigError) as err:
        cfg(**change)
    assert err.value.field == field


def test_a_held_out_template_in_a_loop_mixture_is_refused_at_load(tmp_path):
    from clawgym_ros.coordinator.config import load_loop_config

    path = tmp_path / "loop.yaml"
    path.write_text(f"loop:\n  eval_suite: {SUITE}\n  mixture:\n"
                    "    - {task: pick_place, template: torus}\n")
    with pytest.raises(ConfigError, match="never synthesized") as err:
        load_loop_config(path)
    assert err.value.field == "mixture[0].template"


def test_default_transfer_leaves_the_config_dict_unchanged():
    c = loop_config_from_dict({"eval_suite": "smoke", "mixture": [{"task": "pick_place"}]})
    assert "transfer" not in c.to_dict()
    assert cfg().to_dict()["transfer"]["threshold"] == 0.8
    # the gate joins the dict (and the config id) only when set
    assert "min_in_distribution" not in cfg().to_dict()["transfer"]
    gated = cfg(transfer={"threshold": 0.8, "min_in_distribution": 0.5})
    assert gated.to_dict()["transfer"]["min_in_distribution"] == 0.5
    assert loop_config_from_dict(gated.to_dict()) == gated


def test_loop_runner_widens_the_family_each_iteration_and_never_synthesizes_held_out(
        tmp_path):
    """The toy executor (synthetic reports: held-out success x 0.6: with 6 episodes a
    cell the ratio stays below 0.95) runs two iterations: the width grows 0.1 -> 0.3, the
    family cell's share rises, each synthesis names proc:objects@<width>, and the held-out
    torus is in every report and in no dataset."""
    c = cfg(transfer={"threshold": 0.95, "initial_width": 0.1, "step": 0.2}, iterations=2,
            episodes_per_iteration=8)
    state = LoopRunner(c, tmp_path, ToyExecutor()).run()
    decisions = [json.loads(x) for x in (tmp_path / C.DIR_LOOP / C.FILE_DECISIONS)
                 .read_text().splitlines()]
    widths = [d["ranges"]["pick_place/proc:objects"][1] for d in decisions[:2]]
    assert widths == [0.1, 0.3]
    shares = [d["weights"][FAMILY_KEY] for d in decisions[:2]]
    assert shares[0] < shares[1]
    assert "transfer" in decisions[1]
    store = ArtifactStore(tmp_path)
    for it, width in zip(state.iterations, widths):
        assert [c["template"] for c in it["plan"]["mixture"]] == ["cube",
                                                                   f"proc:objects@{width:g}"]
        dataset = store.get(it["dataset_id"])
        rows = [json.loads(x) for x in dataset.file("episodes.jsonl").read_text().splitlines()]
        assert rows and not any(r["template"] in ("torus", "stack") for r in rows)
        rep = json.loads(store.get(it["report_id"]).file(C.FILE_REPORT_JSON).read_text())
        held = {e["template"] for e in rep["per_episode"] if e["split"] == C.SPLIT_HELD_OUT}
        assert held == {"torus"}


def test_render_and_group_patterns():
    cell = {"task": "pick_place", "template": "proc:objects", "family": "none"}
    assert T.render_template(cell, {"pick_place/proc:objects": (0.0, 0.25)}) == \
        "proc:objects@0.25"
    assert T.group_template(cell) == "proc:objects:*"
    assert T.group_template({"task": "x", "template": "", "family": "none"}) == "*"


def test_the_transfer_loop_config_loads_with_its_family_cell():
    from pathlib import Path

    from clawgym_ros.coordinator.config import load_loop_config

    path = Path(__file__).resolve().parents[1] / "config" / "loop" / "pick_place_transfer.yaml"
    c = load_loop_config(path)
    assert c.transfer.enabled and Path(c.eval_suite).is_file()
    plan = next_plan(initial_state(c), None, c)
    assert [e["template"] for e in plan.mixture] == ["cube", "cylinder", "proc:objects@0.1"]
