"""gps_nav: the mobile base drives through a sequence of GPS waypoints, surviving GPS outages.

The task (:class:`GpsNav`), its environment (:class:`GpsNavEnv`, ``clawgym/GpsNav-v0``),
its stage tracker (:class:`NavTracker`) and the planner-driven expert (:func:`generate`) live
here; the estimation, routing and control cores are in :mod:`clawgym_ros.tasks.navigation`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.gps import STATUS_FIX
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.geo import enu_to_geodetic, geodetic_to_enu
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.tasks.base import StageTracker, Task, Template
from clawgym_ros.tasks.episode_tools import spec_env, start_episode
from clawgym_ros.tasks.navigation import (
    EkfConfig,
    PoseEkf,
    PurePursuit,
    PursuitConfig,
    Router,
    polyline_distance,
    scene_obstacles,
    wheel_odometry,
    wrap_angle,
    yaw_from_quat,
)
from clawgym_ros.tasks.world import TaskEnv

TASK = C.TASK_GPS_NAV
ENV_ID = C.ENV_GPS_NAV
#: Observation key of the current navigation goal: (latitude, longitude, waypoints left).
OBS_NAV_GOAL = C.OBS_NAV_GOAL
#: Robot footprint radius (half diagonal of the 0.50 x 0.36 m chassis), m.
ROBOT_RADIUS = 0.31
#: Inflation used by the router (robot radius + clearance), m.
ROUTE_INFLATE = 0.75
#: A waypoint counts as reached when the true base position is this close, m.
WAYPOINT_TOLERANCE = 0.5
#: "arrive": within the tolerance of the last waypoint and slower than this, m/s.
ARRIVE_SPEED = 0.05
#: "localize": the base got this much closer to waypoint 1 than it started, m.
LOCALIZE_PROGRESS = 0.3
#: Recovery after an outage: base back within this distance of the reference route, m.
RECOVERY_TOLERANCE = 0.5
MAX_EPISODE_STEPS = 4500


TEMPLATES: tuple[Template, ...] = (
    Template("square_route", C.SPLIT_TRAIN,
             {"waypoints": [[6.0, -0.5], [6.0, 5.5], [0.5, 5.5], [0.5, 1.5]]},
             "square loop around the open area"),
    Template("zigzag_route", C.SPLIT_TRAIN,
             {"waypoints": [[2.5, 0.5], [5.5, 2.5], [6.5, -1.5], [9.5, 1.5], [11.0, -1.0]]},
             "zig-zag whose straight legs run through crate_a and the east landmark (detours)"),
    Template("long_route", C.SPLIT_HELD_OUT,
             {"waypoints": [[0.5, 2.5], [-1.5, 6.0], [-7.0, 7.0], [-12.0, 1.0], [-14.0, -5.0],
                            [-8.0, -8.0]]},
             "held out: long route west, past the north wall and the south-west landmark"),
)
_BY_NAME = {t.name: t for t in TEMPLATES}
TRAIN_TEMPLATES = tuple(t.name for t in TEMPLATES if t.split == C.SPLIT_TRAIN)
HELD_OUT_TEMPLATES = tuple(t.name for t in TEMPLATES if t.split == C.SPLIT_HELD_OUT)
#: Waypoint jitter (uniform per axis, m) and layout offset (uniform per axis, m).
WAYPOINT_JITTER = 0.4
LAYOUT_OFFSET = 0.3
SKILLS = ("localize", "navigate_to", "stop")


def _template(name: str) -> Template:
    if name not in _BY_NAME:
        raise ConfigError(f"{TASK}.template", name, "one of " + ", ".join(_BY_NAME))
    return _BY_NAME[name]


def stages_for(template: str) -> tuple[str, ...]:
    """Ordered stages of a template: localize, waypoint_1..k, arrive."""
    k = len(_template(template).params["waypoints"])
    return ("localize", *(f"waypoint_{i}" for i in range(1, k + 1)), "arrive")


def grammar_for(template: str) -> str:
    """Legal skill sequence: localize, one navigate_to per waypoint, stop."""
    k = len(_template(template).params["waypoints"])
    return "localize " + " ".join(["navigate_to"] * k) + " stop"


def scene_router(inflate: float = ROUTE_INFLATE) -> Router:
    """Router over the outdoor scene's static shapes."""
    return Router(scene_obstacles(S.load_scene(C.SCENE_OUTDOOR).static_shapes(), inflate))


