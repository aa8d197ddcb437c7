"""Gymnasium registration of the clawgym envs (extensible: add rows to ENVS).

``import clawgym_ros.sim`` registers every id in :data:`ENVS`; later issues add task envs
(e.g. ``clawgym/PickPlace-v0``) by adding a row here or by calling :func:`register_env`.

Gymnasium builds each id through :class:`~clawgym_ros.sim.modes.EnvFactory`: ``gym.make(ID)``
gives the RL interface (a flat ``Box(-1, 1)`` action, dense reward), ``gym.make(ID,
control_mode="dict")`` the env class itself with its Dict interface (see
:mod:`clawgym_ros.sim.modes`). :data:`ENVS` keeps the classes' entry points.
"""

from __future__ import annotations

from typing import Any

from clawgym_ros import constants as C

#: env id -> (entry point "module:Class", max_episode_steps, default kwargs)
ENVS: dict[str, tuple[str, int | None, dict[str, Any]]] = {
    C.ENV_TABLETOP: ("clawgym_ros.sim.envs:TabletopEnv", 500, {}),
    C.ENV_MOBILE_BASE: ("clawgym_ros.sim.envs:MobileBaseEnv", 1000, {}),
    # Task envs (issue 6): stage tracking and success of clawgym_ros.tasks
    C.ENV_PICK_PLACE: ("clawgym_ros.tasks.pick_place:PickPlaceEnv", 1500, {}),
    C.ENV_PEG_INSERT: ("clawgym_ros.tasks.peg_insert:PegInsertEnv", 1500, {}),
    C.ENV_GPS_NAV: ("clawgym_ros.tasks.gps_nav:GpsNavEnv", 4500, {}),
    C.ENV_PILL_HANDOVER: ("clawgym_ros.tasks.pill_handover:PillHandoverEnv", 2000, {}),
}


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
