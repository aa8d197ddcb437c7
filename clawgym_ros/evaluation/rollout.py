"""In-process rollouts: one :class:`~clawgym_ros.evaluation.suites.EpisodeSpec` in, one
:class:`~clawgym_ros.evaluation.records.EpisodeResult` out.

An episode runs a Policy on the spec's environment with the perturbation wrappers of the
spec's cell (``family``/``intensity``/``schedule``, configured with ``perturbation_seed``) and
``env.reset(seed=spec.seed)``. The environment comes from the *world* option:

- ``task``: the task env (``task.env_id``, e.g. ``clawgym/PickPlace-v0`` with the spec's
  template); stages and success from the task's own stage tracker (``info``).
- ``scene``: the task's bare simulator scene (``clawgym/Tabletop-v0``) scored by
  :class:`~clawgym_ros.evaluation.scripted.LiftTracker`. This is what ``sim_node`` simulates,
  so it is the world of the ROS lockstep mode and of the in-process/ROS agreement test.
- ``auto`` (default): ``task`` when the task is installed, else ``scene``.

:class:`EpisodeScorer` turns the per-step true state into the record (stage prefix, feasibility
violations by kind, tool-speed series at 20 Hz for the preference metrics); the ROS evaluator
feeds it the state it reconstructs from ground-truth topics, so both paths score alike.

Determinism: every random draw comes from the env's and the perturbations' seeded generators
and the policy is reset per episode, so a spec gives the same record whatever ran before it in
the same process (tested: 1 worker == 2 workers).

Pure: no rclpy; torch only inside checkpoint policies (loaded lazily).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.protocol import Policy, start_episode
from clawgym_ros.evaluation.records import EpisodeResult, EpisodeSeries, SkillCall
from clawgym_ros.evaluation.suites import EpisodeSpec

WORLD_AUTO = "auto"
WORLD_TASK = "task"
WORLD_SCENE = "scene"
WORLDS: tuple[str, ...] = (WORLD_AUTO, WORLD_TASK, WORLD_SCENE)
POLICY_SCRIPTED = "scripted"
#: Keyword options of the scripted baseline (``scripted:<task>:name=value,...``).
SCRIPTED_OPTIONS = ("target", "align_yaw", "speed_steps", "grasp_height", "replan")
POLICY_CHECKPOINT = "checkpoint"
#: Joint positions beyond the URDF limits by more than this count as a violation (rad or m).
LIMIT_SLACK = 1e-3


# ---------------------------------------------------------------------------------------------
# Policies by reference (picklable: workers load their own copy)
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PolicySource:
    """Where a policy comes from; :meth:`load` builds it (in a worker, in a node, ...).

    Attributes:
        kind: ``checkpoint`` (a trained policy artifact) or ``scripted`` (the task's
            registered baseline: :class:`~clawgym_ros.evaluation.scripted.ScriptedPick` for
            the arm tasks, :class:`~clawgym_ros.evaluation.scripted.ScriptedNav` for gps_nav).
        ref: checkpoint id (prefix allowed) or task name.
        run_dir: run directory holding the checkpoint's artifact store.
        options: scripted policy keyword options (name, value) pairs.
    """

    kind: str
    ref: str
    run_dir: str = ""
    options: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        check_choice("policy.kind", self.kind, (POLICY_CHECKPOINT, POLICY_SCRIPTED))
        if not self.ref:
            raise ConfigError("policy.ref", self.ref, "a checkpoint id or a task name")

    @classmethod
    def parse(cls, text: str, run_dir: str = "") -> PolicySource:
        """``scripted:<task>[:key=value,...]`` or a checkpoint id.

        Raises:
            ConfigError: an unknown task, malformed, unknown or non-finite options.
        """
        if not text.startswith(POLICY_SCRIPTED + ":"):
            return cls(POLICY_CHECKPOINT, text, run_dir)
        parts = text.split(":", 2)
        check_choice("policy task", parts[1], C.TASKS)
        options = []
        if len(parts) == 3 and parts[2]:
            for item in parts[2].split(","):
                key, _, value = item.partition("=")
                try:
                    number = float(value)
                except ValueError:
                    raise ConfigError("policy", text, "scripted:<task>[:name=number,...]"
                                      ) from None
                check_choice("policy option", key.strip(), SCRIPTED_OPTIONS)
                check_range(f"policy option {key.strip()}", number)   # finite: nan ran
                options.append((key.strip(), number))
        return cls(POLICY_SCRIPTED, parts[1], run_dir, tuple(options))

    @property
    def label(self) -> str:
        """The text form (inverse of :meth:`parse`)."""
        if self.kind == POLICY_CHECKPOINT:
            return self.ref
        opts = ",".join(f"{k}={v:g}" for k, v in self.options)
        return f"{POLICY_SCRIPTED}:{self.ref}" + (f":{opts}" if opts else "")

    def load(self) -> Policy:
        """Build the policy (imports torch for checkpoints, lazily).

        Raises:
            ConfigError: unknown scripted options; CheckpointError: a bad checkpoint.
        """
        if self.kind == POLICY_SCRIPTED:
            from clawgym_ros.evaluation.scripted import ScriptedPick
            from clawgym_ros.tasks.registry import scripted_policy_class

            baseline = scripted_policy_class(self.ref)   # the task's registered baseline
            if baseline is not ScriptedPick:
                if self.options:
                    raise ConfigError(f"policy option {self.options[0][0]}",
                                      self.options[0][1], f"none for scripted:{self.ref}")
                return baseline()
            allowed = SCRIPTED_OPTIONS
            kwargs: dict[str, Any] = {}
            for key, value in self.options:
                if key not in allowed:
                    raise ConfigError(f"policy option {key}", value, "one of " + ", ".join(
                        allowed))
                kwargs[key] = (bool(value) if key in ("align_yaw", "replan") else
                               int(value) if key in ("target", "speed_steps") else value)
            return ScriptedPick(**kwargs)
        import torch

        from clawgym_ros.artifacts import ArtifactStore
        from clawgym_ros.training.checkpoint import load_policy

        # Workers share few cores: one torch thread each (see docs/notes/training.md).
        torch.set_num_threads(1)
        return load_policy(ArtifactStore(self.run_dir), self.ref)

    def _meta(self) -> dict[str, Any] | None:
        """The checkpoint's config.json at its last step (read without torch); None for a
        scripted policy and for a checkpoint that cannot be read (loading it says why)."""
        if self.kind != POLICY_CHECKPOINT:
            return None
        import json

        from clawgym_ros.artifacts import ArtifactStore
        from clawgym_ros.errors import ClawgymError

        try:
            artifact = ArtifactStore(self.run_dir).resolve(self.ref, C.KIND_CHECKPOINT)
            step = (artifact.path / C.FILE_LAST).read_text().strip()
            if not step.isdigit():
                return None
            meta = json.loads((artifact.path / step / C.FILE_CHECKPOINT_CONFIG).read_text(
                encoding="utf-8"))
        except (ClawgymError, OSError, ValueError):
            return None
        return meta if isinstance(meta, dict) else None

    def tasks(self) -> tuple[str, ...] | None:
        """The tasks a task-conditioned checkpoint (``clawgym train --sequence``) was trained
        on, from the layout its config.json records; None for any other policy, and for a
        checkpoint that cannot be read (loading it says why)."""
        return _trained_tasks(self._meta())

    def check_tasks(self, tasks: Sequence[str], source: str, world: str = WORLD_AUTO
                    ) -> None:
        """Refuse tasks the policy cannot run (before anything runs or is written): a task a
        task-conditioned checkpoint was not trained on; a task whose world (``world``
        option) does not observe a key the checkpoint reads (e.g. a pick_place checkpoint,
        which reads ``place_goal``, on peg_insert).

        Args:
            tasks: the tasks of the episodes to run.
            source: where they come from, for the message (e.g. ``suite nominal``).

        Raises:
            ConfigError: naming the first such task and what the policy needs.
        """
        meta = self._meta()
        served = _trained_tasks(meta)
        if served is not None:
            for task in tasks:
                if task not in served:
                    raise ConfigError("task", task, f"one of the tasks checkpoint "
                                      f"{self.ref[:12]} was trained on: {', '.join(served)}",
                                      source)
            return
        needed = _observed_keys(meta)
        if not needed:
            return
        from clawgym_ros.evaluation.ros_mode import world_observation_keys
        from clawgym_ros.tasks.registry import get_task

        for task in dict.fromkeys(tasks):
            given = world_observation_keys(
                get_task(task).scene, task if resolve_world(task, world) == WORLD_TASK else "")
            missing = [k for k in needed if k not in given]
            if missing:
                raise ConfigError("task", task, f"a task whose world gives every observation "
                                  f"checkpoint {self.ref[:12]} reads: it reads "
                                  f"{missing[0]!r}, which {task} has not (it gives "
                                  f"{', '.join(given)})", source)


def _trained_tasks(meta: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """The tasks a task-conditioned checkpoint's config.json (``meta``) names; None for
    another policy or an unreadable config."""
    try:
        tasks = meta["layout"]["tasks"] if meta and \
            meta["policy_spec"]["type"] == C.POLICY_TASK_MLP else None
    except (KeyError, TypeError):
        return None
    return tuple(str(t) for t in tasks) if isinstance(tasks, list) else None


def _observed_keys(meta: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """The observation keys a checkpoint's config.json (``meta``) records; None for a
    task-conditioned checkpoint, another policy or an unreadable config."""
    if not meta or _trained_tasks(meta) is not None:
        return None
    try:
        return tuple(str(key) for key, _ in meta["obs_spec"])
    except (KeyError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# Options and the scorer shared with the ROS path
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RolloutOptions:
    """How episodes run.

    Attributes:
        world: ``auto``, ``task`` or ``scene`` (module docstring).
        max_steps: control steps per episode; 0 = the env's own limit.
        cameras: cameras whose images join the observation (``<camera>_rgb``; the first is
            also given as ``image``, the key image policies read). Empty for a policy that
            reads images: the wrist camera, the one synthesis records (:func:`image_options`).
        image_size: square image size in pixels; 0 = the size an image policy was trained on
            (84 for other policies); any other size than that is refused.
        rate_hz: sampling rate of the recorded series.
        failure_states: keep restorable snapshots of where failed episodes failed (task
            world; :mod:`~clawgym_ros.evaluation.failure_states`).
    """

    world: str = WORLD_AUTO
    max_steps: int = 0
    cameras: tuple[str, ...] = ()
    image_size: int = 0
    rate_hz: float = 20.0
    failure_states: bool = True

    def __post_init__(self) -> None:
        check_choice("world", self.world, WORLDS)
        check_int("max_steps", self.max_steps, 0, 1_000_000)
        object.__setattr__(self, "cameras", tuple(self.cameras))
        if self.image_size != 0:
            check_int("image_size", self.image_size, 8, 640)
        check_range("rate_hz", self.rate_hz, 0.0, 1000.0, low_open=True)


#: Image size of rendered observations when neither the options nor the policy set one.
DEFAULT_IMAGE_SIZE = 84


def policy_image_shape(policy: Any) -> tuple[int, ...] | None:
    """The (height, width, channels) a policy's network was trained on, or None for a policy
    that reads no camera image (its own ``uses_image``, else its model's, as the ROS path
    decides)."""
    declared = getattr(policy, "uses_image", None)
    model = getattr(policy, "model", None)
    if declared is None:
        declared = getattr(model, "uses_image", False)
    if not declared:
        return None
    shape = getattr(getattr(model, "spec", None), "image_shape", None)
    return None if shape is None else tuple(int(s) for s in shape)


def image_options(policy: Any, options: RolloutOptions) -> RolloutOptions:
    """``options`` completed for ``policy``: a policy that reads images gets the wrist camera
    (unless cameras are given) at the size it was trained on; size 0 becomes 84 otherwise.

    Raises:
        ConfigError: an image size other than the policy's (naming both), or a policy trained
            on non-square images (rendered images here are square).
    """
    shape = policy_image_shape(policy)
    if shape is None:
        return options if options.image_size else dataclasses.replace(
            options, image_size=DEFAULT_IMAGE_SIZE)
    height, width = shape[0], shape[1]
    if height != width:
        raise ConfigError("policy image shape", list(shape), "square images (the evaluator "
                          "renders square camera images)")
    if options.image_size and options.image_size != height:
        raise ConfigError("image_size", options.image_size,
                          f"{height} (the size this policy was trained on), or 0 for it")
    return dataclasses.replace(options, image_size=height,
                               cameras=options.cameras or (C.CAMERA_WRIST,))


def task_available(task: str) -> bool:
    """Whether the task's module (and so its env) is installed."""
    from clawgym_ros.tasks.registry import get_task

    try:
        get_task(task)
    except ConfigError:
        return False
    return True