def sample_waypoints(template: str, rng: np.random.Generator,
                     router: Router | None = None) -> np.ndarray:
    """(k, 2) ENU waypoints of ``template``: layout offset plus per-waypoint jitter, each
    resampled (from ``rng``) until it lies outside every inflated obstacle.

    Raises:
        ConfigError: unknown template.
    """
    base = np.asarray(_template(template).params["waypoints"], dtype=float)
    router = router or scene_router(ROUTE_INFLATE + 0.1)
    offset = rng.uniform(-LAYOUT_OFFSET, LAYOUT_OFFSET, 2)
    out = []
    for wp in base:
        for _ in range(50):
            p = wp + offset + rng.uniform(-WAYPOINT_JITTER, WAYPOINT_JITTER, 2)
            if router.free(p):
                break
        else:
            p = wp
        out.append(p)
    return np.array(out)


def goal_check(record: EpisodeRecord) -> str | None:
    """Every waypoint reached and the final position within tolerance of the last one."""
    want, got = record.goal, record.achieved
    if got.get("waypoints_reached") != want.get("waypoints_reached"):
        return (f"reached {got.get('waypoints_reached')} of "
                f"{want.get('waypoints_reached')} waypoints")
    err = float(np.linalg.norm(np.subtract(got.get("final_enu", [1e9, 1e9]),
                                           want.get("final_enu", [0.0, 0.0]))))
    if err > WAYPOINT_TOLERANCE:
        return f"final position {err:.2f} m from the last waypoint (> {WAYPOINT_TOLERANCE} m)"
    return None


class GpsNav(Task):
    """gps_nav: drive the mobile base through GPS waypoints, surviving GPS outages.

    Task Description:
        Drive the differential-drive base through a sequence of GPS waypoints (given as
        latitude/longitude) in order and stop at the last one, using GPS, IMU and wheel
        odometry; GPS may drop out for 8 s or more (``gps_dropout`` perturbation). Obstacles
        (crates, a wall, landmark posts) lie on or near some legs and must be driven around.

    Randomizations:
        Template (a training template drawn from the episode seed when none is given),
        layout offset (+-0.3 m per axis) and per-waypoint jitter (+-0.4 m per axis), with
        waypoints kept out of the inflated obstacles; the scene's start pose (+-0.5 m,
        yaw +-0.3 rad).

    Success Conditions:
        All stages reached in order: every waypoint within 0.5 m (true position), then
        stopped (< 0.05 m/s) within 0.5 m of the last one. Touching an obstacle is an
        unintended collision (rejected by the feasibility check).

    Stages:
        ``localize`` (the base got 0.3 m closer to waypoint 1 than where it started: it
        knows where it is), ``waypoint_1`` .. ``waypoint_k`` (k = 4 for square_route, 5 for
        zigzag_route, 6 for long_route), ``arrive``. Skills: ``localize navigate_to^k stop``.
    """

    name = TASK
    env_id = ENV_ID
    scene = C.SCENE_OUTDOOR
    stages = stages_for("square_route")
    skills = SKILLS
    grammar = grammar_for("square_route")
    templates = TEMPLATES
    expert = "clawgym_ros.tasks.gps_nav:generate"
    goal_tolerance = WAYPOINT_TOLERANCE
    max_contact_force = 400.0
    #: Mid-episode disturbances it supports (``disturbance`` family): a GPS outage starting
    #: once the first waypoint is reached (mid-route).
    disturbances = {"gps_outage": "waypoint_1"}

    def template_stages(self, template: Template) -> tuple[str, ...]:
        """localize, one stage per waypoint, arrive."""
        return stages_for(template.name)

    def template_grammar(self, template: Template) -> str:
        """localize, one navigate_to per waypoint, stop."""
        return grammar_for(template.name)

    def goal_check(self) -> Any:
        """:func:`goal_check` (waypoint count and final position)."""
        return goal_check


