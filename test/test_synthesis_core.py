"""Synthesis core: episode contract, mixture specs, seeds, skill grammar, dual sign-off."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.synthesis.episode import EpisodeError, EpisodeRecorder, EpisodeSpec
from clawgym_ros.synthesis.grammar import SkillGrammar
from clawgym_ros.synthesis.mixture import (
    MixtureCell,
    MixtureSpec,
    allocate,
    episode_seed,
    load_mixture,
    plan_episodes,
)
from clawgym_ros.synthesis.signoff import (
    FeasibilityCheck,
    JointLimit,
    PhysicalLimits,
    SemanticValidator,
    limits_from_urdf,
    reason_codes,
)
from clawgym_ros.synthesis.synthetic import FAULTS, SIGNOFF, synthetic_episode


def spec(index=0, seed=11, **options):
    return EpisodeSpec(index=index, seed=seed, task=C.TASK_PICK_PLACE, options=options)


# --- mixture ----------------------------------------------------------------------------------


def test_allocate_largest_remainder_is_exact_and_ties_go_to_earlier_cells():
    assert allocate([1, 1, 1], 10) == [4, 3, 3]
    assert allocate([0.5, 0.25, 0.25], 7) == [3, 2, 2]
    assert allocate([3, 1], 0) == [0, 0]
    assert sum(allocate([0.1, 0.7, 0.2, 1e-3], 997)) == 997
    assert allocate([2, 1], 6) == [4, 2]
    with pytest.raises(ConfigError, match="weight"):
        allocate([1, 0], 5)


def test_episode_seed_is_the_spawned_child_and_independent_of_plan_size():
    child = np.random.SeedSequence(7).spawn(5)[3]
    assert episode_seed(7, 3) == int(child.generate_state(1, np.uint64)[0]) >> 1
    mix = MixtureSpec.single(C.TASK_PICK_PLACE)
    short, long = plan_episodes(mix, 4, 7), plan_episodes(mix, 40, 7)
    assert [s.seed for s in short] == [s.seed for s in long[:4]]
    assert len({s.seed for s in long}) == 40
    assert plan_episodes(mix, 4, 8)[0].seed != short[0].seed


def test_plan_interleaves_cells_in_proportion():
    mix = MixtureSpec.from_entries([
        {"task": "pick_place", "weight": 3},
        {"task": "pick_place", "family": "lighting", "intensity": 0.5, "weight": 1},
    ])
    plan = plan_episodes(mix, 8, 1, options={"images": True})
    families = [s.family for s in plan]
    assert families.count("lighting") == 2 and families.count("none") == 6
    assert families[:4].count("lighting") == 1  # a prefix keeps the proportions
    assert [s.index for s in plan] == list(range(8))
    assert all(s.options == {"images": True} for s in plan)


@pytest.mark.parametrize("name, family", [("pick_place_lighting", "lighting"),
                                          ("pick_place_camera_pose", "camera_pose"),
                                          ("pick_place_colour", "colour")])
def test_shipped_mixtures_load_and_the_visual_mixes_keep_the_nominal_episodes(name, family):
    files = sorted((Path(__file__).resolve().parents[1] / "config" / "mixtures").glob("*.yaml"))
    assert files
    mixes = {f.stem: load_mixture(f) for f in files}
    # a visual mixture plans the episodes `clawgym synth --task pick_place` plans (seeds,
    # templates, options), so the two datasets differ only in the camera frames
    visual = plan_episodes(mixes[name], 30, 21, options={"images": True})
    nominal = plan_episodes(MixtureSpec.single("pick_place"), 30, 21, options={"images": True})
    assert [(s.seed, s.template, s.options) for s in visual] == \
        [(s.seed, s.template, s.options) for s in nominal]
    assert sorted({(s.family, s.intensity) for s in visual}) == \
        [(family, 0.5), (family, 1.0), ("none", 0.0)]
    assert [s.family for s in visual].count("none") == 10


def test_mixture_yaml_and_message_fields_round_trip(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(
        "mixture:\n"
        "  - {task: pick_place, template: cube_small, weight: 2}\n"
        "  - {task: pick_place, perturbation_family: lighting, intensity: 0.6,\n"
        "     difficulty: hard, weight: 1}\n")
    mix = load_mixture(path)
    assert mix.cells[0] == MixtureCell("pick_place", "cube_small", weight=2)
    fields = mix.to_msg_fields()
    assert fields[1] == {"task": "pick_place", "task_template": "",
                         "perturbation_family": "lighting", "intensity": 0.6,
                         "difficulty": "hard", "weight": 1.0, "event": ""}
    assert MixtureSpec.from_entries(fields) == mix

    class Entry:  # a MixtureEntry-like message object, empty difficulty = medium
        task, task_template, perturbation_family = "peg_insert", "", "none"
        intensity, difficulty, weight = 0.0, "", 1.5
    assert MixtureCell.from_fields(Entry()).difficulty == "medium"


@pytest.mark.parametrize(("text", "field", "value"), [
    ("mixture:\n  - {task: pick_place, family: fog}\n", "mixture[0].family", "fog"),
    ("- {task: a}\n- {task: b, intensity: 0.3, family: lighting, weight: -1}\n",
     "mixture[1].weight", -1),
    ("- {task: a, intensity: 0.5}\n", "mixture[0].intensity", 0.5),
    ("- {task: a, difficulty: extreme}\n", "mixture[0].difficulty", "extreme"),
    ("- {task: a, colour: red}\n", "mixture[0].colour", "red"),
    ("- {template: x}\n", "mixture[0].task", None),
    ("- {task: a}\n- {task: a}\n", "mixture[1]", None),
    ("mixture: 3\n", "mixture", 3),
    ("other: []\n", "other", []),
])
def test_mixture_errors_name_file_field_value_and_allowed(tmp_path, text, field, value):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_mixture(path)
    err = info.value
    assert err.field == field and err.source == str(path) and err.allowed
    if value is not None:
        assert err.value == value
    assert str(path) in str(err)


def test_mixture_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="existing YAML file"):
        load_mixture(tmp_path / "nope.yaml")


# --- episode contract ------------------------------------------------------------------------


def test_recorder_builds_a_valid_record_and_checks_shapes():
    rec = EpisodeRecorder(spec(), ["a", "b"], template="t1")
    for k in range(3):
        rec.step(0.1 * k, obs={C.OBS_JOINT_POS: [k, k]}, action={C.ACT_GRIPPER: 0.02},
                 joint_position=[k, k], joint_velocity=[0, 0], joint_effort=[0, 0])
    rec.stage("reach", 0.1)
    rec.skill("move_to", {"x": 1}, start=0.0, end=0.1)
    record = rec.finish(success=True)
    assert record.num_steps == 3 and record.template == "t1"
    assert record.actions[C.ACT_GRIPPER].shape == (3, 1)
    assert record.observation_spec() == {C.OBS_JOINT_POS: 2}
    assert record.summary()["skills"] == ["move_to"]
    assert record.energy is None
    pickle.loads(pickle.dumps(record)).validate()
    bad = dataclasses.replace(record, joint_effort=np.zeros((3, 3)))
    with pytest.raises(EpisodeError, match="joint_effort"):
        bad.validate()
    with pytest.raises(EpisodeError, match="non-decreasing"):
        dataclasses.replace(record, time=[0.0, 0.2, 0.1]).validate()
    with pytest.raises(EpisodeError, match="outcome"):
        rec.skill("grasp", start=0, end=0, outcome="great")
        rec.finish(success=True)
    with pytest.raises(EpisodeError, match="keys changed"):
        rec.step(0.4, obs={}, action={C.ACT_GRIPPER: 0.0}, joint_position=[0, 0],
                 joint_velocity=[0, 0], joint_effort=[0, 0])


def test_recorder_rows_are_the_flattened_float64_steps():
    # rows are stacked once at the end: (2, 7) poses become 14 columns, lists and ints become
    # float64, an observation-free episode keeps its actions, (d,) and (1, d) rows mix
    rec = EpisodeRecorder(spec(), ["a"])
    poses = [np.arange(14.0).reshape(2, 7) * k for k in range(3)]
    for k in range(3):
        rec.step(0.1 * k, obs={C.OBS_OBJECT_POSES: poses[k]},
                 action={C.ACT_GRIPPER: [k] if k != 1 else np.array([[k]])},
                 joint_position=[k], joint_velocity=np.float32(0.5), joint_effort=[0])
    record = rec.finish(success=True)
    assert record.observations[C.OBS_OBJECT_POSES].tolist() == \
        [p.reshape(-1).tolist() for p in poses]
    assert record.actions[C.ACT_GRIPPER].tolist() == [[0.0], [1.0], [2.0]]
    assert record.joint_velocity.dtype == np.float64 and record.joint_velocity.shape == (3, 1)
    bare = EpisodeRecorder(spec(), ["a"])
    for k in range(2):
        bare.step(0.1 * k, obs={}, action={C.ACT_GRIPPER: k}, joint_position=[k],
                  joint_velocity=[0], joint_effort=[0])
    assert bare.finish(success=True).actions[C.ACT_GRIPPER].tolist() == [[0.0], [1.0]]


# --- grammar ---------------------------------------------------------------------------------


def test_skill_grammar_accepts_the_language_and_names_the_first_illegal_call():
    g = SkillGrammar("move_to grasp lift move_to+ place release")
    assert g.accepts("move_to grasp lift move_to move_to place release".split())
    assert not g.accepts("move_to grasp lift place release".split())
    assert g.first_illegal("move_to grasp release".split()) == 2
    assert g.first_illegal(["move_to", "grasp"]) == 2  # incomplete
    assert g.first_illegal(["move_to", "grasp"], complete=False) is None
    alt = SkillGrammar("reach (grasp | regrasp)+ lift? .*")
    assert alt.accepts(["reach", "regrasp", "grasp", "anything", "else"])
    assert not alt.accepts(["reach"]) and alt.alphabet == {"reach", "grasp", "regrasp", "lift"}
    assert pickle.loads(pickle.dumps(g)).accepts(
        "move_to grasp lift move_to place release".split())
    for bad in ("", "a (b", "a |", "*a", "a b)", "a & b"):
        with pytest.raises(ConfigError, match="grammar"):
            SkillGrammar(bad)


# --- sign-off --------------------------------------------------------------------------------


def test_clean_synthetic_episodes_pass_both_signoffs():
    for i in range(20):
        record = synthetic_episode(spec(index=i, seed=i))
        assert SIGNOFF(record) == [], i


@pytest.mark.parametrize(("fault", "expected"), [
    ("gripper_open_mid_transport", {C.REJECT_NOT_SUCCESSFUL, C.REJECT_SKILL_SEQUENCE}),
    ("false_success", {C.REJECT_STAGE_ORDER, C.REJECT_SKILL_SEQUENCE, C.REJECT_GOAL}),
    ("joint_limit", {C.REJECT_JOINT_POSITION}),
    ("velocity", {C.REJECT_JOINT_VELOCITY}),
    ("effort", {C.REJECT_EFFORT}),
    ("nan", {C.REJECT_UNSTABLE}),
    ("energy_blowup", {C.REJECT_UNSTABLE}),
    ("collision", {C.REJECT_COLLISION}),
    ("contact_force", {C.REJECT_CONTACT_FORCE}),
])
def test_injected_faults_are_rejected_with_the_right_reason(fault, expected):
    assert fault in FAULTS
    rejections = SIGNOFF(synthetic_episode(spec(fault=fault)))
    assert set(reason_codes(rejections)) == expected
    assert all(r.detail for r in rejections)


def test_semantic_validator_stage_order_and_goal_check():
    record = synthetic_episode(spec())
    validator = SIGNOFF.validator_for(record)
    swapped = dataclasses.replace(record, stages=[record.stages[1], record.stages[0],
                                                  *record.stages[2:]])
    assert reason_codes(validator.check(swapped)) == [C.REJECT_STAGE_ORDER]
    backwards = dataclasses.replace(record, stages=[dataclasses.replace(s, time=-s.time)
                                                    for s in record.stages])
    assert reason_codes(validator.check(backwards)) == [C.REJECT_STAGE_ORDER]
    wrong_bin = dataclasses.replace(record, achieved={**record.achieved, "in_bin": False})
    assert reason_codes(validator.check(wrong_bin)) == [C.REJECT_GOAL]
    custom = SemanticValidator(validator.stages, validator.grammar, goal_check=_never_ok)
    assert [str(r) for r in custom.check(record)] == ["goal_inconsistent: custom says no"]
    failed = dataclasses.replace(record, outcome=dataclasses.replace(record.outcome,
                                                                     success=False))
    assert reason_codes(validator.check(failed)) == [C.REJECT_NOT_SUCCESSFUL]


def _never_ok(record):
    return "custom says no"


def test_feasibility_limits_tables_and_tolerances():
    record = synthetic_episode(spec())
    record.joint_position[5, 0] = 2.8005  # within the soft-limit tolerance
    assert FeasibilityCheck(SIGNOFF.physical.limits).check(record) == []
    tight = PhysicalLimits.from_mapping({
        "max_contact_force": 10.0,
        "joints": {"arm_joint_1": {"lower": -0.1, "upper": 0.1}}})
    codes = reason_codes(FeasibilityCheck(tight).check(record))
    assert codes == [C.REJECT_JOINT_POSITION, C.REJECT_CONTACT_FORCE]
    with pytest.raises(ConfigError) as info:
        PhysicalLimits.from_mapping({"joints": {"j1": {"lower": 1, "upper": 0}}}, "lim.yaml")
    assert info.value.field == "joints.j1.lower" and info.value.source == "lim.yaml"
    with pytest.raises(ConfigError, match="max_contact_force"):
        PhysicalLimits(max_contact_force=0)
    urdf = """<robot name="r">
      <joint name="j1" type="revolute"><limit lower="-1" upper="1" velocity="2" effort="5"/>
      </joint>
      <joint name="w" type="continuous"><limit velocity="3" effort="4"/></joint>
      <joint name="f" type="fixed"/></robot>"""
    limits = limits_from_urdf(urdf)
    assert limits == {"j1": JointLimit(-1, 1, 2, 5),
                      "w": JointLimit(velocity=3, effort=4)}