def resolve_world(task: str, world: str) -> str:
    """``task`` or ``scene`` for ``task`` under the ``world`` option.

    Raises:
        ConfigError: ``task`` requested for a task that is not installed.
    """
    if world == WORLD_AUTO:
        return WORLD_TASK if task_available(task) else WORLD_SCENE
    if world == WORLD_TASK and not task_available(task):
        raise ConfigError("world", world, f"'scene' or 'auto' (task {task} is not installed)")
    return world


def scene_of(task: str) -> str:
    """The simulator scene a task runs in (its registration; no task module is imported).

    Raises:
        ConfigError: unknown task.
    """
    from clawgym_ros.tasks.registry import task_scene

    return task_scene(task)


def scene_env_of(task: str) -> str:
    """The Gymnasium id of the bare scene env a task's ``scene`` world runs in."""
    from clawgym_ros.sim.registration import scene_env_id

    return scene_env_id(scene_of(task))


@functools.cache
def joint_limits(scene: str) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) URDF position limits of the scene robot's observed joints (built once
    per scene and shared: read-only arrays)."""
    from clawgym_ros.tasks.base import robot_limits

    limits = robot_limits(scene)
    names = C.ARM_JOINTS if scene == C.SCENE_TABLETOP else C.BASE_WHEEL_JOINTS
    lo = np.array([limits[n].lower if n in limits else -math.inf for n in names])
    hi = np.array([limits[n].upper if n in limits else math.inf for n in names])
    lo.flags.writeable = hi.flags.writeable = False
    return lo, hi


def _state_sum(state: Mapping[str, Any]) -> float:
    """Sum of every value of ``state`` but images (uint8): finite iff every value is (state
    values are far from overflowing float64), much cheaper than isfinite per element. Float
    arrays (the usual state) are summed in one reduction over their concatenation."""
    parts = []
    for value in state.values():
        if type(value) is not np.ndarray or value.dtype.kind != "f":
            break
        parts.append(value.reshape(-1))
    else:
        return float(np.add.reduce(np.concatenate(parts), axis=None)) if parts else 0.0
    total = 0.0
    for value in state.values():
        arr = value if type(value) is np.ndarray else np.asarray(value)
        if arr.dtype != np.uint8:
            total += float(np.add.reduce(arr, axis=None))  # arr.sum() without its wrapper
    return total


def _state_finite(state: Mapping[str, Any]) -> bool:
    """Whether every value of ``state`` is finite: ``isfinite(_state_sum(state))``, faster.

    Called once per control step. A float64 array is summed as Python floats (a state's few
    dozen values: cheaper than a numpy reduction or a concatenation, measured in the
    runner's loop), another float array by a reduction; integer and boolean arrays (images
    included) are finite and skipped, as their share of ``_state_sum`` cannot make it
    non-finite. Anything else takes :func:`_state_sum`.
    """
    total = 0.0
    for value in state.values():
        if type(value) is np.ndarray:
            dtype = value.dtype
            if dtype is _FLOAT64:
                total += sum(value.tolist() if value.ndim == 1 else value.ravel().tolist())
                continue
            if dtype.kind == "f":
                total += float(np.add.reduce(value, axis=None))
                continue
            if dtype.kind in "biu":
                continue
        return math.isfinite(_state_sum(state))
    return math.isfinite(total)


_FLOAT64 = np.dtype(np.float64)
_LE = operator.le
_NO_INFO: dict[str, Any] = {}   # the bare scene env's step info (read only)
# Observation keys the scorer compares each step's keys with (module names: one lookup each)
_TOOL_POSE, _JOINT_POS = C.OBS_TOOL_POSE, C.OBS_JOINT_POS


class EpisodeScorer:
    """Collects one episode's per-step true state into an :class:`EpisodeResult`.

    Args:
        spec: the episode.
        control_dt: seconds per control step.
        limits: (lower, upper) joint position limits for the ``joint_limit`` violation.
        max_contact_force: threshold of the ``contact_force`` violation (N).
        rate_hz: rate of the recorded series.
    """

    def __init__(self, spec: EpisodeSpec, control_dt: float,
                 limits: tuple[np.ndarray, np.ndarray] | None = None,
                 max_contact_force: float = math.inf, rate_hz: float = 20.0) -> None:
        self.spec = spec
        self.control_dt = control_dt
        self.limits = limits
        self.max_contact_force = max_contact_force
        self.rate_hz = rate_hz
        self.times: list[float] = []
        self.positions: list[Any] = []   # tool (x, y, z) per step: list or array
        self.violations: dict[str, int] = {}
        self._active: dict[str, bool] = {}
        if limits is not None:
            self._bounds = (np.asarray(limits[0]) - LIMIT_SLACK,
                            np.asarray(limits[1]) + LIMIT_SLACK)
            # The same float64 bounds as Python floats: a per-step check of a few joints
            # compares them in Python, cheaper than four numpy calls.
            self._lows = self._bounds[0].tolist()
            self._highs = self._bounds[1].tolist()

    def _event(self, kind: str, active: bool) -> None:
        # Count episodes of violation (rising edges), not steps: one long contact is one event.
        if active and not self._active.get(kind, False):
            self.violations[kind] = self.violations.get(kind, 0) + 1
        self._active[kind] = active

    def observe(self, t: float, state: Mapping[str, np.ndarray],
                contact_force: float = 0.0, collision: bool = False) -> bool:
        """Record the true state at time ``t``; returns False when it is not finite (NaN)."""
        # Called every control step. The usual state (1-D float64 arrays, object poses 2-D)
        # is read once as Python floats: their sum for the finite check (as _state_sum), the
        # tool position and the joint positions from the same lists.
        active = self._active
        total = 0.0
        tool = q = None
        for key, value in state.items():
            if type(value) is not np.ndarray or value.dtype is not _FLOAT64:
                tool = q = None
                finite = _state_finite(state)
                break
            if value.ndim == 1:
                floats = value.tolist()
                if key == _TOOL_POSE:
                    tool = floats
                elif key == _JOINT_POS:
                    q = floats
            else:
                floats = value.ravel().tolist()
            total += sum(floats)
        else:
            finite = math.isfinite(total)
        # An inactive event that was not active before changes nothing: ``_event`` runs only
        # when a violation is or was active.
        if not finite:
            self._event("nan", True)
            return False
        if active.get("nan"):
            self._event("nan", False)
        if tool is not None:
            pos: Any = tool[:3]   # series() stacks these floats into the same array
        elif C.OBS_TOOL_POSE in state:
            pos = np.array(state[C.OBS_TOOL_POSE][:3], dtype=float)  # a copy
        elif C.OBS_ODOM in state:
            odom = state[C.OBS_ODOM]
            pos = np.array([odom[0], odom[1], 0.0])
        else:
            pos = np.zeros(3)
        self.times.append(float(t))
        self.positions.append(pos)
        if self.limits is not None and (q is not None or C.OBS_JOINT_POS in state):
            if q is None:
                joints = np.asarray(state[C.OBS_JOINT_POS])
                if joints.shape == self._bounds[0].shape:
                    q = joints.tolist()
            if q is not None and len(q) == len(self._lows):
                # lo <= v <= hi for each joint, else out (q is finite here, the bounds not
                # NaN: the negation of v < lo or v > hi); map and all run in C
                out = not (all(map(_LE, self._lows, q)) and all(map(_LE, q, self._highs)))
            else:
                lo, hi = self._bounds
                joints = np.asarray(state[C.OBS_JOINT_POS])
                out = bool((joints < lo).any() or (joints > hi).any())
            if out or active.get("joint_limit"):
                self._event("joint_limit", out)
        if contact_force > self.max_contact_force or active.get("contact_force"):
            self._event("contact_force", contact_force > self.max_contact_force)
        if collision or active.get("collision"):
            self._event("collision", bool(collision))
        return True

    def series(self) -> EpisodeSeries:
        """Tool speed and position resampled to ``rate_hz`` (finite differences of position)."""
        if len(self.times) < 2:
            return EpisodeSeries(rate_hz=self.rate_hz)
        t = np.asarray(self.times)
        p = np.asarray(self.positions)
        grid = np.arange(t[0], t[-1] + 1e-9, 1.0 / self.rate_hz)
        pos = np.stack([np.interp(grid, t, p[:, k]) for k in range(3)], axis=1)
        step_speed = np.linalg.norm(np.diff(p, axis=0), axis=1) / np.diff(t)
        speed = np.interp(grid, t[1:], step_speed)
        # Rounded so that series (and the report) do not depend on the last bits of physics.
        return EpisodeSeries(rate_hz=self.rate_hz,
                             tool_speed=tuple(np.round(speed, 9).tolist()),
                             tool_position=tuple(map(tuple, np.round(pos, 9).tolist())))

    def result(self, stages: Sequence[str], reached: Sequence[str], success: bool,
               perturbation: Mapping[str, float] | None = None,
               skill_calls: Sequence[SkillCall] = (),
               goal_consistent: bool | None = None) -> EpisodeResult:
        """The episode's record."""
        s = self.spec
        duration = (self.times[-1] - self.times[0]) if self.times else 0.0
        return EpisodeResult(
            index=s.index, seed=s.seed, perturbation_seed=s.perturbation_seed, task=s.task,
            template=s.template, split=s.split, family=s.family, families=s.families,
            intensity=s.intensity, perturbation=dict(perturbation or {}),
            stages=tuple(stages), stages_reached=tuple(reached), success=bool(success),
            skill_calls=tuple(skill_calls), violations=dict(self.violations),
            goal_consistent=goal_consistent, duration_s=round(float(duration), 9),
            series=self.series())


