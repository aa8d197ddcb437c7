"""One task registry (issue 19): every per-task map is derived from it, and a task from outside
the package registers once and works through the framework.

The outside task is a module written to a temporary folder (the only file a new task needs;
a second, from another package, adds its entry point): registered with ``@register_task``,
it appears in ``constants.TASKS``, ``gym.make`` builds its env, synthesis validates a mixture
of it and its expert's episode is signed off, a suite names it and an episode of its scripted
baseline runs in process. A task installed as a distribution with only an entry point is
listed before it is loaded and loads on its first lookup.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.sim import registration
from clawgym_ros.tasks import registry

#: The per-task tables as they were written out before the registry (commit 5eb579c):
#: constants.TASKS, sim/registration.ENVS rows, the scene rule of evaluation (gps_nav
#: outdoor, the rest tabletop) and evaluation/ros_mode.TASK_OBSERVATION_KEYS.
OLD_TASKS = (C.TASK_PICK_PLACE, C.TASK_PEG_INSERT, C.TASK_PILL_HANDOVER, C.TASK_GPS_NAV)
OLD_ENVS = {
    C.ENV_TABLETOP: ("clawgym_ros.sim.envs:TabletopEnv", 500, {}),
    C.ENV_MOBILE_BASE: ("clawgym_ros.sim.envs:MobileBaseEnv", 1000, {}),
    C.ENV_PICK_PLACE: ("clawgym_ros.tasks.pick_place:PickPlaceEnv", 1500, {}),
    C.ENV_PEG_INSERT: ("clawgym_ros.tasks.peg_insert:PegInsertEnv", 1500, {}),
    C.ENV_GPS_NAV: ("clawgym_ros.tasks.gps_nav:GpsNavEnv", 4500, {}),
    C.ENV_PILL_HANDOVER: ("clawgym_ros.tasks.pill_handover:PillHandoverEnv", 2000, {}),
}


def test_derived_maps_are_the_tables_they_replace():
    from clawgym_ros.evaluation import ros_mode
    from clawgym_ros.evaluation.rollout import PolicySource, scene_env_of, scene_of
    from clawgym_ros.evaluation.scripted import ScriptedNav, ScriptedPick

    assert C.TASKS == OLD_TASKS
    assert {k: registration.ENVS[k] for k in OLD_ENVS} == OLD_ENVS
    for task in OLD_TASKS:
        outdoor = task == C.TASK_GPS_NAV
        assert scene_of(task) == (C.SCENE_OUTDOOR if outdoor else C.SCENE_TABLETOP)
        assert scene_env_of(task) == (C.ENV_MOBILE_BASE if outdoor else C.ENV_TABLETOP)
        # The Task classes agree with their rows (get_task checks name, env id and scene).
        assert registry.get_task(task).env_id == registry.task_entry(task).env_id
        baseline = PolicySource.parse(f"scripted:{task}").load()
        assert type(baseline) is (ScriptedNav if outdoor else ScriptedPick)
    assert ros_mode.task_observation_keys() == registry.task_state_keys() == {
        "pick_place": ("place_goal",), "peg_insert": (), "pill_handover": ("hand_state",),
        "gps_nav": ("nav_goal",)}
    with pytest.raises(ConfigError, match="none for scripted:gps_nav"):
        PolicySource.parse("scripted:gps_nav:speed_steps=2").load()
    with pytest.raises(ConfigError, match="task='drawer'.*one of pick_place, peg_insert"):
        scene_of("drawer")


TOY_MODULE = '''
"""toy_lift: pick_place's world and expert, its own name, env id, templates and limit."""

from clawgym_ros.tasks.expert import run_expert
from clawgym_ros.tasks.pick_place import PickPlace, PickPlaceEnv, PickPlaceExpert
from clawgym_ros.tasks.registry import register_task


class ToyLiftEnv(PickPlaceEnv):
    task_cls = None                     # set below (the task class needs the env first)


@register_task(env=ToyLiftEnv, max_episode_steps=300)
class ToyLift(PickPlace):
    """Toy task of the registry test."""

    name = "{name}"
    env_id = "{env_id}"
    templates = tuple(t for t in PickPlace.templates if t.name in ("cube", "torus"))
    expert = __name__ + ":generate"


ToyLiftEnv.task_cls = ToyLift


def generate(spec):
    return run_expert(PickPlaceExpert(spec, ToyLift(), ToyLiftEnv), PickPlaceExpert.run)
