"""Tasks by name: the registry (lazy imports) and helpers that serve mixtures of tasks.

Add a task by adding a row to :data:`TASKS` (``name -> "module:Class"``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.synthesis.signoff import DualSignoff, FeasibilityCheck, PhysicalLimits
from clawgym_ros.tasks.base import Task

#: task name -> "module:Class" (imported on first use).
TASKS: dict[str, str] = {
    C.TASK_PICK_PLACE: "clawgym_ros.tasks.pick_place:PickPlace",
    C.TASK_PEG_INSERT: "clawgym_ros.tasks.peg_insert:PegInsert",
    C.TASK_PILL_HANDOVER: "clawgym_ros.tasks.pill_handover:PillHandover",
    C.TASK_GPS_NAV: "clawgym_ros.tasks.gps_nav:GpsNav",
}


def task_names() -> tuple[str, ...]:
    """Registered task names whose module is importable."""
    out = []
    for name in TASKS:
        try:
            get_task(name)
        except ConfigError:
            continue
        out.append(name)
    return tuple(out)


@functools.cache
def get_task(name: str) -> Task:
    """The task registered as ``name`` (one cached instance per process).

    Raises:
        ConfigError: unknown name or a task whose module is missing.
    """
    if name not in TASKS:
        raise ConfigError("task", name, "one of " + ", ".join(TASKS))
    module, cls = TASKS[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        raise ConfigError("task", name, "a task whose module is installed "
                          f"({module} is missing)") from None
    return getattr(mod, cls)()


def signoff_for(tasks: Iterable[str]) -> DualSignoff:
    """One dual sign-off covering several tasks (semantic validators merged).

    The physical check uses the union of the tasks' joint limits and the largest contact-force
    threshold among them (tasks of one robot share the URDF limits).
    """
    semantic = {}
    joints = {}
    force = 0.0
    for name in dict.fromkeys(tasks):
        task = get_task(name)
        semantic.update(task.semantic_validators())
        joints.update(task.joint_limits())
        force = max(force, task.max_contact_force)
    return DualSignoff(semantic=semantic, physical=FeasibilityCheck(
        PhysicalLimits(joints=joints, max_contact_force=force or 200.0)))


def generate_any(spec: EpisodeSpec) -> EpisodeRecord:
    """Run the expert of ``spec.task`` (module-level, so picklable for worker processes)."""
    return get_task(spec.task).generate(spec)