def perturbations_of(spec: EpisodeSpec) -> list[Any]:
    """The perturbation objects of the spec's cell (configured with its perturbation seed)."""
    from clawgym_ros.perturbations import make
    from clawgym_ros.perturbations.base import SEED_MAX

    event = getattr(spec, "event", "")
    return [make(f, {"intensity": float(spec.intensity), "schedule": spec.schedule,
                     "seed": int(spec.perturbation_seed) % SEED_MAX,
                     **({"event": event} if event and f == C.FAMILY_DISTURBANCE else {})})
            for f in spec.families]


def perturbation_values(perturbations: Sequence[Any]) -> dict[str, float]:
    """``{"family.parameter": value}`` of the perturbations' current episodes."""
    out: dict[str, float] = {}
    for p in perturbations:
        for key, value in p.state().items():
            out[f"{p.config.family}.{key}"] = float(value)
    return out


def skill_calls_of(policy: Any, task: str) -> tuple[SkillCall, ...]:
    """Skill calls a policy reports (``policy.skill_calls``: names or (name, outcome) pairs),
    with legality from the task's skill grammar (a prefix check per call)."""
    calls = list(getattr(policy, "skill_calls", ()) or ())
    if not calls:
        return ()
    from clawgym_ros.synthesis.grammar import SkillGrammar
    from clawgym_ros.tasks.registry import get_task

    grammar = SkillGrammar(get_task(task).grammar)
    names = [c if isinstance(c, str) else c[0] for c in calls]
    bad = grammar.first_illegal(names, complete=False)
    out = []
    for i, call in enumerate(calls):
        name, outcome = (call, C.SKILL_OK) if isinstance(call, str) else (call[0], call[1])
        out.append(SkillCall(name, outcome, bad is None or i < bad))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The in-process runner
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class EpisodeTiming:
    """Wall time of one episode split into policy and everything else (for the benchmark),
    and the process CPU time of the same span (reset to last step)."""

    steps: int = 0
    wall_s: float = 0.0
    policy_s: float = 0.0
    cpu_s: float = 0.0


