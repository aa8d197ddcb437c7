"""Procedural template families (transfer templates): declared ranges, reproducible samples,
names that rebuild their template, and held-out templates never synthesized."""

from __future__ import annotations

import re

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.tasks.base import Template
from clawgym_ros.tasks.pick_place import OBJECT_FAMILY, PickPlace, _template
from clawgym_ros.tasks.registry import get_task

TASKS_WITH_FAMILIES = ("pick_place", "pill_handover")


def test_samples_are_reproducible_from_family_width_and_seed_and_names_rebuild_them():
    task = get_task("pick_place")
    a = OBJECT_FAMILY.sample(task, 0.4, 7)
    assert a == OBJECT_FAMILY.sample(task, 0.4, 7)
    assert a.name != OBJECT_FAMILY.sample(task, 0.4, 8).name
    assert a.name.startswith("proc:objects:shape=") and a.split == C.SPLIT_TRAIN
    assert task.template(a.name) == a                   # resolvable in any process
    # the episode path: a family reference is sampled with a seed from the episode's rng
    t1 = task.resolve_template("proc:objects@0.4", np.random.default_rng(3))
    t2 = task.resolve_template("proc:objects@0.4", np.random.default_rng(3))
    assert t1 == t2 and t1.name.startswith("proc:objects:")


def test_width_zero_gives_the_training_templates_values_and_width_spreads_them():
    task = get_task("pick_place")
    centres = OBJECT_FAMILY.centres(task)
    for seed in range(20):
        values = OBJECT_FAMILY.sample(task, 0.0, seed).params["values"]
        assert values in centres
    wide = {OBJECT_FAMILY.sample(task, 1.0, s).params["values"]["mass"] for s in range(60)}
    assert len(wide) > 10 and min(wide) >= 0.03 and max(wide) <= 0.2


@pytest.mark.parametrize("task_name", TASKS_WITH_FAMILIES)
def test_no_sample_is_a_held_out_template_or_within_the_declared_distance(task_name):
    task = get_task(task_name)
    for family in task.template_families:
        held = family.held_out(task)
        assert held, "the task declares held-out templates"
        for seed in range(400):
            t = family.sample(task, (seed % 5) / 4, seed)
            assert t.name not in task.held_out_templates and t.split == C.SPLIT_TRAIN
            values = t.params["values"]
            for name, h in held.items():
                assert family.distance(values, h) >= family.min_distance, (t.name, name)


class _NearHeldOut(PickPlace):
    """pick_place with a held-out box inside the family's ranges, next to the cube."""

    templates = PickPlace.templates[:2] + (
        _template("big_cube", C.SPLIT_HELD_OUT, ["box", [0.048, 0.045, 0.045], 0.1]),)


def test_the_distance_guard_redraws_near_a_held_out_template_inside_the_ranges():
    task = _NearHeldOut()
    held = OBJECT_FAMILY.held_out(task)["big_cube"]
    draws = [OBJECT_FAMILY.sample_values(task, 0.2, np.random.default_rng(s))
             for s in range(300)]
    near = [v for v in draws if OBJECT_FAMILY.distance(v, held) < OBJECT_FAMILY.min_distance]
    assert near, "without the guard some draws fall near the held-out template"
    for seed in range(300):
        values = OBJECT_FAMILY.sample(task, 0.2, seed).params["values"]
        assert OBJECT_FAMILY.distance(values, held) >= OBJECT_FAMILY.min_distance
    name = OBJECT_FAMILY.template_name(near[0])
    with pytest.raises(ConfigError, match="held-out pick_place/big_cube"):
        task.template(name)


def test_a_parameter_outside_its_declared_range_is_named():
    task = get_task("pick_place")
    bad = re.sub(r"mass=[0-9.]+", "mass=5", OBJECT_FAMILY.sample(task, 0.2, 1).name)
    with pytest.raises(ConfigError) as err:
        task.template(bad)
    assert "parameter mass" in str(err.value) and "[0.03, 0.2] kg" in str(err.value)
    with pytest.raises(ConfigError, match="width"):
        task.resolve_template("proc:objects@1.5", np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"a template family of pick_place \(proc:objects\)"):
        task.template("proc:nothing@0.2")


def test_synthesis_refuses_held_out_templates_and_accepts_families():
    for task_name in TASKS_WITH_FAMILIES + ("peg_insert", "gps_nav"):
        task = get_task(task_name)
        for name in task.held_out_templates:
            with pytest.raises(ConfigError, match="never synthesized"):
                task.synthesis_template(name, "mixture[0].template")
        for family in task.template_families:
            assert task.synthesis_template(family.ref(0.5)) == family.ref(0.5)
    assert get_task("pick_place").synthesis_template("cube") == "cube"


def test_synth_cli_refuses_a_held_out_template_with_one_line_and_writes_nothing(tmp_path,
                                                                                  capsys):
    from clawgym_ros.cli import main

    out = tmp_path / "run"
    too_heavy = re.sub(r"mass=[0-9.]+", "mass=5", OBJECT_FAMILY.sample(
        get_task("pick_place"), 0.2, 1).name)
    for template in ("torus", "proc:objects@2", too_heavy):
        mix = tmp_path / "mix.yaml"
        mix.write_text("mixture:\n  - {task: pick_place, template: 'proc:objects@0.5'}\n"
                       f"  - {{task: pick_place, template: '{template}'}}\n")
        assert main(["synth", "--mixture", str(mix), "--episodes", "2", "--seed", "0",
                     "--workers", "1", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "mixture[1].template" in err, err
        assert not out.exists() or not any(out.rglob("*.json"))


def test_an_expert_episode_on_a_sampled_template_records_its_name_and_replays():
    from clawgym_ros.synthesis.episode import EpisodeSpec
    from clawgym_ros.tasks.registry import generate_any

    spec = EpisodeSpec(index=0, seed=101, task="pick_place", template="proc:objects@0.5")
    record = generate_any(spec)
    template = get_task("pick_place").template(record.template)
    assert template.params["family"] == "objects"
    assert record.outcome.success, record.outcome.reason
    # replay pins the recorded (concrete) template: the same physics, step for step
    from clawgym_ros.tasks.replay import replay_record

    again = replay_record(record)
    assert again.template == record.template and again.outcome.success
    assert np.array_equal(again.joint_position, record.joint_position)


def test_describe_lists_the_families_with_their_ranges():
    info = get_task("pick_place").describe()["template_families"][0]
    assert info["ref"] == "proc:objects" and info["params"]["mass"]["low"] == 0.03
    assert isinstance(Template("x").params, dict)