'''


@pytest.fixture
def clean_registry(monkeypatch):
    """Undo every registration of the test: task registry, Gymnasium ids, ENVS."""
    import gymnasium

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    envs = dict(registration.ENVS)
    yield
    for env_id in set(registration.ENVS) - set(envs):
        del registration.ENVS[env_id]
        gymnasium.registry.pop(env_id, None)
    registry.get_task.cache_clear()
    for name in ("toy_lift_task", "toy_ep_task"):
        sys.modules.pop(name, None)


def test_a_task_from_outside_registers_once_and_runs_through_the_framework(
        tmp_path, monkeypatch, clean_registry):
    import gymnasium as gym

    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
    from clawgym_ros.evaluation.suites import expand, parse_suite
    from clawgym_ros.orchestration.synthesis import SynthRequest, synthesize
    from clawgym_ros.synthesis.mixture import MixtureSpec

    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_lift_task.py").write_text(
        textwrap.dedent(TOY_MODULE).format(name="toy_lift", env_id="toytasks/ToyLift-v0"))
    monkeypatch.syspath_prepend(str(site))
    assert "toy_lift" not in C.TASKS
    import toy_lift_task

    # The whole task is one file; the registry and every derived map know it.
    assert [p.name for p in site.iterdir() if p.suffix == ".py"] == ["toy_lift_task.py"]
    assert C.TASKS == (*OLD_TASKS, "toy_lift")
    entry = registry.task_entry("toy_lift")
    assert (entry.env, entry.scene, entry.max_episode_steps) == \
        ("toy_lift_task:ToyLiftEnv", C.SCENE_TABLETOP, 300)
    assert registration.ENVS["toytasks/ToyLift-v0"] == ("toy_lift_task:ToyLiftEnv", 300, {})
    assert isinstance(registry.get_task("toy_lift"), toy_lift_task.ToyLift)

    # gym.make: the Dict interface and the RL interface (flat Box action), limit 300.
    env = gym.make("toytasks/ToyLift-v0", control_mode=C.CONTROL_DICT, template="cube")
    _, info = env.reset(seed=3)
    assert tuple(info["stages"]) == toy_lift_task.ToyLift.stages
    assert env.spec.max_episode_steps == 300
    env.close()
    rl = gym.make("toytasks/ToyLift-v0")
    rl.reset(seed=0)
    assert rl.action_space.shape and rl.step(rl.action_space.sample())[0] is not None
    rl.close()

    # Synthesis: the mixture names the task, its expert runs, the dual sign-off accepts.
    mixture = MixtureSpec.from_entries([{"task": "toy_lift", "template": "cube"}])
    art, summary = synthesize(SynthRequest(out=str(tmp_path / "run"), episodes=1, seed=5,
                                           mixture=mixture, workers=1))
    assert art is not None and summary.accepted == 1, summary

    # Evaluation: a suite names the task (templates checked), its scripted baseline runs.
    suite = parse_suite({"name": "toy", "seed": 0, "episodes_per_cell": 1,
                         "tasks": [{"task": "toy_lift", "templates": ["cube"],
                                    "held_out_templates": ["torus"]}],
                         "cells": {"nominal": True}}, "toy.yaml")
    specs = expand(suite, seed=0)
    assert {s.task for s in specs} == {"toy_lift"}
    runner = Runner(PolicySource.parse("scripted:toy_lift").load(),
                    RolloutOptions(world="task", max_steps=40))
    result = runner.run(specs[0])
    assert result.task == "toy_lift" and result.split == C.SPLIT_TRAIN
    assert result.stages == toy_lift_task.ToyLift.stages and result.duration_s > 0

    # A second task cannot take its name or its env id.
    with pytest.raises(ConfigError, match="taken by toy_lift_task:ToyLift"):
        registry.add_task(registry.TaskEntry("toy_lift", "x:Y", "x:Env", "toytasks/Other-v0"))
    with pytest.raises(ConfigError, match="env_id.*taken by task toy_lift"):
        registry.add_task(registry.TaskEntry("toy_2", "x:Y", "x:Env", "toytasks/ToyLift-v0"))


def _install_entry_point_task(root: Path) -> None:
    """A distribution on ``root`` whose task is registered only through its entry point."""
    (root / "toy_ep_task.py").write_text(textwrap.dedent(TOY_MODULE).format(
        name="toy_ep_lift", env_id="toytasks/ToyEpLift-v0"))
    info = root / "toy_ep_task-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ep-task\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\ntoy_ep_lift = toy_ep_task:ToyLift\n"
        "toy_broken = toy_ep_task:generate\n")


def test_an_entry_point_task_is_listed_then_loaded_on_first_lookup(tmp_path, monkeypatch,
                                                                   clean_registry):
    import gymnasium as gym

    _install_entry_point_task(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "toy_ep_lift" in C.TASKS and "toy_ep_lift" in registry.TASKS
    assert "toy_ep_task" not in sys.modules            # listed, not imported
    assert registry.task_scene("toy_ep_lift") == C.SCENE_TABLETOP
    assert "toy_ep_task" in sys.modules
    env = gym.make("toytasks/ToyEpLift-v0", control_mode=C.CONTROL_DICT)
    env.reset(seed=1)
    env.close()
    with pytest.raises(ConfigError, match="entry point.*not toy_ep_task:generate"):
        registry.task_entry("toy_broken")
