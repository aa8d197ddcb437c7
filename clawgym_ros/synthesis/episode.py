"""The episode contract between experts (producers) and the recorder / sign-off (consumers).

An expert receives an :class:`EpisodeSpec` (what to generate, with its own seed) and returns an
:class:`EpisodeRecord`: metadata, per-step arrays, skill calls, stage events and the outcome.
:class:`EpisodeRecorder` builds a record step by step. Everything here is plain Python and
NumPy, picklable, so records travel from worker processes to the writer.

See docs/notes/dataset_api.md for the field reference and examples.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError


class EpisodeError(ClawgymError):
    """An episode record breaks the contract (shapes, names, values)."""


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
    """What one episode must be: produced by the mixture plan, consumed by a generator.

    Attributes:
        index: position of the episode in the run's plan (0-based); names its file.
        seed: the episode's own seed, derived from the run seed and ``index`` only.
        task: task name (e.g. ``pick_place``).
        template: task template; empty = the generator picks a training template from ``seed``.
        family: perturbation family (one of ``constants.PERTURBATION_FAMILIES``), or several
            joined with ``+`` (an evaluation's combined cell, e.g. ``lighting+sensor_noise``:
            a recovery episode restarts from a failure state under its cell's conditions).
        intensity: perturbation intensity in [0, 1].
        difficulty: one of ``constants.DIFFICULTIES``.
        options: generator options (JSON-able), e.g. ``{"images": True}``.
    """

    index: int
    seed: int
    task: str
    template: str = ""
    family: str = C.FAMILY_NONE
    intensity: float = 0.0
    difficulty: str = C.DEFAULT_DIFFICULTY
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for index files and manifests)."""
        return {"index": self.index, "seed": self.seed, "task": self.task,
                "template": self.template, "family": self.family,
                "intensity": self.intensity, "difficulty": self.difficulty,
                "options": dict(self.options)}


@dataclasses.dataclass
class SkillCall:
    """One skill call of the expert.

    Attributes:
        name: skill name from the task's vocabulary (e.g. ``grasp``).
        args: JSON-able arguments (recorded as JSON strings in SkillArgument key/value pairs).
        start: sim time (s) the call started.
        end: sim time (s) it ended.
        outcome: one of ``constants.SKILL_OUTCOMES`` (``ok``, ``failed``, ``skipped``).
        detail: free text (why it failed, ...).
    """

    name: str
    args: dict[str, Any] = dataclasses.field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    outcome: str = C.SKILL_OK
    detail: str = ""


@dataclasses.dataclass
class StageEvent:
    """A task stage reached at sim time ``time`` (s)."""

    name: str
    time: float


@dataclasses.dataclass
class Outcome:
    """How the episode ended: ``success`` by the task's own success condition, and why not."""

    success: bool
    reason: str = ""


@dataclasses.dataclass
class EpisodeRecord:
    """One generated episode. T = number of control steps, J = number of joints.

    Per-step arrays are converted on construction: numbers to float64, observation and action
    values to 2-D ``(T, d)`` (a 1-D array becomes ``(T, 1)``), images to uint8 ``(T, H, W, 3)``.
    Call :meth:`validate` (the recorder does) to check shapes and names.

    Attributes:
        task, template, family, intensity, difficulty, episode_index, seed: metadata (the actual
            template used, even when the spec left it empty).
        perturbation_params: the perturbation's numeric parameters (family-specific names).
        perturbation_schedule: one of ``constants.SCHEDULES``.
        time: (T,) sim time of each step in seconds, non-decreasing.
        joint_names: names of the J physical joints in the joint arrays.
        joint_position, joint_velocity, joint_effort: (T, J) true physical joint state.
        observations: key -> (T, d) what the policy observes (keys from constants OBS_*).
        actions: key -> (T, d) what the expert commanded at each step (ACT_* keys).
        contact_force: (T,) largest contact force magnitude (N) at each step.
        collision: (T,) True where an unintended contact happened at that step.
        energy: (T,) total mechanical energy (J) or None when the simulator does not report it.
        images: camera name -> (T, H, W, 3) uint8 RGB frames (optional).
        origin: where a non-fresh episode started (e.g. a recovery episode's report and
            failure state); empty for an ordinary episode.
        skill_calls: the skill calls in order.
        stages: the stages reached, in the order they were reached.
        goal: JSON-able goal description (e.g. ``{"bin": "bin_1", "object_xyz": [...]}``).
        achieved: the same keys as measured at the end of the episode.
        outcome: success flag and reason.
    """

    task: str
    template: str
    family: str
    intensity: float
    difficulty: str
    episode_index: int
    seed: int
    time: np.ndarray
    joint_names: tuple[str, ...]
    joint_position: np.ndarray
    joint_velocity: np.ndarray
    joint_effort: np.ndarray
    observations: dict[str, np.ndarray]
    actions: dict[str, np.ndarray]
    contact_force: np.ndarray
    collision: np.ndarray
    outcome: Outcome
    skill_calls: list[SkillCall] = dataclasses.field(default_factory=list)
    stages: list[StageEvent] = dataclasses.field(default_factory=list)
    goal: dict[str, Any] = dataclasses.field(default_factory=dict)
    achieved: dict[str, Any] = dataclasses.field(default_factory=dict)
    perturbation_params: dict[str, float] = dataclasses.field(default_factory=dict)
    perturbation_schedule: str = "constant"
    energy: np.ndarray | None = None
    images: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: Where the episode started when not from a fresh reset (JSON-able), e.g. a recovery
    #: episode's ``{"kind": "recovery", "report": id, "state": name, ...}``; empty otherwise.
    origin: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.joint_names = tuple(self.joint_names)
        self.time = np.asarray(self.time, dtype=np.float64).reshape(-1)
        for name in ("joint_position", "joint_velocity", "joint_effort"):
            setattr(self, name, np.atleast_2d(np.asarray(getattr(self, name), np.float64)))
        self.observations = {k: _as_2d(v) for k, v in self.observations.items()}
        self.actions = {k: _as_2d(v) for k, v in self.actions.items()}
        self.contact_force = np.asarray(self.contact_force, dtype=np.float64).reshape(-1)
        self.collision = np.asarray(self.collision, dtype=bool).reshape(-1)
        if self.energy is not None:
            self.energy = np.asarray(self.energy, dtype=np.float64).reshape(-1)
        self.images = {k: np.asarray(v, dtype=np.uint8) for k, v in self.images.items()}
        self.perturbation_params = {str(k): float(v) for k, v in self.perturbation_params.items()}

    @classmethod
    def from_spec(cls, spec: EpisodeSpec, **fields: Any) -> EpisodeRecord:
        """Build a record whose metadata comes from ``spec`` (``fields`` may override any)."""
        meta = {"task": spec.task, "template": spec.template, "family": spec.family,
                "intensity": spec.intensity, "difficulty": spec.difficulty,
                "episode_index": spec.index, "seed": spec.seed}
        meta.update(fields)
        return cls(**meta)

    @property
    def num_steps(self) -> int:
        """T, the number of recorded control steps."""
        return int(self.time.shape[0])

    def observation_spec(self) -> dict[str, int]:
        """Observation key -> width, in the canonical vector order."""
        return {k: int(self.observations[k].shape[1])
                for k in ordered_keys(self.observations, C.OBS_STATE_KEYS)}

    def action_spec(self) -> dict[str, int]:
        """Action key -> width, in the canonical vector order."""
        return {k: int(self.actions[k].shape[1])
                for k in ordered_keys(self.actions, C.ACTION_KEYS)}

    def summary(self) -> dict[str, Any]:
        """The JSON-able index row of this episode (episodes.jsonl)."""
        return {
            "index": self.episode_index, "seed": self.seed, "task": self.task,
            "template": self.template, "family": self.family, "intensity": self.intensity,
            "difficulty": self.difficulty, "perturbation": dict(self.perturbation_params),
            "steps": self.num_steps, "success": self.outcome.success,
            "reason": self.outcome.reason, "stages": [s.name for s in self.stages],
            "skills": [s.name for s in self.skill_calls],
        }

    def validate(self) -> EpisodeRecord:
        """Check the contract: shapes, names, vocabularies, time order.

        Returns:
            The record itself.

        Raises:
            EpisodeError: naming the field and what was expected.
        """
        t = self.num_steps
        if t < 1:
            raise EpisodeError("episode has no steps (time is empty)")
        if np.any(np.diff(self.time) < 0):
            raise EpisodeError("time must be non-decreasing")
        j = len(self.joint_names)
        if len(set(self.joint_names)) != j:
            raise EpisodeError(f"joint_names has duplicates: {self.joint_names}")
        for name in ("joint_position", "joint_velocity", "joint_effort"):
            shape = getattr(self, name).shape
            if shape != (t, j):
                raise EpisodeError(f"{name} has shape {shape}, expected {(t, j)} (T, J)")
        for group, arrays in (("observations", self.observations), ("actions", self.actions)):
            for key, value in arrays.items():
                if value.shape[0] != t:
                    raise EpisodeError(f"{group}[{key!r}] has {value.shape[0]} rows, "
                                       f"expected T={t}")
        for name in ("contact_force", "collision"):
            if getattr(self, name).shape != (t,):
                raise EpisodeError(f"{name} has shape {getattr(self, name).shape}, "
                                   f"expected ({t},)")
        if self.energy is not None and self.energy.shape != (t,):
            raise EpisodeError(f"energy has shape {self.energy.shape}, expected ({t},)")
        for cam, frames in self.images.items():
            if frames.ndim != 4 or frames.shape[0] != t or frames.shape[3] != 3:
                raise EpisodeError(f"images[{cam!r}] has shape {frames.shape}, "
                                   f"expected (T={t}, H, W, 3)")
        for call in self.skill_calls:
            if call.outcome not in C.SKILL_OUTCOMES:
                raise EpisodeError(f"skill call {call.name!r} outcome {call.outcome!r} is not "
                                   f"one of {C.SKILL_OUTCOMES}")
        if not is_family(self.family):
            raise EpisodeError(f"family {self.family!r} is not one of "
                               f"{C.PERTURBATION_FAMILIES} nor distinct ones of them (not "
                               "none) joined with '+'")
        if not (0.0 <= self.intensity <= 1.0):
            raise EpisodeError(f"intensity {self.intensity!r} is not in [0, 1]")
        for key, value in self.perturbation_params.items():
            if not math.isfinite(value):
                raise EpisodeError(f"perturbation_params[{key!r}]={value} is not finite")
        return self


def is_family(name: str) -> bool:
    """Whether ``name`` is a registered perturbation family (or ``none``), or distinct
    registered families joined with ``+`` (a combined cell)."""
    if name in C.PERTURBATION_FAMILIES:
        return True
    parts = name.split("+")
    return (len(parts) > 1 and len(set(parts)) == len(parts)
            and all(p in C.PERTURBATION_FAMILIES[1:] for p in parts))


def _as_2d(value: Any) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 1:
        return array.reshape(-1, 1)
    if array.ndim != 2:
        raise EpisodeError(f"per-step array of shape {array.shape} must be (T,) or (T, d)")
    return array


def ordered_keys(keys: Mapping[str, Any] | Sequence[str], canonical: Sequence[str]) -> list[str]:
    """``keys`` in canonical order: listed keys first (in list order), then the rest sorted."""
    present = set(keys)
    return [k for k in canonical if k in present] + sorted(present - set(canonical))


def _rows(values: list[np.ndarray]) -> np.ndarray:
    """(T, d): one flattened row per recorded step (one array built in C, not T stacked)."""
    try:
        return np.array(values, dtype=np.float64).reshape(len(values), -1)
    except ValueError:      # shapes differ between steps (e.g. (d,) and (1, d)): flatten each
        return np.stack([v.reshape(-1) for v in values])


class EpisodeRecorder:
    """Builds an :class:`EpisodeRecord` step by step (what an expert calls in its loop).

    Example::

        rec = EpisodeRecorder(spec, joint_names=C.ARM_JOINTS + C.GRIPPER_JOINTS)
        rec.stage("reach", t)
        rec.step(t, obs={...}, action={...}, joint_position=q, joint_velocity=dq,
                 joint_effort=tau, contact_force=f, collision=False)
        rec.skill("grasp", {"width": 0.02}, start=1.0, end=1.4, outcome=C.SKILL_OK)
        record = rec.finish(success=True, goal={...}, achieved={...})
    """

    def __init__(self, spec: EpisodeSpec, joint_names: Sequence[str], *,
                 template: str | None = None,
                 perturbation_params: Mapping[str, float] | None = None,
                 perturbation_schedule: str = "constant"):
        self.spec = spec
        self.joint_names = tuple(joint_names)
        self.template = spec.template if template is None else template
        self.perturbation_params = dict(perturbation_params or {})
        self.perturbation_schedule = perturbation_schedule
        self._time: list[float] = []
        self._q: list[np.ndarray] = []
        self._dq: list[np.ndarray] = []
        self._tau: list[np.ndarray] = []
        self._obs: dict[str, list[np.ndarray]] = {}
        self._act: dict[str, list[np.ndarray]] = {}
        self._force: list[float] = []
        self._collision: list[bool] = []
        self._energy: list[float] = []
        self._images: dict[str, list[np.ndarray]] = {}
        self.skill_calls: list[SkillCall] = []
        self.stages: list[StageEvent] = []
        self.origin: dict[str, Any] = {}

    def step(self, time: float, *, obs: Mapping[str, Any], action: Mapping[str, Any],
             joint_position: Any, joint_velocity: Any, joint_effort: Any,
             contact_force: float = 0.0, collision: bool = False, energy: float | None = None,
             images: Mapping[str, np.ndarray] | None = None) -> None:
        """Append one control step (the same keys every step)."""
        first = not self._time
        if not first and (obs.keys() != self._obs.keys() or action.keys() != self._act.keys()):
            raise EpisodeError(f"step {len(self._time)}: observation/action keys changed")
        # rows as given (float64, not flattened: _rows does both once, at the end)
        self._time.append(float(time))
        self._q.append(np.asarray(joint_position, dtype=np.float64))
        self._dq.append(np.asarray(joint_velocity, dtype=np.float64))
        self._tau.append(np.asarray(joint_effort, dtype=np.float64))
        if not first:
            for key, value in obs.items():
                self._obs[key].append(np.asarray(value, np.float64))
            for key, value in action.items():
                self._act[key].append(np.asarray(value, np.float64))
        else:
            self._obs = {key: [np.asarray(value, np.float64)] for key, value in obs.items()}
            self._act = {key: [np.asarray(value, np.float64)] for key, value in action.items()}
        self._force.append(float(contact_force))
        self._collision.append(bool(collision))
        if energy is not None:
            self._energy.append(float(energy))
        for cam, frame in (images or {}).items():
            self._images.setdefault(cam, []).append(np.asarray(frame, dtype=np.uint8))

    def skill(self, name: str, args: Mapping[str, Any] | None = None, *, start: float,
              end: float, outcome: str = C.SKILL_OK, detail: str = "") -> SkillCall:
        """Record one skill call."""
        call = SkillCall(name, dict(args or {}), float(start), float(end), outcome, detail)
        self.skill_calls.append(call)
        return call

    def stage(self, name: str, time: float) -> None:
        """Record that stage ``name`` was reached at sim time ``time``."""
        self.stages.append(StageEvent(name, float(time)))

    def finish(self, *, success: bool, reason: str = "", goal: Mapping[str, Any] | None = None,
               achieved: Mapping[str, Any] | None = None) -> EpisodeRecord:
        """Assemble and validate the record.

        Raises:
            EpisodeError: no steps, inconsistent shapes, energy given for only some steps.
        """
        if not self._time:
            raise EpisodeError("no steps recorded")
        if self._energy and len(self._energy) != len(self._time):
            raise EpisodeError("energy must be given at every step or never")
        record = EpisodeRecord.from_spec(
            self.spec, template=self.template, time=np.array(self._time),
            joint_names=self.joint_names, joint_position=_rows(self._q),
            joint_velocity=_rows(self._dq), joint_effort=_rows(self._tau),
            observations={k: _rows(v) for k, v in self._obs.items()},
            actions={k: _rows(v) for k, v in self._act.items()},
            contact_force=np.array(self._force), collision=np.array(self._collision),
            energy=np.array(self._energy) if self._energy else None,
            images={k: np.stack(v) for k, v in self._images.items()},
            skill_calls=list(self.skill_calls), stages=list(self.stages),
            goal=dict(goal or {}), achieved=dict(achieved or {}),
            outcome=Outcome(bool(success), reason),
            perturbation_params=self.perturbation_params,
            perturbation_schedule=self.perturbation_schedule, origin=dict(self.origin),
        )
        return record.validate()
