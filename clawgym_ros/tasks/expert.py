"""Planner-driven scripted experts for the arm tasks: :class:`ArmExpert` runs one episode.

The expert acts only through the (perturbation-wrapped) task env, so its recorded action stream
replays to the same physics. Planning uses a per-process :class:`OmplPlanner` per template (its
collision checker and mink IK on a copy of the template's model):

* tool poses -> joints by IK seeded with the current configuration (then home), restarts from
  a generator seeded by the episode seed (so results do not depend on earlier episodes);
* free-space moves are joint-space lines checked for collision; only when a line collides is
  OMPL asked (``planning="auto"``; ``"ompl"`` always plans with OMPL). The planner is
  re-seeded with the episode seed (:meth:`OmplPlanner.reseed`: every OMPL solve re-seeds
  OMPL's process-wide seed sequence from it, counts iterations instead of time and simplifies
  to convergence), so OMPL paths do not depend on earlier episodes of the worker either;
* Cartesian moves (approach, lift, place, insertion) solve IK at waypoints along the straight
  tool line, each seeded with the previous solution, and reject joint jumps;
* timing: a quintic (minimum-jerk) time scaling along the joint polyline, within the URDF
  velocity limits (``velocity_scale``), acceleration limits and an optional tool speed (slow
  final segments); OMPL paths are timed by the planner's toppra. Option ``timing="optimal"``
  (off by default: it changes the demonstrations): the time-optimal profile along the
  polyline instead (trapezoidal path speed at the full URDF velocity limits and the declared
  accelerations times ``acceleration_scale``; no jerk limit: what toppra gives along a
  straight line, without its solver), the gripper at its finger speed limit and the settling
  dwells shortened to :data:`OPTIMAL_SETTLE`.

Every control step sends ``joint_target`` (the path at the end of the step), ``joint_velocity``
(its derivative, feed-forward) and ``gripper`` (width, ramped within the finger speed limit)
and records the policy observation, the true joint state, contact force, unintended contacts
and energy into an :class:`~clawgym_ros.synthesis.episode.EpisodeRecorder`. Stages come from
the env's stage tracker, never from the expert's belief.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.planning import types as PT
from clawgym_ros.planning.ompl_planner import OmplPlanner, OmplPlannerConfig
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeRecorder, EpisodeSpec
from clawgym_ros.tasks.base import Task
from clawgym_ros.tasks.world import TaskEnv

#: Obs keys recorded for arm tasks (state only; images on request).
ARM_OBS_KEYS = (C.OBS_JOINT_POS, C.OBS_JOINT_VEL, C.OBS_GRIPPER, C.OBS_TOOL_POSE,
                C.OBS_OBJECT_POSES)
#: Task goal observations recorded as well when the task env provides them.
GOAL_OBS_KEYS = (C.OBS_PLACE_GOAL,)
#: Gripper width command slew rate (m/s of total width): each finger moves at half of it,
#: well inside the URDF finger velocity limit (0.2 m/s).
GRIPPER_RATE = 0.2
#: Gripper width slew rate of ``timing="optimal"``: each finger at its URDF limit (0.2 m/s).
OPTIMAL_GRIPPER_RATE = 0.4
#: Longest settling dwell after a gripper motion with ``timing="optimal"`` (s).
OPTIMAL_SETTLE = 0.04
#: Expert timings (``spec.options["timing"]``).
TIMINGS = ("quintic", "optimal")
#: Quintic time scaling: peak velocity / (distance / T) and peak acceleration / (distance / T^2).
_QV, _QA = 1.875, 5.7735

_WORLDS: dict[tuple[str, str], tuple[TaskEnv, OmplPlanner]] = {}
#: Worlds of procedural templates (``proc:...``) kept per process (the oldest are closed).
_MAX_PROC_WORLDS = 4


class ExpertError(Exception):
    """A skill of the expert could not be carried out (IK, planning, grasp)."""


def world(env_cls: type[TaskEnv], template: str) -> tuple[TaskEnv, OmplPlanner]:
    """The cached (env, planner) of a task env class and template in this process."""
    key = (f"{env_cls.__module__}.{env_cls.__qualname__}", template)
    if key not in _WORLDS:
        procs = [k for k in _WORLDS if k[1].startswith("proc:")]
        for old in procs[:max(0, len(procs) - _MAX_PROC_WORLDS + 1)]:
            _WORLDS.pop(old)[0].close()     # procedural templates rarely repeat: bound them
        env = env_cls(template=template)
        # toppra is imported by the first OMPL path only (rare: most moves are checked joint
        # lines): a synthesis worker that never needs it saves its ~2.3 s import
        planner = OmplPlanner(env.backend.model, OmplPlannerConfig(simplify_time=0.02,
                                                                   default_time_limit=2.0),
                              preload_timing=False)
        _WORLDS[key] = (env, planner)
    return _WORLDS[key]


def make_perturbations(spec: EpisodeSpec) -> dict[str, Any]:
    """The perturbation cores of ``spec`` by family (none, or each of its families (``a+b``:
    a combined cell) at its intensity, with the family's fields from
    ``spec.options["perturbation"]``, e.g. a mixture cell's disturbance ``event``). Their
    seed is 0: the wrappers reseed them with the episode at every reset."""
    from clawgym_ros.tasks.episode_tools import perturbations_for

    overrides = {k: dict(v) for k, v in dict(spec.options.get("perturbation", {})).items()}
    return {p.config.family: p
            for p in perturbations_for(spec.family, spec.intensity, 0, overrides)}


def wrap_env(env: TaskEnv, perturbations: Mapping[str, Any]) -> Any:
    """``env`` with the perturbation wrappers (the env itself when there are none)."""
    if not perturbations:
        return env
    from clawgym_ros.perturbations.wrappers import wrap

    return wrap(env, perturbations)


def _polyline(waypoints: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """A joint polyline without its zero-length segments: (waypoints, segments, lengths,
    total length); None for a path with no length."""
    wp = np.asarray(waypoints, dtype=float)
    seg = np.diff(wp, axis=0)
    lengths = np.linalg.norm(seg, axis=1)
    keep = lengths > 1e-9
    if not keep.any():
        return None
    wp = np.vstack([wp[:1], wp[1:][keep]])
    return wp, seg[keep], lengths[keep], float(lengths[keep].sum())


def _at_rest(waypoints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The path of a polyline with no length: its last waypoint, zero velocity."""
    wp = np.asarray(waypoints, dtype=float)
    return wp[-1:].copy(), np.zeros((1, wp.shape[1]))


def quintic_path(waypoints: np.ndarray, vmax: np.ndarray, amax: np.ndarray, dt: float,
                 min_duration: float = 0.1, tool_length: float = 0.0,
                 tool_speed: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Sample a joint polyline with one quintic time scaling at the control period.

    Args:
        waypoints: (N, J) joint polyline (N >= 1).
        vmax, amax: (J,) joint velocity and acceleration limits.
        dt: control period; samples are taken at dt, 2 dt, ... (the end of each step).
        min_duration: shortest motion (s).
        tool_length, tool_speed: the tool's path length (m) and its speed limit (m/s; 0 = none).

    Returns:
        (positions (K, J), velocities (K, J)) for K control steps, ending at rest on the last
        waypoint.
    """
    line = _polyline(waypoints)
    if line is None:
        return _at_rest(waypoints)
    wp, seg, lengths, total = line
    dirs = np.abs(seg / lengths[:, None]).max(axis=0)   # |dq/ds| per joint (worst segment)
    duration = max(min_duration,
                   float(np.max(_QV * total * dirs / vmax)),
                   float(np.sqrt(np.max(_QA * total * dirs / amax))))
    if tool_speed > 0.0:
        duration = max(duration, _QV * tool_length / tool_speed)
    n = int(np.ceil(duration / dt))
    tau = np.arange(1, n + 1) * dt / (n * dt)
    s = total * (10 * tau**3 - 15 * tau**4 + 6 * tau**5)
    sd = total * (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / (n * dt)
    cum = np.concatenate([[0.0], np.cumsum(lengths)])
    k = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(lengths) - 1)
    frac = (s - cum[k]) / lengths[k]
    pos = wp[k] + seg[k] * frac[:, None]
    vel = seg[k] / lengths[k][:, None] * sd[:, None]
    pos[-1], vel[-1] = wp[-1], 0.0
    return pos, vel


def optimal_path(waypoints: np.ndarray, vmax: np.ndarray, amax: np.ndarray, dt: float,
                 min_duration: float = 0.1, tool_length: float = 0.0,
                 tool_speed: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Sample a joint polyline with the time-optimal (trapezoidal) path speed: accelerate at
    the limit, cruise at the limit, brake at the limit, stretched to whole control steps.

    Same arguments and result as :func:`quintic_path`; the path-speed limits are the tightest
    joint's (``limit / |dq/ds|`` over the worst segment) and the tool speed's.
    """
    line = _polyline(waypoints)
    if line is None:
        return _at_rest(waypoints)
    wp, seg, lengths, total = line
    dirs = np.maximum(np.abs(seg / lengths[:, None]).max(axis=0), 1e-12)
    v = float(np.min(vmax / dirs))
    a = float(np.min(amax / dirs))
    if tool_speed > 0.0 and tool_length > 0.0:
        v = min(v, tool_speed * total / tool_length)
    if total >= v * v / a:
        ta, duration = v / a, total / v + v / a
    else:
        ta = duration = np.sqrt(total / a)
        duration, v = 2.0 * ta, a * ta
    n = int(np.ceil(max(duration, min_duration) / dt))
    k = duration / (n * dt)                 # time stretch onto whole steps (k <= 1)
    t = np.arange(1, n + 1) * dt * k        # profile time of each sample
    tc = duration - ta
    s = np.where(t < ta, 0.5 * a * t**2,
                 np.where(t <= tc, 0.5 * a * ta**2 + v * (t - ta),
                          total - 0.5 * a * np.maximum(duration - t, 0.0) ** 2))
    sd = np.where(t < ta, a * t, np.where(t <= tc, v, a * np.maximum(duration - t, 0.0))) * k
    s = np.clip(s, 0.0, total)
    cum = np.concatenate([[0.0], np.cumsum(lengths)])
    i = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(lengths) - 1)
    frac = (s - cum[i]) / lengths[i]
    pos = wp[i] + seg[i] * frac[:, None]
    vel = seg[i] / lengths[i][:, None] * sd[:, None]
    pos[-1], vel[-1] = wp[-1], 0.0
    return pos, vel


@dataclasses.dataclass
class ExpertOptions:
    """Options of an arm expert (from ``spec.options``).

    Attributes:
        images: record ``wrist_camera`` frames.
        planning: ``auto`` (joint lines, OMPL when they collide) or ``ompl`` (always OMPL).
        velocity_scale: fraction of the URDF joint velocity limits used by the expert
            (``quintic`` timing; ``optimal`` uses the whole limits).
        timing: ``quintic`` (default) or ``optimal`` (see the module docstring).
        acceleration_scale: factor on the declared joint accelerations (``optimal`` timing).
        fault: injected fault (tests of the sign-off): ``gripper_open_mid_transport`` or
            ``joint_limit``.
    """

    images: bool = False
    planning: str = "auto"
    velocity_scale: float = 0.8
    timing: str = "quintic"
    acceleration_scale: float = 1.0
    fault: str = ""

    def __post_init__(self) -> None:
        from clawgym_ros.config import check_choice, check_range

        check_choice("options.timing", self.timing, TIMINGS)
        check_range("options.velocity_scale", self.velocity_scale, 0.0, 2.0, low_open=True)
        check_range("options.acceleration_scale", self.acceleration_scale, 0.1, 4.0)

    @classmethod
    def from_spec(cls, spec: EpisodeSpec) -> ExpertOptions:
        o = spec.options
        return cls(images=bool(o.get("images", False)), planning=str(o.get("planning", "auto")),
                   velocity_scale=float(o.get("velocity_scale", 0.8)),
                   timing=str(o.get("timing", "quintic")),
                   acceleration_scale=float(o.get("acceleration_scale", 1.0)),
                   fault=str(o.get("fault", "") or ""))


#: Expert options a synthesis run may set for every episode (``clawgym synth --option``, a
#: loop config's ``synthesis_options``, a Synthesize goal's ``options_json``).
OPTION_NAMES = ("timing", "acceleration_scale", "velocity_scale", "planning")


def check_expert_options(options: Any, field: str = "--option ") -> dict[str, Any]:
    """Expert options checked by name and value (``*_scale`` as numbers).

    Args:
        field: prefix of the field names in errors (``--option ``, ``synthesis_options.``).

    Raises:
        ConfigError: not a mapping, an unknown name, or a value out of range.
    """
    from clawgym_ros.config import check_choice, check_option_names
    from clawgym_ros.errors import ConfigError

    if not isinstance(options, Mapping):
        raise ConfigError(field.rstrip(" ."), options, "a mapping of expert options")
    check_option_names(options, OPTION_NAMES, field)
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key.endswith("_scale"):
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{field}{key}", value, "a number") from None
        else:
            out[key] = str(value)
    if "timing" in out:
        check_choice(f"{field}timing", out["timing"], TIMINGS)
    if "planning" in out:
        check_choice(f"{field}planning", out["planning"], ("auto", "ompl"))
    try:
        ExpertOptions(**{k: v for k, v in out.items() if k != "planning"})
    except ConfigError as err:
        raise ConfigError(f"{field}{err.field.removeprefix('options.')}", err.value,
                          err.allowed) from None
    return out


class ArmExpert:
    """One episode of an arm task: env, planner, recorder and the motion primitives.

    Args:
        spec: the episode spec (seed, template, perturbation, options).
        task: the task.
        env_cls: the task env class.
    """

    def __init__(self, spec: EpisodeSpec, task: Task, env_cls: type[TaskEnv]) -> None:
        self.spec = spec
        self.task = task
        self.options = ExpertOptions.from_spec(spec)
        rng = np.random.default_rng(spec.seed)
        template = task.resolve_template(spec.template, rng)
        self.base, self.planner = world(env_cls, template.name)
        self.perturbations = make_perturbations(spec)
        self.env = wrap_env(self.base, self.perturbations)
        self.planner.ik.rng = np.random.default_rng(spec.seed)
        self.planner.reseed(spec.seed)
        self.planner.detach_object()          # a failed earlier episode may have left one
        self.obs, info = self.env.reset(seed=spec.seed,
                                        options={"episode_index": int(spec.index)})
        # A recovery episode starts from an evaluated policy's failure state instead; the
        # stages it had reached are recorded at the segment's first step.
        from clawgym_ros.tasks.recovery import origin_info, snapshot_of

        self.snapshot = snapshot_of(spec)
        self._prior_stages: list[str] = []
        if self.snapshot is not None:
            from clawgym_ros.evaluation.failure_states import restore

            self.obs = restore(self.env, self.snapshot)
            self._prior_stages = [name for name, _ in self.snapshot.reached]
            info = {}
        self.template = self.base.template
        self.backend = self.base.backend
        self.dt = self.backend.control_dt
        params: dict[str, float] = {}
        for family, p in self.perturbations.items():
            params.update({f"{family}.{k}": v for k, v in p.state().items()})
        params.update(self.extra_params())
        self.rec = EpisodeRecorder(spec, C.ARM_JOINTS + C.GRIPPER_JOINTS,
                                   template=self.template.name, perturbation_params=params)
        self.rec.origin = origin_info(spec, self.snapshot)
        limits = task.joint_limits()
        self.optimal = self.options.timing == "optimal"
        self.vmax = np.array([limits[j].velocity for j in C.ARM_JOINTS]) * \
            (1.0 if self.optimal else self.options.velocity_scale)
        self.amax = self.planner.max_acceleration * \
            (self.options.acceleration_scale if self.optimal else 1.0)
        self.gripper_rate = OPTIMAL_GRIPPER_RATE if self.optimal else GRIPPER_RATE
        self.home = np.array(self.backend.scene.robot.home)
        self.gripper_cmd = float(self.obs[C.OBS_GRIPPER][0])
        self.q_cmd = self.obs[C.OBS_JOINT_POS].copy()
        self.phase = ""
        self._recorded: tuple[str, ...] | None = None       # observation keys recorded
        self.physics_time = 0.0
        self.planning_time = 0.0
        for name in info.get("stages_reached", []):
            self.rec.stage(name, self.backend.time)

    def extra_params(self) -> dict[str, float]:
        """Task parameters recorded with the perturbation state (e.g. tool wear)."""
        return {}

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, np.ndarray]:
        """True (unperturbed) state of the scene."""
        return self.base.true_state()

    def q(self) -> np.ndarray:
        """Current true arm configuration."""
        return self.backend.data.qpos[self.backend.index.arm_qpos].copy()

    @property
    def time(self) -> float:
        return self.backend.time

    # ------------------------------------------------------------------ stepping
    def step(self, q_target: np.ndarray, dq: np.ndarray, width: float | None = None,
             action_override: Mapping[str, np.ndarray] | None = None) -> None:
        """Send one control step and record it."""
        if width is not None:
            self.gripper_cmd = float(width)
        action = {C.ACT_JOINT_TARGET: np.asarray(q_target, dtype=float),
                  C.ACT_JOINT_VEL: np.asarray(dq, dtype=float),
                  C.ACT_GRIPPER: np.array([self.gripper_cmd])}
        if action_override:
            action.update({k: np.asarray(v, dtype=float) for k, v in action_override.items()})
        self.q_cmd = action[C.ACT_JOINT_TARGET]
        obs, _, _, _, info = self.env.step(action)
        self.obs = obs
        b = self.backend
        _, pos, vel, eff = b.joint_state()
        t = b.time
        images = None
        if self.options.images:
            images = {C.CAMERA_WRIST: b.render(C.CAMERA_WRIST)}
        recorded = self._recorded
        if recorded is None:            # the same keys every step
            recorded = self._recorded = ARM_OBS_KEYS + tuple(k for k in GOAL_OBS_KEYS
                                                             if k in obs)
        energy = b.data.energy
        self.rec.step(t, obs={k: obs[k] for k in recorded}, action=action,
                      joint_position=pos, joint_velocity=vel, joint_effort=eff,
                      contact_force=info["contact_force"], collision=info["collision"],
                      energy=float(energy[0] + energy[1]), images=images)
        new = info.get("new_stages")
        if new or self._prior_stages:
            for name in [*self._prior_stages, *(new or [])]:
                self.rec.stage(name, t)
            self._prior_stages = []

    def run_path(self, positions: np.ndarray, velocities: np.ndarray,
                 gripper: np.ndarray | None = None, on_step: Any = None) -> None:
        """Execute sampled joint targets (one row per control step)."""
        for k in range(len(positions)):
            override = on_step(k, len(positions)) if on_step is not None else None
            self.step(positions[k], velocities[k],
                      None if gripper is None else float(gripper[k]), override)

    def hold(self, seconds: float) -> None:
        """Keep the current commands for ``seconds``."""
        for _ in range(max(1, int(round(seconds / self.dt)))):
            self.step(self.q_cmd, np.zeros(7))

    def gripper(self, width: float, settle: float = 0.1) -> float:
        """Ramp the gripper command to ``width`` within :data:`GRIPPER_RATE`, then settle.

        Returns:
            The measured gripper width afterwards.
        """
        start = self.gripper_cmd
        n = max(1, int(np.ceil(abs(width - start) / (self.gripper_rate * self.dt))))
        for k in range(1, n + 1):
            self.step(self.q_cmd, np.zeros(7), start + (width - start) * k / n)
        self.hold(min(settle, OPTIMAL_SETTLE) if self.optimal else settle)
        return float(self.backend.observation(cameras=())[C.OBS_GRIPPER][0])

    def time_path(self, waypoints: np.ndarray, tool_length: float = 0.0,
                  tool_speed: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Joint targets and velocities per control step along ``waypoints`` (the expert's
        timing: :func:`quintic_path` or :func:`optimal_path`)."""
        timed = optimal_path if self.optimal else quintic_path
        with self.planning_clock():
            return timed(waypoints, self.vmax, self.amax, self.dt, tool_length=tool_length,
                         tool_speed=tool_speed)

    @contextlib.contextmanager
    def planning_clock(self) -> Iterator[None]:
        """Count the block's wall time as planning (IK, collision checks, OMPL, path timing;
        the synthesis benchmark's breakdown)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.planning_time += time.perf_counter() - start

    # ------------------------------------------------------------------ planning
    def sync_planner(self) -> None:
        """Give the planner the true scene (objects, gripper) and arm configuration."""
        with self.planning_clock():
            self.planner.set_scene_qpos(self.backend.data.qpos.copy())

    def ik(self, pose: PT.Pose, seed: np.ndarray | None = None, check: bool = True
           ) -> np.ndarray:
        """Joint values for a tool pose (collision-free when ``check``).

        Raises:
            ExpertError: no solution.
        """
        seed = self.q() if seed is None else seed
        with self.planning_clock():
            res = self.planner.ik.solve(pose, seed=seed, extra_seeds=[self.home], attempts=6,
                                        accept=self.planner.checker.is_valid if check else None)
        if not res.success:
            raise ExpertError(f"IK failed for {np.round(pose.position, 3).tolist()} "
                                f"(error {res.position_error:.4f} m)")
        return res.q

    def move_joints(self, goal: np.ndarray, gripper: float | None = None) -> str:
        """Move to ``goal``: a checked joint line, else an OMPL path. Returns the planner used.

        Raises:
            ExpertError: OMPL found no path.
        """
        start = self.q_cmd.copy()
        chk = self.planner.checker
        chk.set_padding(0.0)
        with self.planning_clock():
            line_ok = (self.options.planning != "ompl"
                       and chk.motion_valid(start, goal, 0.03))
        if line_ok:
            pos, vel = self.time_path(np.vstack([start, goal]))
            used = "line"
        else:
            pos, vel = self._ompl_path(start, goal)
            used = "ompl"
        widths = None
        if gripper is not None:
            k = np.arange(1, len(pos) + 1)
            step = self.gripper_rate * self.dt
            widths = self.gripper_cmd + np.clip(gripper - self.gripper_cmd, -step * k, step * k)
        self.run_path(pos, vel, widths)
        return used

    def _ompl_path(self, start: np.ndarray, goal: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """An OMPL path from ``start`` to ``goal``, timed by the planner and sampled per step.

        Raises:
            ExpertError: OMPL found no path.
        """
        with self.planning_clock():
            res = self.planner.plan(PT.PlanRequest(
                goal_type=PT.GOAL_JOINTS, joint_goal=tuple(goal), start=tuple(start),
                velocity_scaling=1.0 if self.optimal else min(1.0, self.options.velocity_scale),
                acceleration_scaling=min(1.0, self.options.acceleration_scale)
                if self.optimal else 1.0))
            if not res.success or res.trajectory is None:
                raise ExpertError(f"OMPL: {res.reason} {res.message}")
            traj = res.trajectory
            ts = np.arange(1, int(np.ceil(traj.duration / self.dt)) + 1) * self.dt
            sim = traj.to_sim()
            samples = [sim.sample(min(t, traj.duration)) for t in ts]
            pos = np.array([s[0] for s in samples])
            vel = np.array([s[1] for s in samples])
            pos[-1], vel[-1] = goal, 0.0
        return pos, vel

    def cartesian_waypoints(self, start: np.ndarray, target: PT.Pose, step: float = 0.02,
                            check: bool = True) -> tuple[np.ndarray, float]:
        """Joint waypoints of a straight tool line from ``start``'s tool pose to ``target``.

        Returns:
            (waypoints (N, 7), tool path length in m).

        Raises:
            ExpertError: IK failure, a joint jump, or a collision along the line.
        """
        with self.planning_clock():
            return self._cartesian_waypoints(start, target, step, check)

    def _cartesian_waypoints(self, start: np.ndarray, target: PT.Pose, step: float,
                             check: bool) -> tuple[np.ndarray, float]:
        from clawgym_ros.planning.cartesian import slerp
        from clawgym_ros.sim.world import mat_to_quat

        chk = self.planner.checker
        p0, r0 = chk.tool_pose(start)
        q0 = mat_to_quat(r0)
        p1, q1 = np.asarray(target.position), np.asarray(target.orientation)
        length = float(np.linalg.norm(p1 - p0))
        n = max(1, int(np.ceil(length / step)))
        path = [np.asarray(start, dtype=float)]
        for i in range(1, n + 1):
            t = i / n
            pose = PT.Pose(tuple(p0 + t * (p1 - p0)), tuple(slerp(q0, q1, t)))
            res = self.planner.ik.solve(pose, seed=path[-1], attempts=1, iterations=80)
            if not res.success:
                raise ExpertError(f"Cartesian IK failed at {np.round(pose.position, 3)}")
            if np.max(np.abs(res.q - path[-1])) > 0.3:
                raise ExpertError("Cartesian path jumps in joint space")
            if check and not chk.motion_valid(path[-1], res.q, 0.03):
                raise ExpertError("Cartesian path collides: " + ", ".join(
                    c.describe() for c in chk.contacts(res.q)))
            path.append(res.q)
        return np.array(path), length

    def move_cartesian(self, target: PT.Pose, tool_speed: float = 0.0, check: bool = True,
                       on_step: Any = None) -> None:
        """Straight tool motion to ``target`` (optionally at most ``tool_speed`` m/s)."""
        wps, length = self.cartesian_waypoints(self.q_cmd, target, check=check)
        pos, vel = self.time_path(wps, tool_length=length, tool_speed=tool_speed)
        self.run_path(pos, vel, on_step=on_step)

    # ------------------------------------------------------------------ skills
    @contextlib.contextmanager
    def skill(self, name: str, args: Mapping[str, Any] | None = None) -> Iterator[dict]:
        """Record a skill call around a block; an exception marks it failed and propagates.

        The yielded dict may be updated with extra JSON-able args or a ``detail``.
        """
        start = self.time
        extra: dict[str, Any] = {}
        try:
            yield extra
        except ExpertError as err:
            self.rec.skill(name, {**dict(args or {}), **extra}, start=start, end=self.time,
                           outcome=C.SKILL_FAILED, detail=str(err))
            raise
        detail = str(extra.pop("detail", ""))
        self.rec.skill(name, {**dict(args or {}), **extra}, start=start, end=self.time,
                       outcome=C.SKILL_OK, detail=detail)

    def finish(self, failure: str = "") -> EpisodeRecord:
        """Settle, evaluate the tracker on the true state and build the record."""
        if self.rec._time:
            self.hold(0.1)
        else:
            self.hold(self.dt)
        state = self.state()
        tracker = self.base.tracker
        assert tracker is not None
        ok, why = tracker.success(state)
        reason = "" if ok else (failure or why)
        self.physics_time = self.base.physics_time
        return self.rec.finish(success=ok, reason=reason, goal=self.base.goal_dict(),
                               achieved=tracker.achieved(state))


def run_expert(expert: ArmExpert, script: Any) -> EpisodeRecord:
    """Run ``script(expert)`` and finish the record (an ExpertError ends the episode)."""
    failure = ""
    start, cpu = time.perf_counter(), time.process_time()
    try:
        script(expert)
    except ExpertError as err:
        failure = str(err)
    record = expert.finish(failure)
    record_timing(expert.base.physics_time, time.perf_counter() - start,
                  expert.planning_time, record.num_steps, time.process_time() - cpu)
    return record


#: Per-process timing of the last episodes (physics wall time, planning wall time, whole-
#: episode wall and CPU time, control steps), read by the synthesis benchmark.
TIMING: dict[str, float] = {"physics_s": 0.0, "planning_s": 0.0, "episode_s": 0.0,
                            "episode_cpu_s": 0.0, "episodes": 0.0, "steps": 0.0}


def record_timing(physics_s: float, episode_s: float, planning_s: float = 0.0,
                  steps: int = 0, episode_cpu_s: float = 0.0) -> None:
    """Accumulate the timing of one episode into :data:`TIMING`."""
    TIMING["physics_s"] += physics_s
    TIMING["planning_s"] += planning_s
    TIMING["episode_s"] += episode_s
    TIMING["episode_cpu_s"] += episode_cpu_s
    TIMING["episodes"] += 1
    TIMING["steps"] += steps


def as_pose(position: Sequence[float], quat: Sequence[float]) -> PT.Pose:
    """A planning Pose."""
    return PT.Pose(tuple(float(v) for v in position), tuple(float(v) for v in quat))


def top_down_quat(yaw: float) -> np.ndarray:
    """Quaternion (w, x, y, z) of a tool pointing down (z = -world z) rotated by ``yaw``
    about the world z axis (the fingers close along the tool's y axis)."""
    # Rz(yaw) * Rx(pi)
    h = yaw / 2
    return np.array([0.0, np.cos(h), np.sin(h), 0.0])
