"""The small Policy protocol the evaluator consumes (training implements it).

Observations and actions are dicts keyed by the names in :mod:`clawgym_ros.constants`
(``OBS_*``, ``ACT_*``) holding numpy arrays, exactly as the Gymnasium envs produce and accept.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

Observation = dict[str, Any]
Action = dict[str, np.ndarray]


@runtime_checkable
class Policy(Protocol):
    """Anything with ``reset()`` and ``act(obs) -> action`` can be evaluated."""

    def reset(self) -> None:
        """Called at the start of every episode (clears action chunks, filters, ...)."""

    def act(self, obs: Observation) -> Action:
        """Return the next action for ``obs``."""


def start_episode(policy: Any, task: str) -> None:
    """Start an episode of ``task``: tell the policy which task it is, then ``reset()`` it.

    A policy that serves several tasks (a task-conditioned checkpoint of ``clawgym train
    --sequence``) may say so with a ``set_task(task)`` method; it is called before every
    episode and raises :class:`~clawgym_ros.errors.ConfigError` for a task it does not serve.
    Policies without the method are only reset.
    """
    set_task = getattr(policy, "set_task", None)
    if callable(set_task):
        set_task(task)
    policy.reset()


def policy_tasks(policy: Any) -> tuple[str, ...] | None:
    """The tasks a policy serves when it declares them (``tasks``, with ``set_task``), else
    None: any task whose observation it can read."""
    tasks = getattr(policy, "tasks", None)
    return tuple(tasks) if tasks is not None and callable(getattr(policy, "set_task", None)) \
        else None


def open_loop_steps(policy: Any) -> int:
    """How many further ``act`` calls of ``policy`` will not read their observation.

    A policy may say so with an ``open_loop_steps()`` method: a chunked policy returns the
    actions left in its queue, a planner-driven expert the steps left in its plan. Policies
    without the method read every observation (0).
    """
    method = getattr(policy, "open_loop_steps", None)
    return max(int(method()), 0) if callable(method) else 0


def act_chunk(policy: Policy, obs: Observation, max_steps: int) -> list[Action]:
    """The actions ``policy`` takes from ``obs`` on without reading another observation.

    The first is ``policy.act(obs)``; then as many more as the policy declares open loop
    (:func:`open_loop_steps`), at most ``max_steps`` in all. Each later ``act`` gets the same
    ``obs``, which the policy does not read, so the actions are exactly those it would take
    step by step (the in-process runner's way): ``policy_node`` sends them as one
    multi-point trajectory.
    """
    actions = [policy.act(obs)]
    for _ in range(min(open_loop_steps(policy), max(int(max_steps), 1) - 1)):
        actions.append(policy.act(obs))
    return actions
