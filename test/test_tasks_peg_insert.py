"""peg_insert: 1 mm clearance insertion with the planner-driven expert, deviation in
micrometres, tool wear by episode index, replay re-validation."""

from __future__ import annotations

import math

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.synthesis.mixture import episode_seed
from clawgym_ros.tasks import peg_insert as P
from clawgym_ros.tasks.registry import get_task
from clawgym_ros.tasks.replay import replay_record


def test_task_declares_docstring_templates_and_geometry():
    task = get_task(C.TASK_PEG_INSERT)
    for heading in ("Task Description", "Randomizations", "Success Conditions", "Stages"):
        assert heading in P.PegInsert.__doc__
    assert task.training_templates == ("round_peg", "square_peg")
    assert task.held_out_templates == ("hex_peg",)
    hx, hy = P._hole_size("round")
    assert min(hx, hy) - P.PEG_WIDTH <= 0.001 + 1e-12        # clearance <= 1 mm


def test_tool_wear_is_a_decreasing_function_of_the_episode_index():
    values = [P.tool_wear(k) for k in (0, 1000, 5000, 100_000)]
    assert values[0] == 1.0 and values == sorted(values, reverse=True)
    assert math.isclose(values[2], P.WEAR_FLOOR + (1 - P.WEAR_FLOOR) / math.e)
    assert values[-1] >= P.WEAR_FLOOR


def test_expert_inserts_the_round_peg_and_reports_micrometres():
    task = get_task(C.TASK_PEG_INSERT)
    signoff = task.signoff()
    spec = EpisodeSpec(index=2000, seed=episode_seed(1, 0), task=C.TASK_PEG_INSERT,
                       template="round_peg")
    record = P.generate(spec)
    assert not signoff(record), signoff(record)
    assert [s.name for s in record.stages] == list(task.stages)
    assert record.achieved["inserted"] and record.achieved["deviation_um"] < 500.0
    assert record.perturbation_params["tool_wear.friction_factor"] == P.tool_wear(2000)
    env = P.PegInsertEnv(template="round_peg")
    env.reset(seed=1, options={"episode_index": 2000})
    friction = env.backend.model.geom("gripper_left_finger_geom0").friction[0]
    assert math.isclose(friction, P.FINGER_FRICTION * P.tool_wear(2000))
    again = replay_record(record)
    assert not signoff(again) and np.array_equal(again.joint_position, record.joint_position)
