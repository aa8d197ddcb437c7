"""Re-validation by replay: run a record's actions again in the simulator from its seed.

The replay builds the same task env (template, seed) with the same perturbations (family,
intensity; their generators are keyed by the episode seed), sends the recorded action of every
control step and records a new episode: stages, outcome, goal/achieved and the physical arrays
come from the replay, the skill calls are copied from the original (they annotate the actions).
Sign the result off with the task's :meth:`~clawgym_ros.tasks.base.Task.signoff`.
"""

from __future__ import annotations

import importlib

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.tasks.expert import ArmExpert
from clawgym_ros.tasks.registry import get_task
from clawgym_ros.tasks.world import TaskEnv


def env_class(env_id: str) -> type[TaskEnv]:
    """The class registered for a Gymnasium id in ``clawgym_ros.sim.registration.ENVS``."""
    from clawgym_ros.sim.registration import ENVS

    module, cls = ENVS[env_id][0].split(":")
    return getattr(importlib.import_module(module), cls)


def spec_of(record: EpisodeRecord) -> EpisodeSpec:
    """The episode spec that reproduces ``record`` (template pinned to the one used)."""
    return EpisodeSpec(index=record.episode_index, seed=record.seed, task=record.task,
                       template=record.template, family=record.family,
                       intensity=record.intensity, difficulty=record.difficulty)


def replay_record(record: EpisodeRecord) -> EpisodeRecord:
    """Replay ``record``'s actions (arm tasks) and return the replayed record."""
    task = get_task(record.task)
    expert = ArmExpert(spec_of(record), task, env_class(task.env_id))
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