class Runner:
    """Runs episodes of one policy in this process, caching one env per (env id, world).

    Args:
        policy: the policy (told each episode's task when it takes one, and reset, before
            every episode: :func:`~clawgym_ros.evaluation.protocol.start_episode`).
        options: rollout options.
        record_actions: keep the last episode's actions in :attr:`actions` (benchmark replay).
    """

    def __init__(self, policy: Policy, options: RolloutOptions | None = None,
                 record_actions: bool = False) -> None:
        import clawgym_ros.sim  # noqa: F401  (registers the envs)

        self.policy = policy
        self.options = image_options(policy, options or RolloutOptions())
        self.record_actions = record_actions
        self.actions: list[dict[str, np.ndarray]] = []
        self.timing = EpisodeTiming()
        self._envs: dict[tuple[str, str], Any] = {}

    def _env(self, spec: EpisodeSpec, world: str) -> tuple[Any, int]:
        import gymnasium as gym

        from clawgym_ros.sim.registration import ENVS

        if world == WORLD_TASK:
            from clawgym_ros.tasks.registry import get_task

            env_id = get_task(spec.task).env_id
            key = (env_id, spec.template)
            kwargs: dict[str, Any] = {"template": spec.template}
        else:
            env_id = scene_env_of(spec.task)
            key = (env_id, "")
            kwargs = {}
        env = self._envs.get(key)
        if env is None:
            o = self.options
            env = gym.make(env_id, cameras=o.cameras, image_width=o.image_size,
                           image_height=o.image_size, control_mode=C.CONTROL_DICT,
                           **kwargs).unwrapped
            self._envs[key] = env
        limit = self.options.max_steps or int(ENVS[env_id][1] or 500)
        return env, limit

    def run(self, spec: EpisodeSpec) -> EpisodeResult:
        """Run one episode.

        Raises:
            ConfigError: the spec's task cannot run in the chosen world.
        """
        from clawgym_ros.evaluation.scripted import LiftTracker
        from clawgym_ros.perturbations.wrappers import wrap

        world = resolve_world(spec.task, self.options.world)
        base, limit = self._env(spec, world)
        perturbations = perturbations_of(spec)
        env = wrap(base, perturbations) if perturbations else base
        t_start, cpu_start = time.perf_counter(), time.process_time()
        obs, info = env.reset(seed=spec.seed)
        start_episode(self.policy, spec.task)
        tracker = None
        if world == WORLD_SCENE:
            if scene_of(spec.task) != C.SCENE_TABLETOP:
                raise ConfigError("world", world, f"'task' for {spec.task} (the scene world "
                                  "scores arm tasks only)")
            tracker = LiftTracker()
            stages: Sequence[str] = tracker.stages
            max_force = math.inf
        else:
            stages = info["stages"]
            max_force = base.task.max_contact_force
        backend = base.backend
        scorer = EpisodeScorer(spec, backend.control_dt, joint_limits(scene_of(spec.task)),
                               max_force, self.options.rate_hz)
        # The scene world scores the backend's state. It is what the ROS evaluator rebuilds
        # from ground-truth topics (tool pose by forward kinematics of the reported joints) bit
        # for bit: the backend refreshes its kinematics after every step and no perturbation
        # or calibration changes the arm's kinematic tree (test_eval_rollout checks it).
        true_state = None if tracker is not None else getattr(base, "true_state", None)
        # Unperturbed and without cameras, the scene env's observation *is* the backend's
        # state (``backend.observation()``, assembled once per step): the scorer and the
        # tracker read it before the policy gets it, and keep no reference to its arrays.
        obs_is_state = tracker is not None and env is base and not self.options.cameras
        # The bare scene env's step is the backend's step and observation, reward 0, never
        # terminated, no info (ClawEnv.step; test_eval_scorer holds it to that): when the
        # runner scores that observation itself it calls the two directly.
        backend_step = backend_observation = None
        if obs_is_state:
            from clawgym_ros.sim.envs import ClawEnv

            if type(base).step is ClawEnv.step and \
                    type(base).task_reward is ClawEnv.task_reward:
                backend_step, backend_observation = backend.step, backend.observation
        state = obs if obs_is_state else \
            true_state() if true_state else backend.observation(cameras=())
        scorer.observe(backend.time, state)
        if tracker is not None:
            tracker.update(backend.time, state)
        reached = list(info.get("stages_reached", ())) if tracker is None \
            else tracker.reached_names
        watch = None
        if tracker is None and self.options.failure_states:
            from clawgym_ros.evaluation.failure_states import FailureWatch

            watch = FailureWatch(spec, backend, stages)
            watch.observe(state, reached)
        success = False
        recovery = info.get(C.INFO_DISTURBANCE)   # disturbance cells only
        policy_s = 0.0
        self.actions = []
        image_key = f"{self.options.cameras[0]}_rgb" if self.options.cameras else ""
        steps = 0
        # Per control step: bound methods and the clock looked up once (the loop's own cost
        # counts against the runner in ``clawgym bench eval``).
        act, env_step, observe, clock = self.policy.act, env.step, scorer.observe, \
            time.perf_counter
        record = self.actions.append if self.record_actions else None
        for _ in range(limit):
            if image_key:
                obs = {**obs, C.OBS_IMAGE: obs[image_key]}
            t0 = clock()
            action = act(obs)
            policy_s += clock() - t0
            if record is not None:
                record({k: np.array(v, copy=True) for k, v in action.items()})
            if backend_step is not None:
                backend_step(action)
                obs, terminated, info = backend_observation(), False, _NO_INFO
            else:
                obs, _, terminated, _, info = env_step(action)
            steps += 1
            state = obs if obs_is_state else \
                true_state() if true_state else backend.observation(cameras=())
            now = backend.time
            if info:
                ok = observe(now, state, float(info.get("contact_force", 0.0)),
                             bool(info.get("collision", False)))
            else:   # the bare scene env's info: no contact force, no collision
                ok = observe(now, state)
            if not ok:
                break
            if tracker is not None:
                tracker.update(now, state)
                success = tracker.succeeded(state)
            else:
                reached = list(info.get("stages_reached", reached))
                success = bool(info.get("success", terminated))
            if watch is not None:
                watch.observe(state, reached)
            if info:
                recovery = info.get(C.INFO_DISTURBANCE, recovery)
            if success:
                break
        if tracker is not None:
            reached = tracker.reached_names
        self.timing = EpisodeTiming(steps, time.perf_counter() - t_start, policy_s,
                                    time.process_time() - cpu_start)
        result = scorer.result(stages, reached, success, perturbation_values(perturbations),
                               skill_calls_of(self.policy, spec.task))
        if watch is not None:
            result = dataclasses.replace(result, failure_states=watch.finish(success))
        if recovery is not None:
            result = dataclasses.replace(result, recovery=recovery)
        return result

    def close(self) -> None:
        """Close the cached envs."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()
