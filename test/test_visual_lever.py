"""The visual lever: lighting and camera pose gaps steer synthesis toward visually perturbed
(image-recorded) demonstrations for a policy that sees; the rule of which gaps may steer which
policy."""

from __future__ import annotations

import pytest

from clawgym_ros import constants as C
from clawgym_ros.coordinator.config import cell_key
from clawgym_ros.coordinator.plan import next_plan
from clawgym_ros.coordinator.visual import (
    check_record_images,
    gap_steers,
    ignored_visual_gaps,
    is_visual,
    policy_sees,
)
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.synthetic import SyntheticModel
from clawgym_ros.synthesis.mixture import MixtureSpec
from test.test_coordinator_core import after_first, cube_report, make_cfg

LIGHT = {"kind": "perturbation", "families": ["lighting"], "condition": "lighting>=0.5",
         "deviation": 0.4}
NOISE = {"kind": "perturbation", "families": ["sensor_noise"], "condition": "sensor_noise>=0.5",
         "deviation": 0.3}
BOTH = {"kind": "perturbation", "families": ["lighting", "sensor_noise"],
        "condition": "lighting+sensor_noise>=0.5", "deviation": 0.5}
HELD_OUT = {"kind": "generalization", "families": [], "condition": "held_out:pick_place/torus",
            "deviation": 0.6}


def test_which_gaps_steer_which_policy():
    assert policy_sees(C.POLICY_CNN) and not policy_sees(C.POLICY_MLP)
    with pytest.raises(ConfigError, match="policy='vit9'"):
        policy_sees("vit9")
    assert is_visual(LIGHT) and not is_visual(BOTH) and not is_visual(NOISE)
    assert not is_visual(HELD_OUT)
    # A policy that sees is steered by every gap; a state policy by all but visual-only ones.
    assert all(gap_steers(g, True) for g in (LIGHT, NOISE, BOTH, HELD_OUT))
    assert [gap_steers(g, False) for g in (LIGHT, NOISE, BOTH, HELD_OUT)] == [
        False, True, True, True]
    gaps = [LIGHT, NOISE, BOTH, HELD_OUT]
    assert ignored_visual_gaps(gaps, C.POLICY_MLP) == ["lighting>=0.5"]
    assert ignored_visual_gaps(gaps, C.POLICY_CNN) == []
    check_record_images(C.POLICY_CNN, True)
    check_record_images(C.POLICY_MLP, False)
    with pytest.raises(ConfigError, match="record_images=False.*true for the cnn policy"):
        check_record_images(C.POLICY_CNN, False)


@pytest.mark.parametrize("visual", [C.FAMILY_LIGHTING, C.FAMILY_CAMERA_POSE, C.FAMILY_COLOUR])
def test_a_visual_gap_of_a_seeing_policy_raises_that_familys_demonstrations(visual):
    """A cnn loop recording images: lighting (or a moved camera) collapses the policy, so the
    next plan gives that cell a larger share than nominal and more perturbed episodes,
    recorded with the camera frames the policy trains on; a family it copes with stays level."""
    cfg = make_cfg(policy=C.POLICY_CNN, record_images=True,
                   mixture=[{"task": "pick_place", "family": f, "weight": 1}
                            for f in ("none", visual, "dynamics")],
                   ranges={visual: [0.0, 0.8], "dynamics": [0.0, 0.4]})
    state = after_first(cfg)
    report = cube_report(SyntheticModel(nominal=0.9, drop={visual: 0.9, "dynamics": 0.0},
                                        held_out_factor=1.0), (visual, "dynamics"))
    gap = next(g for g in report["gaps"] if g["family"] == visual)
    assert gap_steers(gap, policy_sees(cfg.policy))
    assert not gap_steers(gap, policy_sees(C.POLICY_MLP))
    plan = next_plan(state, report, cfg)
    k = {f: cell_key({"task": "pick_place", "family": f}) for f in ("none", visual,
                                                                     "dynamics")}
    assert plan.weights[k[visual]] > state.weights[k[visual]]
    assert plan.weights[k[visual]] > plan.weights[k["none"]]
    assert plan.weights[k["dynamics"]] == pytest.approx(plan.weights[k["none"]])
    assert gap["condition"] in [d["condition"] for d in plan.decision["drivers"][k[visual]]]
    # The synthesized episodes: a larger share perturbed than the iteration before.
    before = MixtureSpec.from_entries(next_plan(state, None, cfg).mixture)
    after = MixtureSpec.from_entries(plan.mixture)

    def visual_share(spec):
        total = sum(c.weight for c in spec.cells)
        return sum(c.weight for c in spec.cells if c.family == visual) / total

    assert visual_share(after) > visual_share(before)


def test_a_cnn_loop_config_without_images_is_refused_when_loaded(tmp_path):
    from test.test_coordinator_runner import loop_cfg

    with pytest.raises(ConfigError) as err:
        loop_cfg(policy=C.POLICY_CNN)
    assert err.value.field == "record_images"
    assert loop_cfg(policy=C.POLICY_CNN, record_images=True).record_images
