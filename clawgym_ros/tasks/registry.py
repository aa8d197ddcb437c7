"""Tasks by name: one registry, filled by a table, a decorator and Python entry points.

A task registers once, as a :class:`TaskEntry`: its spec and expert (the
:class:`~clawgym_ros.tasks.base.Task` subclass: stages, skills, grammar, templates, expert),
its env (Gymnasium entry point, id and episode limit), its simulator scene, and its
evaluation defaults (the scripted baseline ``scripted:<task>``, the observation keys only
``task_state`` carries in ROS mode). Everything else per task is derived from it:
``constants.TASKS``, the Gymnasium ids (:mod:`clawgym_ros.sim.registration`), the scene of a
task (:func:`task_scene`) and the lookups of evaluation.

Three ways in:

- built-in tasks: a row of :data:`BUILTIN_TASKS` (modules imported on first use, so naming a
  task costs no MuJoCo import);
- any imported module: ``@register_task(env=..., max_episode_steps=...)`` on the Task
  subclass (name, env id and scene are read from the class);
- another installed package: an entry point in the group ``clawgym_ros.tasks``
  (``name = "package.module:TaskClass"``, a class registered with the decorator, or a
  :class:`TaskEntry`), loaded the first time the name is looked up.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from clawgym_ros import constants as C
from clawgym_ros import plugins
from clawgym_ros.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
    from clawgym_ros.synthesis.signoff import DualSignoff
    from clawgym_ros.tasks.base import Task

#: Entry-point group through which other packages register tasks.
ENTRY_POINT_GROUP = "clawgym_ros.tasks"


def _entry_points() -> dict[str, Any]:
    return plugins.entry_points(ENTRY_POINT_GROUP)


#: Simulator scenes a task can be built on (config/scenes/<scene>.yaml).
SCENES: tuple[str, ...] = (C.SCENE_TABLETOP, C.SCENE_OUTDOOR)
#: The scripted baseline of arm tasks (``scripted:<task>``).
SCRIPTED_PICK = "clawgym_ros.evaluation.scripted:ScriptedPick"
SCRIPTED_NAV = "clawgym_ros.evaluation.scripted:ScriptedNav"


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    """One task's registration.

    Attributes:
        name: the task id (mixtures, suites, ``sim/reset``, dataset groups).
        task: ``"module:Class"`` of the :class:`~clawgym_ros.tasks.base.Task` subclass (spec:
            stages, skills, grammar, templates; its ``expert``).
        env: ``"module:Class"`` of the task env (a
            :class:`~clawgym_ros.tasks.world.TaskEnv`).
        env_id: Gymnasium id of the env (``gym.make(env_id)``).
        scene: the simulator scene (``tabletop`` arm, ``outdoor`` mobile base): the bare
            scene env of the ``scene`` world, sim_node's scenario, the scored joints.
        max_episode_steps: the env's episode limit; evaluation's episode length when a suite
            sets no ``max_steps``.
        scripted: ``"module:Class"`` of the scripted baseline policy (``scripted:<task>``).
        task_state_keys: observation keys of the env that no sensor topic carries (ROS mode:
            sim_node's ``task_state`` gives them, e.g. the goal).
    """

    name: str
    task: str
    env: str
    env_id: str
    scene: str = C.SCENE_TABLETOP
    max_episode_steps: int = 1500
    scripted: str = SCRIPTED_PICK
    task_state_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip() \
                or "/" in self.name or ":" in self.name:
            raise ConfigError("task", self.name, "a non-empty name without spaces around it, "
                              "'/' or ':'")
        for field in ("task", "env", "scripted"):
            value = getattr(self, field)
            if not isinstance(value, str) or ":" not in value:
                raise ConfigError(f"tasks.{self.name}.{field}", value, "'module:Name'")
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ConfigError(f"tasks.{self.name}.env_id", self.env_id, "a Gymnasium id")
        if self.scene not in SCENES:
            raise ConfigError(f"tasks.{self.name}.scene", self.scene, "one of "
                              + ", ".join(SCENES))
        if not isinstance(self.max_episode_steps, int) or self.max_episode_steps < 1:
            raise ConfigError(f"tasks.{self.name}.max_episode_steps", self.max_episode_steps,
                              "an integer >= 1")
        object.__setattr__(self, "task_state_keys", tuple(self.task_state_keys))


#: The built-in tasks (one row each; their modules are imported on first use).
BUILTIN_TASKS: tuple[TaskEntry, ...] = (
    TaskEntry(C.TASK_PICK_PLACE, "clawgym_ros.tasks.pick_place:PickPlace",
              "clawgym_ros.tasks.pick_place:PickPlaceEnv", C.ENV_PICK_PLACE,
              max_episode_steps=1500, task_state_keys=(C.OBS_PLACE_GOAL,)),
    TaskEntry(C.TASK_PEG_INSERT, "clawgym_ros.tasks.peg_insert:PegInsert",
              "clawgym_ros.tasks.peg_insert:PegInsertEnv", C.ENV_PEG_INSERT,
              max_episode_steps=1500),
    TaskEntry(C.TASK_PILL_HANDOVER, "clawgym_ros.tasks.pill_handover:PillHandover",
              "clawgym_ros.tasks.pill_handover:PillHandoverEnv", C.ENV_PILL_HANDOVER,
              max_episode_steps=2000, task_state_keys=(C.OBS_HAND,)),
    TaskEntry(C.TASK_GPS_NAV, "clawgym_ros.tasks.gps_nav:GpsNav",
              "clawgym_ros.tasks.gps_nav:GpsNavEnv", C.ENV_GPS_NAV, scene=C.SCENE_OUTDOOR,
              max_episode_steps=4500, scripted=SCRIPTED_NAV,
              task_state_keys=(C.OBS_NAV_GOAL,)),
)

_REGISTRY: dict[str, TaskEntry] = {e.name: e for e in BUILTIN_TASKS}


def add_task(entry: TaskEntry) -> TaskEntry:
    """Register ``entry`` (and its env with Gymnasium once :mod:`clawgym_ros.sim` is loaded;
    until then ``import clawgym_ros.sim`` registers it with the others).

    Raises:
        ConfigError: the name, or the env id, is taken by another task.
    """
    if not isinstance(entry, TaskEntry):
        raise ConfigError("task", entry, "a TaskEntry")
    known = _REGISTRY.get(entry.name)
    if known is not None and known != entry:
        raise ConfigError("task", entry.name, f"a name not registered yet (taken by {known.task})")
    for other in _REGISTRY.values():
        if other.name != entry.name and other.env_id == entry.env_id:
            raise ConfigError(f"tasks.{entry.name}.env_id", entry.env_id,
                              f"an id not registered yet (taken by task {other.name})")
    _REGISTRY[entry.name] = entry
    if "clawgym_ros.sim.registration" in sys.modules:
        sys.modules["clawgym_ros.sim.registration"].register_task_env(entry)
    return entry


def register_task(env: Any, max_episode_steps: int = 1500, scripted: Any = SCRIPTED_PICK,
                  task_state_keys: Iterable[str] = ()):
    """Class decorator: register a :class:`~clawgym_ros.tasks.base.Task` subclass (its
    ``name``, ``env_id`` and ``scene`` attributes) with its env.

    Args:
        env: the task env class or ``"module:Class"``.
        max_episode_steps: the env's episode limit.
        scripted: the scripted baseline class or ``"module:Class"``.
        task_state_keys: observation keys only ``task_state`` carries in ROS mode.

    Raises:
        ConfigError: a bad or taken name / env id (see :class:`TaskEntry`, :func:`add_task`).
    """
    def decorate(cls):
        add_task(TaskEntry(name=cls.name, task=plugins.ref(cls), env=plugins.ref(env),
                           env_id=cls.env_id, scene=cls.scene,
                           max_episode_steps=max_episode_steps,
                           scripted=plugins.ref(scripted), task_state_keys=tuple(task_state_keys)))
        return cls
    return decorate


def task_entry(name: Any, field: str = "task") -> TaskEntry:
    """The registration of task ``name`` (an entry point is loaded on its first lookup).

    Raises:
        ConfigError: an unknown name (naming ``field`` and the known tasks), or an entry point
            that names neither a registered Task class nor a TaskEntry.
    """
    return plugins.lookup(name, field, _REGISTRY, ENTRY_POINT_GROUP, TaskEntry, add_task,
                          lambda: TASKS, "a Task class registered with @register_task or a "
                          "TaskEntry")


class _TaskTable(Mapping):
    """Read-only live view ``name -> TaskEntry``: built-in, registered, then entry-point
    names (an entry point is loaded only when its entry is read)."""

    def __iter__(self) -> Iterator[str]:
        yield from list(_REGISTRY)
        yield from (n for n in _entry_points() if n not in _REGISTRY)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in _REGISTRY or name in _entry_points())

    def __getitem__(self, name: str) -> TaskEntry:
        if name not in self:
            raise KeyError(name)
        return task_entry(name)

    def __repr__(self) -> str:
        return f"TASKS({', '.join(self)})"


#: Every task by name (live: includes tasks registered later and installed entry points).
TASKS: Mapping[str, TaskEntry] = _TaskTable()


def task_names() -> tuple[str, ...]:
    """Every task name that can be looked up (``constants.TASKS``), built-in ones first."""
    return tuple(TASKS)


def registered_entries() -> tuple[TaskEntry, ...]:
    """The entries registered so far (built-in and decorated; entry points not loaded)."""
    return tuple(_REGISTRY.values())


def task_scene(name: str) -> str:
    """The simulator scene task ``name`` runs in (no task module is imported).

    Raises:
        ConfigError: unknown task.
    """
    return task_entry(name).scene


def task_state_keys() -> dict[str, tuple[str, ...]]:
    """task -> observation keys only ``task_state`` carries (ROS mode), every task."""
    return {name: task_entry(name).task_state_keys for name in TASKS}


@functools.cache
def get_task(name: str) -> Task:
    """The task registered as ``name`` (one cached instance per process).

    Raises:
        ConfigError: unknown name, a task whose module is missing, or a Task class whose
            ``name``/``env_id``/``scene`` differ from its registration.
    """
    from clawgym_ros.tasks.base import Task

    entry = task_entry(name)
    module = entry.task.partition(":")[0]
    try:
        cls = plugins.load(entry.task)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        raise ConfigError("task", name, "a task whose module is installed "
                          f"({module} is missing)") from None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ConfigError(f"tasks.{name}.task", entry.task, "a Task subclass")
    for attr in ("name", "env_id", "scene"):
        if getattr(cls, attr) != getattr(entry, attr):
            raise ConfigError(f"tasks.{name}.{attr}", getattr(cls, attr),
                              f"{getattr(entry, attr)!r} (its registration)")
    return cls()


def scripted_policy_class(name: str) -> type:
    """The scripted baseline class of task ``name`` (``scripted:<task>``)."""
    return plugins.load(task_entry(name).scripted)


def signoff_for(tasks: Iterable[str]) -> DualSignoff:
    """One dual sign-off covering several tasks (semantic validators merged).

    The physical check uses the union of the tasks' joint limits and the largest contact-force
    threshold among them (tasks of one robot share the URDF limits).
    """
    from clawgym_ros.perturbations.disturbance import EVENTS
    from clawgym_ros.synthesis.signoff import (
        DisturbanceExcuse,
        DualSignoff,
        FeasibilityCheck,
        PhysicalLimits,
    )

    semantic = {}
    joints = {}
    events = {}
    force = 0.0
    for name in dict.fromkeys(tasks):
        task = get_task(name)
        semantic.update(task.semantic_validators())
        joints.update(task.joint_limits())
        force = max(force, task.max_contact_force)
        if getattr(task, "disturbances", None):
            events[task.name] = dict(task.disturbances)
    return DualSignoff(semantic=semantic, physical=FeasibilityCheck(
        PhysicalLimits(joints=joints, max_contact_force=force or 200.0),
        excuse=DisturbanceExcuse(events, EVENTS) if events else None))


def generate_any(spec: EpisodeSpec) -> EpisodeRecord:
    """Run the expert of ``spec.task`` (module-level, so picklable for worker processes)."""
    return get_task(spec.task).generate(spec)
