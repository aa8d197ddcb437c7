"""Gymnasium registration of the clawgym envs: the bare scene envs, and every task's env from
the task registry (:mod:`clawgym_ros.tasks.registry`).

``import clawgym_ros.sim`` registers every id in :data:`ENVS`: the scene envs and the env of
each registered task (a task registered later, with ``@register_task`` or
:func:`~clawgym_ros.tasks.registry.add_task`, is registered there and then).
:func:`register_env` registers any other env.

Gymnasium builds each id through :class:`~clawgym_ros.sim.modes.EnvFactory`: ``gym.make(ID)``
gives the RL interface (a flat ``Box(-1, 1)`` action, dense reward), ``gym.make(ID,
control_mode="dict")`` the env class itself with its Dict interface (see
:mod:`clawgym_ros.sim.modes`). :data:`ENVS` keeps the classes' entry points.
"""

from __future__ import annotations

from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.tasks.registry import TaskEntry, registered_entries

#: scene -> Gymnasium id of its bare env (the ``scene`` world of evaluation, sim_node's
#: scenarios)
SCENE_ENVS: dict[str, str] = {C.SCENE_TABLETOP: C.ENV_TABLETOP,
                              C.SCENE_OUTDOOR: C.ENV_MOBILE_BASE}

#: env id -> (entry point "module:Class", max_episode_steps, default kwargs)
ENVS: dict[str, tuple[str, int | None, dict[str, Any]]] = {
    C.ENV_TABLETOP: ("clawgym_ros.sim.envs:TabletopEnv", 500, {}),
    C.ENV_MOBILE_BASE: ("clawgym_ros.sim.envs:MobileBaseEnv", 1000, {}),
    # Task envs: one per registered task (its TaskEntry)
    **{e.env_id: (e.env, e.max_episode_steps, {}) for e in registered_entries()},
}


def scene_env_id(scene: str) -> str:
    """The Gymnasium id of ``scene``'s bare env."""
    return SCENE_ENVS[scene]


def register_env(env_id: str, entry_point: str, max_episode_steps: int | None = None,
                 **kwargs: Any) -> None:
    """Register one env with Gymnasium (idempotent) and record it in :data:`ENVS`."""
    import gymnasium

    from clawgym_ros.sim.modes import EnvFactory

    ENVS[env_id] = (entry_point, max_episode_steps, dict(kwargs))
    if env_id in gymnasium.registry:
        return
    gymnasium.register(id=env_id, entry_point=EnvFactory(entry_point),
                       max_episode_steps=max_episode_steps, kwargs=dict(kwargs))


def register_envs() -> list[str]:
    """Register every env of :data:`ENVS`; returns the ids."""
    for env_id, (entry, steps, kwargs) in list(ENVS.items()):
        register_env(env_id, entry, steps, **kwargs)
    return list(ENVS)


def register_task_env(entry: TaskEntry) -> None:
    """Register a task's env (called by the task registry for tasks added after import)."""
    register_env(entry.env_id, entry.env, entry.max_episode_steps)