@dataclasses.dataclass(frozen=True)
class NavGoal:
    """The waypoints of an episode: ENU (m) and geodetic (deg)."""

    template: str
    waypoints_enu: np.ndarray
    waypoints_geodetic: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        """``record.goal``: what must be achieved (checked by :func:`goal_check`)."""
        return {"waypoints_reached": len(self.waypoints_enu),
                "final_enu": self.waypoints_enu[-1].round(4).tolist(),
                "waypoints_geodetic": self.waypoints_geodetic.round(8).tolist()}


class NavTracker(StageTracker):
    """Stages of gps_nav on the true base state (``odom`` of the backend = ground truth).

    Args:
        goal: the episode's waypoints.
        start: true start position of the base.
    """

    def __init__(self, goal: NavGoal, start: Sequence[float]) -> None:
        super().__init__(stages_for(goal.template))
        self.goal = goal
        self.waypoints = np.asarray(goal.waypoints_enu, dtype=float)
        self._d0 = float(np.linalg.norm(self.waypoints[0] - np.asarray(start[:2])))

    @property
    def waypoint_index(self) -> int:
        """Index of the waypoint to reach next (k when all are reached)."""
        return max(0, min(self.next_index - 1, len(self.waypoints)))

    def check(self, index: int, state: Mapping[str, np.ndarray]) -> bool:
        """Stage ``index`` on the true odometry ``(x, y, yaw, vx, vy, wz)``."""
        odom = state[C.OBS_ODOM]
        p = np.asarray(odom[:2], dtype=float)
        name = self.stages[index]
        if name == "localize":
            return (self._d0 - float(np.linalg.norm(self.waypoints[0] - p)) >= LOCALIZE_PROGRESS
                    or self._d0 < WAYPOINT_TOLERANCE)
        if name == "arrive":
            return (float(np.linalg.norm(self.waypoints[-1] - p)) < WAYPOINT_TOLERANCE
                    and float(np.hypot(odom[3], odom[4])) < ARRIVE_SPEED)
        k = int(name.split("_")[1]) - 1
        return float(np.linalg.norm(self.waypoints[k] - p)) < WAYPOINT_TOLERANCE

    def stage_distance(self, index: int, state: Mapping[str, np.ndarray]) -> float:
        """Distance (m, true position) to the waypoint stage ``index`` heads for (the first
        one for ``localize``, the last one for ``arrive``)."""
        name = self.stages[index]
        p = np.asarray(state[C.OBS_ODOM][:2], dtype=float)
        k = 0 if name == "localize" else len(self.waypoints) - 1 if name == "arrive" else \
            int(name.split("_")[1]) - 1
        return float(np.linalg.norm(self.waypoints[k] - p))

    def success(self, state: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        """All stages reached."""
        if self.next_index == len(self.stages):
            return True, ""
        return False, f"stopped after stages {self.reached_names}"

    def achieved(self, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Waypoints reached and the final true position."""
        return {"waypoints_reached": sum(n.startswith("waypoint_") for n in self.reached_names),
                "final_enu": np.asarray(state[C.OBS_ODOM][:2]).round(4).tolist()}


class GpsNavEnv(TaskEnv):
    """The outdoor scene with a GPS waypoint route (``clawgym/GpsNav-v0``); see :class:`GpsNav`.

    Observations: the backend's (``joint_pos``/``joint_vel`` of the wheels, ``imu``, ``gps``),
    but ``odom`` is wheel-encoder dead reckoning in the odom frame (the start pose), not ground
    truth, plus ``nav_goal`` = (latitude, longitude, waypoints left) of the current waypoint.
    ``info`` adds ``waypoints_geodetic`` and ``base_xy`` (truth). Unintended collision = a
    robot geom touching anything but the floor (``allowed_contacts``).

    Args:
        template: fixed template name, or "" for a training template per reset.
        **kwargs: :class:`ClawEnv` options (cameras, image size, render mode).
    """

    task_cls = GpsNav
    #: wheels (and the chassis) may touch the floor; any other robot contact is a collision
    allowed_contacts = (("robot", "floor"),)
    #: waypoints lie metres apart: in-stage progress at the scale of a route leg
    reward_scale = 5.0

    def __init__(self, template: str = "", **kwargs: Any) -> None:
        self._router = scene_router(ROUTE_INFLATE + 0.1)
        self._odom = np.zeros(3)
        self._wheel = np.zeros(2)
        super().__init__(template=template, **kwargs)
        origin = self.backend.scene.gps_origin
        self.origin = (origin.latitude, origin.longitude, origin.altitude)

    # ------------------------------------------------------------------ TaskEnv hooks
    def build_scene(self, template: Template) -> S.SceneSpec:
        """The outdoor scene (templates differ only in waypoints)."""
        return S.load_scene(C.SCENE_OUTDOOR)

    def sample_goal(self, rng: np.random.Generator, template: Template) -> NavGoal:
        """Waypoints of ``template`` drawn from ``rng``."""
        origin = self.backend.scene.gps_origin
        ref = (origin.latitude, origin.longitude, origin.altitude)
        enu = sample_waypoints(template.name, rng, self._router)
        geo = np.array([enu_to_geodetic((x, y, 0.0), ref)[:2] for x, y in enu])
        return NavGoal(template.name, enu, geo)

    def make_tracker(self, goal: NavGoal) -> NavTracker:
        """A tracker starting at the base's true position."""
        return NavTracker(goal, self.backend.odometry()[:2])

    # ------------------------------------------------------------------ spaces and API
    def _observation_space(self) -> spaces.Dict:
        items = dict(super()._observation_space().spaces)
        items[OBS_NAV_GOAL] = spaces.Box(-np.inf, np.inf, (3,), np.float64)
        return spaces.Dict(items)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset the scene and draw the route (see :class:`GpsNav` Randomizations)."""
        obs, info = super().reset(seed=seed, options=options)
        self._odom = np.zeros(3)
        self._wheel = obs[C.OBS_JOINT_POS].copy()
        return self._augment(obs), self._nav_info(info)

    def step(self, action: dict[str, Any]
             ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """One control step (reward = stages reached; terminates on success)."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self._augment(obs), reward, terminated, truncated, self._nav_info(info)

    def _augment(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        wheel = obs[C.OBS_JOINT_POS]
        dl, dr = (wheel - self._wheel) * S.WHEEL_RADIUS
        self._wheel = wheel.copy()
        ds, dyaw = (dl + dr) / 2.0, (dr - dl) / S.WHEEL_SEPARATION
        mid = self._odom[2] + dyaw / 2.0
        self._odom = self._odom + np.array([ds * math.cos(mid), ds * math.sin(mid), dyaw])
        self._odom[2] = wrap_angle(self._odom[2])
        v, w = wheel_odometry(obs[C.OBS_JOINT_VEL], S.WHEEL_RADIUS, S.WHEEL_SEPARATION)
        obs[C.OBS_ODOM] = np.array([*self._odom, v * math.cos(self._odom[2]),
                                    v * math.sin(self._odom[2]), w])
        goal: NavGoal | None = self.goal
        if goal is None:
            obs[OBS_NAV_GOAL] = np.zeros(3)
            return obs
        k = self.tracker.waypoint_index if self.tracker is not None else 0
        lat, lon = goal.waypoints_geodetic[min(k, len(goal.waypoints_enu) - 1)]
        obs[OBS_NAV_GOAL] = np.array([lat, lon, float(len(goal.waypoints_enu) - k)])
        return obs

    def _nav_info(self, info: dict[str, Any]) -> dict[str, Any]:
        info["base_xy"] = self.backend.odometry()[:2].copy()
        if self.goal is not None:
            info["waypoints_geodetic"] = self.goal.waypoints_geodetic.copy()
        return info


# --- expert ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExpertConfig:
    """Expert settings: localization window, arrival tolerance on the estimate, pursuit."""

    localize_s: float = 0.6
    localize_timeout_s: float = 20.0
    arrive_tolerance: float = 0.2
    stop_hold_s: float = 0.5
    pursuit: PursuitConfig = PursuitConfig()
    ekf: EkfConfig = EkfConfig()


def generate(spec: EpisodeSpec, config: ExpertConfig | None = None) -> EpisodeRecord:
    """Run the planner-driven expert for one episode and record it.

    The expert sees only the (perturbed) observation stream: wheel encoder rates, IMU
    orientation and yaw rate, and GPS fixes (an outage removes them: ``info["gps_status"]``
    is -1 and the held fix is ignored). It fuses them in a :class:`PoseEkf`, routes around
    the inflated obstacles with the visibility-graph :class:`Router` from its estimate to
    each waypoint, and follows the route with :class:`PurePursuit`.

    Options (``spec.options``): ``perturbation`` (family -> config overrides, e.g.
    ``{"gps_dropout": {"start_probability": 1, "max_outages": 1, "warmup_s": 6}}``),
    ``fault`` (``"skip_waypoint"``: the expert drives past waypoint 2 without reaching it,
    for sign-off tests).

    Returns:
        The episode record; ``achieved["gps_outages"]`` lists ``[start_s, end_s,
        recovered_s | None]`` and ``achieved["max_localization_error"]`` the expert's worst
        position error (m).
    """
    cfg = config or ExpertConfig()
    template = GpsNav().resolve_template(spec.template, np.random.default_rng(spec.seed)).name
    with spec_env(ENV_ID, spec, template) as env:
        return _run_expert(env, spec, template, cfg)


def _run_expert(env: Any, spec: EpisodeSpec, template: str, cfg: ExpertConfig
                ) -> EpisodeRecord:
    obs, info, rec = start_episode(env, spec, template, C.BASE_WHEEL_JOINTS)
    core: GpsNavEnv = env.unwrapped
    b = core.backend
    dt = b.control_dt
    fault = spec.options.get("fault")
    router = scene_router(ROUTE_INFLATE)
    ekf = PoseEkf(cfg.ekf)
    waypoints_geo = core.goal.waypoints_geodetic
    # the expert's goals come from the GPS coordinates it is given, converted to ENU
    goals = np.array([geodetic_to_enu(lat, lon, core.origin[2], core.origin)[:2]
                      for lat, lon in waypoints_geo])
    ref_route = reference_route(router, b.odometry()[:2], goals)
    state = {"obs": obs, "info": info, "gps_ok": info.get(C.INFO_GPS_STATUS, STATUS_FIX)
             == STATUS_FIX}
    log = {"status": [], "time": [], "route_err": [], "loc_err": []}
    max_steps = MAX_EPISODE_STEPS

    def sense() -> None:
        o = state["obs"]
        v, _ = wheel_odometry(o[C.OBS_JOINT_VEL], S.WHEEL_RADIUS, S.WHEEL_SEPARATION)
        yaw_rate = float(o[C.OBS_IMU][6])
        if ekf.initialized:
            ekf.predict(v, yaw_rate, dt)
            ekf.update_heading(yaw_from_quat(o[C.OBS_IMU][:4]))
        if state["gps_ok"]:
            lat, lon, alt = o[C.OBS_GPS]
            enu = geodetic_to_enu(lat, lon, alt, core.origin)
            if not ekf.initialized:
                yaw = yaw_from_quat(o[C.OBS_IMU][:4])
                ekf.initialize(ekf.base_from_antenna(enu[:2], yaw), yaw, cfg.ekf.gps_std)
            else:
                ekf.update_gps(enu[:2])

    def act(v: float, w: float) -> None:
        action = {C.ACT_BASE_TWIST: np.array([v, w])}
        prev_obs = state["obs"]
        o, _, _, _, inf = env.step(action)
        truth = b.odometry()
        _, q, dq, tau = b.joint_state()
        rec.step(b.time, obs=prev_obs, action=action, joint_position=q, joint_velocity=dq,
                 joint_effort=tau, contact_force=float(inf.get("contact_force", 0.0)),
                 collision=bool(inf.get("collision", False)))
        for name in inf.get("new_stages", []):
            rec.stage(name, b.time)
        state["obs"], state["info"] = o, inf
        state["gps_ok"] = inf.get(C.INFO_GPS_STATUS, STATUS_FIX) == STATUS_FIX
        log["time"].append(b.time)
        log["status"].append(state["gps_ok"])
        log["route_err"].append(polyline_distance(ref_route, truth[:2]))
        log["loc_err"].append(float(np.linalg.norm(ekf.state[:2] - truth[:2]))
                              if ekf.initialized else math.nan)
        sense()

    sense()
    # --- localize: stand still and fuse fixes until the estimate is tight
    t0 = b.time
    steps = 0
    while (not ekf.initialized or b.time - t0 < cfg.localize_s) and \
            b.time - t0 < cfg.localize_timeout_s:
        act(0.0, 0.0)
        steps += 1
    ok = ekf.initialized
    rec.skill("localize", {"fixes_needed": True}, start=t0, end=b.time,
              outcome=C.SKILL_OK if ok else C.SKILL_FAILED,
              detail="" if ok else "no GPS fix before the timeout")
    speed = 0.0
    reached = 0
    if ok:
        for k, goal in enumerate(goals):
            ts = b.time
            last = k == len(goals) - 1
            path = router.route(ekf.state[:2], goal)
            pursuit = PurePursuit(path, cfg.pursuit, speed=speed)
            skip = fault == "skip_waypoint" and k == 1
            target_tol = 3.0 if skip else cfg.arrive_tolerance
            while len(rec._time) < max_steps:
                if pursuit.distance_to_goal(ekf.state) < target_tol:
                    break
                v, w = pursuit.command(ekf.state, dt)
                if not last:
                    v = max(v, min(0.4, pursuit.config.max_speed)) if abs(w) < 1.0 else v
                act(v, w)
            speed = pursuit._speed
            done = pursuit.distance_to_goal(ekf.state) < target_tol
            stage_ok = f"waypoint_{k + 1}" in core.tracker.reached_names
            rec.skill("navigate_to", {"index": k + 1, "latitude": float(waypoints_geo[k][0]),
                                      "longitude": float(waypoints_geo[k][1])},
                      start=ts, end=b.time, outcome=C.SKILL_OK if done and stage_ok
                      else C.SKILL_FAILED)
            if not done:
                break
            reached += 1
        # --- stop and hold
        ts = b.time
        hold = 0
        while len(rec._time) < max_steps and hold < int(cfg.stop_hold_s / dt):
            act(0.0, 0.0)
            v_now = abs(wheel_odometry(state["obs"][C.OBS_JOINT_VEL], S.WHEEL_RADIUS,
                                       S.WHEEL_SEPARATION)[0])
            hold = hold + 1 if v_now < 0.02 else 0
        if reached == len(goals):
            rec.skill("stop", {}, start=ts, end=b.time)
    state = core.true_state()
    success, reason = core.tracker.success(state)
    achieved = core.tracker.achieved(state)
    outages = outage_windows(np.array(log["time"]), np.array(log["status"], dtype=bool),
                             np.array(log["route_err"]), RECOVERY_TOLERANCE)
    loc = np.array(log["loc_err"])
    return rec.finish(
        success=success, reason=reason,
        goal=core.goal_dict(),
        achieved={**achieved, "gps_outages": [list(o) for o in outages],
                  "max_localization_error": float(np.nanmax(loc)) if np.isfinite(loc).any()
                  else None,
                  "waypoints_geodetic": np.asarray(waypoints_geo).round(8).tolist()})


def reference_route(router: Router, start: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """The routed polyline from ``start`` through every goal (the recovery reference)."""
    points = [np.asarray(start, dtype=float)]
    for g in goals:
        leg = router.route(points[-1], g)
        points.extend(leg[1:])
    return np.array(points)


def outage_windows(times: np.ndarray, gps_ok: np.ndarray, error: np.ndarray,
                   tolerance: float) -> list[tuple[float, float, float | None]]:
    """GPS outages seen in a stream and their recovery.

    Args:
        times: (T,) step times, s.
        gps_ok: (T,) True where a good fix was delivered.
        error: (T,) position error used for recovery (m).
        tolerance: recovered when the error is back under this.

    Returns:
        ``(start_s, end_s, recovered_s | None)`` per outage: start = first step without a fix,
        end = first step with a fix again (the episode end when it never came back),
        recovered = first step at or after the end with ``error < tolerance``.
    """
    out: list[tuple[float, float, float | None]] = []
    i, n = 0, len(times)
    while i < n:
        if gps_ok[i]:
            i += 1
            continue
        j = i
        while j < n and not gps_ok[j]:
            j += 1
        start = float(times[i])
        end = float(times[j]) if j < n else float(times[-1])
        recovered = None
        if j < n:
            ok = np.flatnonzero(error[j:] < tolerance)
            recovered = float(times[j + ok[0]]) if ok.size else None
        out.append((start, end, recovered))
        i = j
    return out
