"""The embedded planner: OMPL joint-space planning with MuJoCo collision checking.

Reads the MoveIt configuration (SRDF groups, named states, disabled pairs; joint limits;
ompl_planning.yaml planner configurations; kinematics.yaml IK settings) so that it plans like
a MoveIt planning component would. Every failure is returned as a :class:`PlanResult` with a
reason; nothing from OMPL, mink or toppra escapes as an exception.

Safety padding: planning keeps ``padding`` metres from obstacles when the start and goal allow
it; a start or goal that is only within the padding (e.g. a grasp pose next to its object)
makes that request plan with zero padding instead. Cartesian segments always use zero padding
(they are meant to approach and touch). Every returned trajectory is re-checked densely with
zero padding before it is returned; a failing one is re-planned (``attempts``).

Determinism (``deterministic=True``, the default): OMPL draws the seed of every generator it
creates (state samplers, the path simplifier, nearest-neighbour pivots) from one process-wide
seed sequence, so by default a plan depends on every plan made earlier in the process. Here
each solve first re-seeds that sequence with a seed derived from the planner's seed
(:meth:`OmplPlanner.reseed`, e.g. an episode seed) and the number of solves since; every
OMPL object of the solve is created afterwards. The solve stops after ``max_iterations``
planner iterations (counted, not timed) and the path is simplified to convergence
(``simplifyMax``), so the result depends on neither the process history nor the machine's
speed; the time limit stays as a backstop.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.planning import types as T
from clawgym_ros.planning.base import GRIPPER_TOUCH_LINKS, Planner
from clawgym_ros.planning.cartesian import cartesian_path
from clawgym_ros.planning.ik import IkConfig, IkSolver
from clawgym_ros.planning.moveit_config import MoveItConfig, PlannerConfig, load_moveit_config
from clawgym_ros.planning.timing import time_parameterize
from clawgym_ros.sim.collision import CollisionChecker
from clawgym_ros.sim.world import is_scalar_joint, name_index

#: ompl_planning.yaml parameter -> setter on the OMPL planner object.
_PARAM_SETTERS = {
    "range": "setRange",
    "goal_bias": "setGoalBias",
    "max_nearest_neighbors": "setMaxNearestNeighbors",
    "border_fraction": "setBorderFraction",
    "failed_expansion_score_factor": "setFailedExpansionCellScoreFactor",
    "min_valid_path_fraction": "setMinValidPathFraction",
    "delay_collision_checking": "setDelayCC",
}


@dataclasses.dataclass(frozen=True)
class OmplPlannerConfig:
    """Settings of the embedded planner (MoveIt's files give groups, limits and planners)."""

    moveit_dir: str = dataclasses.field(
        default="", metadata={"help": "folder with claw_arm.srdf and the MoveIt YAML files; "
                                      "empty = the package's config/moveit"})
    padding: float = dataclasses.field(
        default=0.01, metadata={"help": "clearance kept from obstacles (m), [0, 0.1]"})
    default_time_limit: float = dataclasses.field(
        default=5.0, metadata={"help": "planning time when a request gives none (s), (0, 600]"})
    simplify_time: float = dataclasses.field(
        default=0.2, metadata={"help": "path simplification budget (s), [0, 10]"})
    validate_step: float = dataclasses.field(
        default=0.002, metadata={"help": "joint step of the final dense re-check (rad), "
                                        "(0, 0.1]"})
    attempts: int = dataclasses.field(
        default=3, metadata={"help": "re-plans when the timed path fails the re-check, "
                                     "[1, 20]"})
    trajectory_dt: float = dataclasses.field(
        default=0.02, metadata={"help": "time between trajectory points (s), (0, 1]"})
    cartesian_step: float = dataclasses.field(
        default=0.005, metadata={"help": "tool translation between Cartesian waypoints (m), "
                                         "(0, 0.1]"})
    max_joint_jump: float = dataclasses.field(
        default=0.15, metadata={"help": "largest joint change between Cartesian waypoints "
                                        "(rad), (0, 3.14]"})
    seed: int = dataclasses.field(
        default=0, metadata={"help": "seed of OMPL's and the IK restarts' generators"})
    deterministic: bool = dataclasses.field(
        default=True, metadata={"help": "re-seed OMPL before every solve, count iterations "
                                        "and simplify to convergence (results independent of "
                                        "earlier plans and of machine speed)"})
    max_iterations: int = dataclasses.field(
        default=200_000, metadata={"help": "planner iterations per solve when deterministic, "
                                           "[1, 10000000]"})
    motion_resolution: float = dataclasses.field(
        default=0.0, metadata={"help": "OMPL's motion-check spacing as a fraction of the joint "
                                       "space's extent; 0 = ompl_planning.yaml's "
                                       "longest_valid_segment_fraction, [0, 0.1]"})

    def __post_init__(self) -> None:
        check_range("padding", self.padding, 0.0, 0.1)
        check_range("default_time_limit", self.default_time_limit, 0.0, 600.0, low_open=True)
        check_range("simplify_time", self.simplify_time, 0.0, 10.0)
        check_range("validate_step", self.validate_step, 0.0, 0.1, low_open=True)
        check_int("attempts", self.attempts, 1, 20)
        check_range("trajectory_dt", self.trajectory_dt, 0.0, 1.0, low_open=True)
        check_range("cartesian_step", self.cartesian_step, 0.0, 0.1, low_open=True)
        check_range("max_joint_jump", self.max_joint_jump, 0.0, 3.15, low_open=True)
        check_int("seed", self.seed, 0, 2**31 - 1)
        check_int("max_iterations", self.max_iterations, 1, 10_000_000)
        check_range("motion_resolution", self.motion_resolution, 0.0, 0.1)


class OmplPlanner(Planner):
    """OMPL + MuJoCo planner for the arm group.

    Args:
        model: MuJoCo model of the robot in its scene (copied; never stepped).
        config: planner settings.
        moveit: a loaded MoveIt configuration (default: read ``config.moveit_dir``).
        scene_qpos: full qpos of the scene (object poses, gripper); default: the model's.
        tool_frame: body or site of the tool frame.
        preload_timing: import toppra now (~2.3 s CPU with its matplotlib and scipy imports)
            rather than in the first plan; False where plans are rare and processes many
            (synthesis workers: their experts time joint lines themselves).
    """

    name = "ompl"

    def __init__(
        self,
        model: Any,
        config: OmplPlannerConfig | None = None,
        moveit: MoveItConfig | None = None,
        scene_qpos: np.ndarray | None = None,
        tool_frame: str = C.FRAME_TOOL,
        preload_timing: bool = True,
    ) -> None:
        if preload_timing:
            import toppra  # noqa: F401  (slow first import: pay it here, not in the first plan)
        from ompl import util as ou

        self.config = config or OmplPlannerConfig()
        self.moveit = moveit or load_moveit_config(self.config.moveit_dir or None)
        self.group = C.ARM_GROUP
        self._joints = self.moveit.group_joints(self.group)
        ou.setLogLevel(ou.LOG_ERROR)
        if not self.config.deterministic:
            _reseed_ompl(self.config.seed + 1)
        self.checker = CollisionChecker(
            model, self._joints, self.moveit.srdf.disabled_collisions,
            padding=self.config.padding, tool_frame=tool_frame, scene_qpos=scene_qpos)
        kin = self.moveit.kinematics.get(self.group, {})
        self.ik = IkSolver(model, self._joints, tool_frame, IkConfig(
            position_tolerance=float(kin.get("position_tolerance", 0.001)),
            orientation_tolerance=float(kin.get("orientation_tolerance", 0.01)),
            attempts=int(kin.get("kinematics_solver_attempts", 10)),
            timeout=max(0.05, 10 * float(kin.get("kinematics_solver_timeout", 0.05))),
            deterministic=self.config.deterministic),
            seed=self.config.seed)
        self.ik.set_scene_qpos(self.checker.scene_qpos)
        self.current = np.clip(
            self.checker.scene_qpos[self.checker.qpos_adr], self.checker.lower,
            self.checker.upper)
        missing = [j for j in self._joints if j not in self.moveit.joint_limits]
        if missing:
            raise ConfigError("joint_limits", missing[0], "a limit for every arm joint")
        self.max_velocity = np.array(
            [self.moveit.joint_limits[j].max_velocity for j in self._joints])
        self.max_acceleration = np.array(
            [self.moveit.joint_limits[j].max_acceleration for j in self._joints])
        self._shoulder, self._reach = self._workspace()
        self._seed = int(self.config.seed)
        self._solves = 0

    def reseed(self, seed: int, solves: int = 0) -> None:
        """Make the following solves depend only on ``seed`` and their order from now on.

        Args:
            seed: any non-negative integer (e.g. an episode seed).
            solves: solves already made since ``seed`` (to replay from a :attr:`seed_state`).
        """
        self._seed = int(seed)
        self._solves = int(solves)

    @property
    def seed_state(self) -> tuple[int, int]:
        """(seed, solves since it): ``reseed(*seed_state)`` replays the following solves."""
        return self._seed, self._solves

    def _next_ompl_seed(self) -> int:
        """The OMPL root seed of the next solve (non-zero, 32 bits)."""
        state = np.random.SeedSequence([self._seed, self._solves]).generate_state(1)
        self._solves += 1
        return int(state[0]) or 1

    # ----------------------------------------------------------------- state
    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(self._joints)

    def set_joint_positions(self, positions: Mapping[str, float]) -> None:
        scene = self.checker.scene_qpos.copy()
        model = self.checker.model
        for name, value in positions.items():
            if name in self._joints:
                self.current[self._joints.index(name)] = float(value)
            else:
                jid = name_index(model, "joint", name)
                if jid >= 0 and is_scalar_joint(model, jid):
                    scene[model.jnt_qposadr[jid]] = float(value)
        self.checker.set_scene_qpos(scene)
        self.ik.set_scene_qpos(scene)

    def set_scene_qpos(self, qpos: np.ndarray) -> None:
        """Take the whole scene (objects, gripper, arm as current state) from a sim qpos."""
        self.checker.set_scene_qpos(qpos)
        self.ik.set_scene_qpos(qpos)
        self.current = np.asarray(qpos, dtype=float)[self.checker.qpos_adr].copy()

    def attach_object(self, body: str, touch_links: Iterable[str] = GRIPPER_TOUCH_LINKS) -> None:
        self.checker.attach(body, self.current, touch_links)

    def detach_object(self) -> None:
        self.checker.detach()

    # ----------------------------------------------------------------- planning
    def plan(self, request: T.PlanRequest) -> T.PlanResult:
        t0 = time.perf_counter()
        try:
            result = self._plan(request, t0)
        except ConfigError as err:
            result = T.PlanResult.failure(T.REASON_INVALID_REQUEST, str(err))
        result.planning_time = time.perf_counter() - t0
        return result

    def _plan(self, req: T.PlanRequest, t0: float) -> T.PlanResult:
        if req.group != self.group:
            return T.PlanResult.failure(
                T.REASON_INVALID_REQUEST, f"group={req.group!r}: only {self.group!r} is planned")
        pcfg = self.moveit.resolve_planner(self.group, req.planner_id)
        chk = self.checker
        start = self.current.copy() if req.start is None else np.array(req.start)
        if start.shape != (len(self._joints),):
            return T.PlanResult.failure(
                T.REASON_INVALID_REQUEST, f"start has {start.size} values; the arm has "
                f"{len(self._joints)} joints")
        if not chk.within_limits(start, tol=0.01):
            return T.PlanResult.failure(
                T.REASON_INVALID_REQUEST, f"start {np.round(start, 3).tolist()} is outside the "
                "joint limits")
        start = np.clip(start, chk.lower, chk.upper)
        chk.set_padding(0.0)
        if not chk.is_valid(start):
            return T.PlanResult.failure(
                T.REASON_START_IN_COLLISION, "start state in collision: " + _describe(
                    chk.contacts(start)))
        time_limit = req.time_limit or self.config.default_time_limit

        if req.goal_type == T.GOAL_POSE and req.cartesian:
            return self._plan_cartesian(req, start)
        goal, failure = self._goal_configuration(req, start)
        if failure is not None:
            return failure
        padding = self.config.padding
        chk.set_padding(padding)
        if not (chk.is_valid(start) and chk.is_valid(goal)):
            padding = 0.0
        vscale = req.velocity_scaling or self.moveit.default_velocity_scaling
        ascale = req.acceleration_scaling or self.moveit.default_acceleration_scaling
        message = ""
        for _attempt in range(self.config.attempts):
            remaining = time_limit - (time.perf_counter() - t0)
            if remaining <= 0.0:
                break
            chk.set_padding(padding)
            waypoints, status = self._solve(pcfg, start, goal, remaining)
            if waypoints is None:
                chk.set_padding(0.0)
                if status == "timeout":
                    return T.PlanResult.failure(
                        T.REASON_TIMEOUT, f"{pcfg.name} found no path in {time_limit:g} s")
                return T.PlanResult.failure(
                    T.REASON_GOAL_UNREACHABLE, f"{pcfg.name}: {status}")
            traj = _timed_within_limits(waypoints, self._joints, self.max_velocity * vscale,
                                        self.max_acceleration * ascale,
                                        self.config.trajectory_dt)
            chk.set_padding(0.0)
            if traj is None:
                message = "time parameterization failed"
                continue
            ok, _ = chk.path_valid(traj.positions, self.config.validate_step)
            if ok:
                return T.PlanResult(True, "", f"{pcfg.name}: {len(waypoints)} waypoints, "
                                    f"{traj.duration:.2f} s", traj, planner_id=pcfg.name)
            message = "timed path failed the dense collision re-check"
        chk.set_padding(0.0)
        return T.PlanResult.failure(T.REASON_TIMEOUT, message or "out of time")

    def _goal_configuration(
        self, req: T.PlanRequest, start: np.ndarray,
    ) -> tuple[np.ndarray, T.PlanResult | None]:
        chk = self.checker
        chk.set_padding(0.0)
        if req.goal_type == T.GOAL_NAMED:
            goal = np.array(self.moveit.named_state(self.group, req.named_goal))
        elif req.goal_type == T.GOAL_JOINTS:
            goal = np.array(req.joint_goal)
            if goal.shape != (len(self._joints),):
                return goal, T.PlanResult.failure(
                    T.REASON_INVALID_REQUEST, f"joint goal has {goal.size} values; the arm "
                    f"has {len(self._joints)} joints")
        else:
            if req.pose_goal is None:
                return start, T.PlanResult.failure(T.REASON_INVALID_REQUEST,
                                                   "pose goal missing")
            return self._solve_ik(req.pose_goal, start)
        if not chk.within_limits(goal):
            return goal, T.PlanResult.failure(
                T.REASON_INVALID_REQUEST, f"goal {np.round(goal, 3).tolist()} is outside the "
                "joint limits")
        if not chk.is_valid(goal):
            return goal, T.PlanResult.failure(
                T.REASON_GOAL_IN_COLLISION, "goal state in collision: " + _describe(
                    chk.contacts(goal)))
        return goal, None

    def _solve_ik(self, pose: T.Pose, start: np.ndarray) -> tuple[np.ndarray, T.PlanResult | None]:
        distance = float(np.linalg.norm(np.asarray(pose.position) - self._shoulder))
        if distance > self._reach:
            return start, T.PlanResult.failure(
                T.REASON_GOAL_UNREACHABLE, f"target is {distance:.3f} m from the shoulder; the "
                f"arm reaches {self._reach:.3f} m")
        named = [self.moveit.named_state(self.group, n)
                 for n in sorted(self.moveit.srdf.group_states.get(self.group, {}))]
        result = self.ik.solve(pose, seed=start, extra_seeds=named, accept=self.checker.is_valid)
        if result.success:
            return result.q, None
        if result.rejected:
            return start, T.PlanResult.failure(
                T.REASON_GOAL_IN_COLLISION, f"all {result.rejected} IK solutions are in "
                "collision")
        return start, T.PlanResult.failure(
            T.REASON_IK_FAILED, f"no IK solution in {result.attempts} attempts (best position "
            f"error {result.position_error:.4f} m, orientation {result.orientation_error:.3f} "
            "rad)")

    def _plan_cartesian(self, req: T.PlanRequest, start: np.ndarray) -> T.PlanResult:
        if req.pose_goal is None:
            return T.PlanResult.failure(T.REASON_INVALID_REQUEST, "pose goal missing")
        self.checker.set_padding(0.0)
        path = cartesian_path(self.checker, self.ik, start, req.pose_goal,
                              self.config.cartesian_step, self.config.max_joint_jump,
                              self.config.validate_step)
        if path.fraction < 1.0:
            return T.PlanResult.failure(
                T.REASON_CARTESIAN_INCOMPLETE, f"straight line achieved {path.fraction:.0%} "
                f"(stopped by {path.stop_reason})")
        vscale = req.velocity_scaling or self.moveit.default_velocity_scaling
        ascale = req.acceleration_scaling or self.moveit.default_acceleration_scaling
        traj = time_parameterize(path.positions, self._joints, self.max_velocity * vscale,
                                 self.max_acceleration * ascale, self.config.trajectory_dt,
                                 resample_step=self.config.max_joint_jump)
        if traj is None:
            return T.PlanResult.failure(T.REASON_TIMEOUT, "time parameterization failed")
        ok, _ = self.checker.path_valid(traj.positions, self.config.validate_step)
        if not ok:
            return T.PlanResult.failure(T.REASON_CARTESIAN_INCOMPLETE,
                                        "timed straight line failed the collision re-check")
        return T.PlanResult(True, "", f"cartesian: {len(path.positions)} waypoints", traj,
                            planner_id="cartesian")

    def _solve(
        self, pcfg: PlannerConfig, start: np.ndarray, goal: np.ndarray, time_limit: float,
    ) -> tuple[np.ndarray | None, str]:
        from ompl import base as ob
        from ompl import geometric as og

        if self.config.deterministic:
            _reseed_ompl(self._next_ompl_seed())
        n = len(self._joints)
        space = ob.RealVectorStateSpace(n)
        bounds = ob.RealVectorBounds(n)
        for i in range(n):
            bounds.setLow(i, float(self.checker.lower[i]))
            bounds.setHigh(i, float(self.checker.upper[i]))
        space.setBounds(bounds)
        setup = og.SimpleSetup(space)
        setup.setStateValidityChecker(_memoized(self.checker.is_valid, n))
        si = setup.getSpaceInformation()
        si.setStateValidityCheckingResolution(self.config.motion_resolution
                                              or self.moveit.longest_valid_segment_fraction)
        s, g = space.allocState(), space.allocState()
        for i in range(n):
            s[i], g[i] = float(start[i]), float(goal[i])
        setup.setStartAndGoalStates(s, g)
        cls = getattr(og, pcfg.short_type, None)
        if cls is None:
            return None, f"planner type {pcfg.type!r} is not in this OMPL build"
        planner = cls(si)
        for key, value in pcfg.params.items():
            setter = getattr(planner, _PARAM_SETTERS.get(key, "-"), None)
            if setter is not None:
                setter(type_of(key)(value))
        setup.setPlanner(planner)
        if self.config.deterministic and pcfg.short_type not in _THREADED_PLANNERS:
            status = setup.solve(_iteration_condition(self.config.max_iterations, time_limit))
        else:
            status = setup.solve(float(time_limit))
        if not setup.haveExactSolutionPath():
            kind = status.getStatus()
            return None, ("timeout" if kind in (ob.PlannerStatus.TIMEOUT,
                                                ob.PlannerStatus.APPROXIMATE_SOLUTION)
                          else str(status))
        if self.config.simplify_time > 0.0:
            # a duration of 0 makes OMPL simplify to convergence (simplifyMax): no clock
            setup.simplifySolution(0.0 if self.config.deterministic
                                   else self.config.simplify_time)
        path = setup.getSolutionPath()
        out = np.array([[path.getState(k)[i] for i in range(n)]
                        for k in range(path.getStateCount())])
        out[0], out[-1] = start, goal
        del path, status, planner, setup, si, space, bounds, s, g
        return out, ""

    def _workspace(self) -> tuple[np.ndarray, float]:
        """Shoulder position and the tool's largest distance from it (sampled)."""
        chk = self.checker
        shoulder_body = int(chk.model.jnt_bodyid[chk.joint_ids[min(1, len(chk.joint_ids) - 1)]])
        rng = np.random.default_rng(self.config.seed)
        # One draw of all samples: the same numbers as 2000 draws of one sample each.
        samples = rng.uniform(chk.lower, chk.upper, size=(2000, len(chk.lower)))
        tools = np.empty((len(samples), 3))
        shoulder = np.zeros(3)
        for k, q in enumerate(samples):
            tools[k] = chk.tool_pose(q)[0]
            if k == 0:
                shoulder = chk.data.xpos[shoulder_body].copy()
        # norm(v) is sqrt(v . v); max over the same floats as a running max.
        far = max(0.0, *(math.sqrt(v.dot(v)) for v in tools - shoulder))
        return shoulder, far * 1.02


def _timed_within_limits(waypoints: np.ndarray, joints: tuple[str, ...] | list[str],
                         vmax: np.ndarray, amax: np.ndarray, dt: float, tries: int = 3
                         ) -> T.Trajectory | None:
    """toppra timing whose sampled velocities and accelerations respect the limits.

    toppra's discretized solution can overshoot the acceleration limit at sharp polyline
    corners (measured: 15 % on a path around the wall); the path is then re-timed with the
    limits scaled down by the overshoot (at most ``tries`` times).
    """
    vlim, alim = np.asarray(vmax, dtype=float), np.asarray(amax, dtype=float)
    traj = None
    for _ in range(tries):
        traj = time_parameterize(waypoints, joints, vlim, alim, dt)
        if traj is None:
            return None
        over_v = float(np.max(np.abs(traj.velocities) / vmax))
        over_a = float(np.max(np.abs(traj.accelerations) / amax))
        if over_v <= 1.02 and over_a <= 1.02:
            return traj
        vlim = vlim / max(1.0, over_v) * 0.99
        alim = alim / max(1.0, over_a) * 0.99
    return traj


def _memoized(is_valid: Callable[[tuple[float, ...]], bool], n: int) -> Callable:
    """OMPL state validity through ``is_valid``, remembering answers for the solve: the path
    simplifier asks about the same states again (measured: 18 % of the states checked in the
    20 quick-bench solves were repeats)."""
    answers: dict[tuple[float, ...], bool] = {}

    def valid(state: object) -> bool:
        q = tuple([state[i] for i in range(n)])
        answer = answers.get(q)
        if answer is None:
            answer = answers[q] = is_valid(q)
        return answer

    return valid


def _reseed_ompl(seed: int) -> None:
    """Re-seed OMPL's process-wide seed sequence (it logs an error when seeds were already
    drawn, yet re-seeds: the logger is silenced around the call)."""
    from ompl import util as ou

    level = ou.getLogLevel()
    ou.setLogLevel(ou.LOG_NONE)
    try:
        ou.RNG.setSeed(seed)
    finally:
        ou.setLogLevel(level)


#: Planners that grow their roadmap in a second thread: a Python termination condition called
#: from that thread deadlocks on the GIL, and their result depends on thread timing anyway, so
#: they always run under OMPL's own timed condition (not deterministic; documented).
_THREADED_PLANNERS = frozenset({"PRM", "PRMstar", "LazyPRM", "LazyPRMstar", "SPARS", "SPARStwo"})


def _iteration_condition(max_iterations: int, time_limit: float) -> object:
    """A termination condition that stops after ``max_iterations`` checks (the planner checks
    once per iteration) or, as a backstop, after ``time_limit`` seconds."""
    from ompl import base as ob

    deadline = time.perf_counter() + float(time_limit)
    count = [0]

    def done() -> bool:
        count[0] += 1
        return count[0] > max_iterations or time.perf_counter() > deadline

    return ob.PlannerTerminationCondition(done)


def type_of(key: str) -> type:
    """Python type of an ompl_planning.yaml parameter's setter argument."""
    return int if key in ("max_nearest_neighbors",) else (
        bool if key == "delay_collision_checking" else float)


def _describe(contacts: list) -> str:
    pairs = sorted({c.describe() for c in contacts})
    return ", ".join(pairs[:5]) or "joint limits"
