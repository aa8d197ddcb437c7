"""Re-validation by replay: run a record's actions again in the simulator from its seed.

The replay builds the same task env (template, seed) with the same perturbations (family,
intensity; their generators are keyed by the episode seed), sends the recorded action of every
control step and records a new episode: stages, outcome, goal/achieved and the physical arrays
come from the replay, the skill calls are copied from the original (they annotate the actions).
Sign the result off with the task's :meth:`~clawgym_ros.tasks.base.Task.signoff`.

Arm tasks whose expert is an :class:`~clawgym_ros.tasks.expert.ArmExpert` (pick_place,
peg_insert: ``Task.arm_expert``) replay through it; the others (gps_nav, pill_handover) replay
in the env their experts build (:func:`~clawgym_ros.tasks.episode_tools.spec_env`), recording
what their experts record: the observation before each step, the true joint state after it,
and energy when the original has it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.tasks.episode_tools import spec_env, start_episode
from clawgym_ros.tasks.expert import ArmExpert
from clawgym_ros.tasks.registry import get_task
from clawgym_ros.tasks.world import TaskEnv


def env_class(env_id: str) -> type[TaskEnv]:
    """The class registered for a Gymnasium id in ``clawgym_ros.sim.registration.ENVS``."""
    from clawgym_ros.sim.registration import ENVS

    module, cls = ENVS[env_id][0].split(":")
    return getattr(importlib.import_module(module), cls)


def spec_of(record: EpisodeRecord, options: Mapping[str, Any] | None = None) -> EpisodeSpec:
    """The episode spec that reproduces ``record`` (template pinned to the one used).

    Args:
        record: the recorded episode.
        options: the generation options that shape the env (e.g. gps_nav's ``perturbation``
            overrides); records do not store them.
    """
    return EpisodeSpec(index=record.episode_index, seed=record.seed, task=record.task,
                       template=record.template, family=record.family,
                       intensity=record.intensity, difficulty=record.difficulty,
                       options=dict(options or {}))


def replay_record(record: EpisodeRecord, options: Mapping[str, Any] | None = None
                  ) -> EpisodeRecord:
    """Replay ``record``'s actions and return the replayed record.

    Args:
        record: the recorded episode.
        options: generation options needed to rebuild its env (see :func:`spec_of`).
    """
    task = get_task(record.task)
    if not task.arm_expert:
        return _replay_in_env(record, spec_of(record, options))
    expert = ArmExpert(spec_of(record, options), task, env_class(task.env_id))
    acts = record.actions
    target = acts[C.ACT_JOINT_TARGET]
    vel = acts.get(C.ACT_JOINT_VEL, np.zeros_like(target))
    grip = acts[C.ACT_GRIPPER][:, 0]
    for k in range(record.num_steps):
        expert.step(target[k], vel[k], float(grip[k]))
    expert.rec.skill_calls = list(record.skill_calls)
    state = expert.state()
    tracker = expert.base.tracker
    assert tracker is not None
    ok, why = tracker.success(state)
    return expert.rec.finish(success=ok, reason=why, goal=expert.base.goal_dict(),
                             achieved=tracker.achieved(state))


def _replay_in_env(record: EpisodeRecord, spec: EpisodeSpec) -> EpisodeRecord:
    """Replay in the env the gps_nav / pill_handover experts build (see the module doc)."""
    task = get_task(record.task)
    env = spec_env(task.env_id, spec, record.template)
    try:
        obs, info, rec = start_episode(env, spec, record.template, record.joint_names)
        core = env.unwrapped
        b = core.backend
        keys = list(record.observations)
        for k in range(record.num_steps):
            action = {key: value[k] for key, value in record.actions.items()}
            prev = obs
            obs, _, _, _, inf = env.step(action)
            _, q, dq, tau = b.joint_state()
            rec.step(b.time, obs={key: prev[key] for key in keys}, action=action,
                     joint_position=q, joint_velocity=dq, joint_effort=tau,
                     contact_force=float(inf.get("contact_force", 0.0)),
                     collision=bool(inf.get("collision", False)),
                     energy=(float(b.data.energy.sum()) if record.energy is not None
                             else None))
            for name in inf.get("new_stages", []):
                rec.stage(name, b.time)
        rec.skill_calls = list(record.skill_calls)
        state = core.true_state()
        ok, why = core.tracker.success(state)
        achieved = {**record.achieved, **core.tracker.achieved(state)}
        return rec.finish(success=ok, reason=why, goal=core.goal_dict(), achieved=achieved)
    finally:
        env.close()
