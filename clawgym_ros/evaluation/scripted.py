"""A scripted pick-and-lift policy and its stage tracker: the evaluator's baseline and test
policy (``clawgym eval --policy scripted:<task>``).

:class:`ScriptedPick` implements the Policy protocol on the tabletop observation: at the first
observation of an episode it solves inverse kinematics (damped least squares on a private
MuJoCo model, fixed iteration count, so it is deterministic) for a pre-grasp pose above the
first object and a grasp pose at it, then plays a time-indexed joint-space script: approach,
descend, close, lift. It uses only ``joint_pos`` and ``object_poses`` (never ``tool_pose``), so
its actions depend on nothing the ROS path reconstructs approximately. Without yaw alignment
(the default) the fingers close across the object at its random yaw: some grasps hold, some
slip, so outcomes vary with the seed.

:class:`LiftTracker` is the stage tracker used for arm tasks whose task env is not available
(``reach``, ``grasp``, ``lift``; success = the object is 5 cm above where it started).

Pure (NumPy + MuJoCo, no rclpy).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.tasks.base import StageTracker

#: Dev task stages and thresholds.
LIFT_STAGES = ("reach", "grasp", "lift")
REACH_TOLERANCE = 0.03        # m, tool to object centre
GRASP_WIDTH = 0.075           # m, gripper narrower than open
LIFT_HEIGHT = 0.05            # m above the initial height
#: A tool-object coordinate difference beyond which the distance is surely beyond
#: REACH_TOLERANCE (LiftTracker._within_reach).
_FAR = REACH_TOLERANCE * (1 + 1e-9)
#: Steps ScriptedPick declares open loop once planned (it never reads another observation;
#: a bound keeps the number finite).
OPEN_LOOP_HORIZON = 1_000_000


class LiftTracker(StageTracker):
    """Stages of lifting object ``target`` (index in ``object_poses``).

    Stages: reach (tool within 3 cm of the object), grasp (gripper closing with the object
    within 3 cm of the tool), lift (object 5 cm above its start). Success: lifted now.
    """

    def __init__(self, target: int = 0) -> None:
        super().__init__(LIFT_STAGES)
        self.target = target
        self.start_z: float | None = None

    def reset(self) -> None:
        super().reset()
        self.start_z = None

    def observe(self, time: float, state: Mapping[str, np.ndarray]) -> None:
        if self.start_z is None:
            self.start_z = float(state[C.OBS_OBJECT_POSES][self.target, 2])

    def _distance(self, state: Mapping[str, np.ndarray]) -> float:
        offset = state[C.OBS_TOOL_POSE][:3] - state[C.OBS_OBJECT_POSES][self.target, :3]
        # np.linalg.norm of a float vector is sqrt(x.dot(x)), here without its wrapper
        return math.sqrt(offset.dot(offset))

    def _lifted(self, state: Mapping[str, np.ndarray]) -> bool:
        assert self.start_z is not None
        return float(state[C.OBS_OBJECT_POSES][self.target, 2]) > self.start_z + LIFT_HEIGHT

    def succeeded(self, state: Mapping[str, np.ndarray]) -> bool:
        """``success(state)[0]`` without the reason (the in-process runner asks every step)."""
        return self.start_z is not None and self._lifted(state)

    def _within_reach(self, state: Mapping[str, np.ndarray]) -> bool:
        """``_distance(state) < REACH_TOLERANCE``, with the distance computed only near the
        object (checked every control step until grasped).

        A coordinate difference beyond the tolerance by a relative margin of 1e-9 answers
        False without it: the computed distance is at least that difference times
        (1 - a few units of rounding, ~1e-16), however the dot product sums its nonnegative
        terms, so it cannot come out below the tolerance. The differences are the same
        float64 subtractions numpy makes.
        """
        tool = state[C.OBS_TOOL_POSE]
        row = state[C.OBS_OBJECT_POSES][self.target]
        if type(tool) is np.ndarray and type(row) is np.ndarray:
            a, b = tool.tolist(), row.tolist()
            if abs(a[0] - b[0]) > _FAR or abs(a[1] - b[1]) > _FAR or abs(a[2] - b[2]) > _FAR:
                return False
        return self._distance(state) < REACH_TOLERANCE

    def check(self, index: int, state: Mapping[str, np.ndarray]) -> bool:
        if index == 0:
            return self._within_reach(state)
        if index == 1:
            return (float(state[C.OBS_GRIPPER][0]) < GRASP_WIDTH
                    and self._within_reach(state))
        return self._lifted(state)

    def success(self, state: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        if self.start_z is None:
            return False, "no state yet"
        return (True, "") if self._lifted(state) else (False, "object not lifted")

    def achieved(self, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return {"object_z": float(state[C.OBS_OBJECT_POSES][self.target, 2])}


def _yaw(quat_wxyz: np.ndarray) -> float:
    w, x, y, z = quat_wxyz
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


class ScriptedPick:
    """Time-indexed pick-and-lift in joint space (see the module docstring).

    Args:
        target: index of the object to lift in ``object_poses``.
        align_yaw: turn the gripper to the object's yaw (modulo 90 degrees).
        speed_steps: control steps of the approach move.
        grasp_height: tool height above the object's centre when closing (m); high values
            pinch only the top of the object and slip more often.
        replan: closed loop from the close phase on: when the object is no longer between
            the fingers (its centre more than :data:`REPLAN_GAP` from the tool, by forward
            kinematics of ``joint_pos``: knocked out, displaced or slipped), plan again from
            the current joints and object pose (open, approach, descend, close, lift), at most
            :data:`MAX_REPLANS` times per episode. Off by default: the baseline's episodes
            (and the reports holding them) stay as they were.
    """

    #: Object centre to tool distance (m) beyond which a replanning baseline re-picks.
    REPLAN_GAP = 0.06
    MAX_REPLANS = 3

    #: Script phases in control steps: approach, descend, close, lift.
    DESCEND, CLOSE, LIFT = 20, 15, 30

    def __init__(self, target: int = 0, align_yaw: bool = False, speed_steps: int = 40,
                 grasp_height: float = 0.005, replan: bool = False) -> None:
        from clawgym_ros.sim import scene_mjcf as MJ
        from clawgym_ros.sim import scene_spec as S
        from clawgym_ros.sim.mujoco_backend import index_model
        from clawgym_ros.sim.world import MujocoPhysics, joint_ranges

        self.target = target
        self.align_yaw = align_yaw
        self.approach = int(speed_steps)
        self.grasp_height = float(grasp_height)
        self.replan = bool(replan)
        scene = S.load_scene(C.SCENE_TABLETOP)
        self.model = MJ.build_model(C.SCENE_TABLETOP)
        self.physics = MujocoPhysics(self.model)
        self.data = self.physics.data
        self.index = index_model(self.model, scene)
        self.home = np.asarray(scene.robot.home, dtype=float)
        self.open_width = float(S.GRIPPER_MAX_WIDTH)
        self.lower, self.upper = joint_ranges(self.model, C.ARM_JOINTS)
        self.reset()

    # ------------------------------------------------------------------ Policy protocol
    def reset(self) -> None:
        """Forget the episode's plan."""
        self.step = 0
        self.replans = 0
        self.plan: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def open_loop_steps(self) -> int:
        """Once planned (from the first observation), every later action comes from the plan:
        the whole episode is open loop; before that, none (and never when replanning)."""
        return 0 if self.plan is None or self.replan else OPEN_LOOP_HORIZON

    def act(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The next joint target and gripper width."""
        if self.plan is None or self._lost(obs):
            self.plan = self._make_plan(np.asarray(obs[C.OBS_JOINT_POS], dtype=float),
                                        np.asarray(obs[C.OBS_OBJECT_POSES], dtype=float))
            self.step = 0
        start, pre, grasp = self.plan
        k = self.step
        self.step += 1
        a, d, c = self.approach, self.DESCEND, self.CLOSE
        width = self.open_width
        if k < a:
            q = start + (pre - start) * (k + 1) / a
        elif k < a + d:
            q = pre + (grasp - pre) * (k - a + 1) / d
        elif k < a + d + c:
            q, width = grasp, 0.0
        else:
            s = min(1.0, (k - a - d - c + 1) / self.LIFT)
            q, width = grasp + (pre - grasp) * s, 0.0
        return {C.ACT_JOINT_TARGET: q.copy(), C.ACT_GRIPPER: np.array([width])}

    def _lost(self, obs: Mapping[str, Any]) -> bool:
        """Replanning only: past the descent, the object is no longer at the tool."""
        if not self.replan or self.plan is None or self.replans >= self.MAX_REPLANS or \
                self.step < self.approach + self.DESCEND:
            return False
        d, idx = self.data, self.index
        d.qpos[idx.arm_qpos] = np.asarray(obs[C.OBS_JOINT_POS], dtype=float)
        self.physics.kinematics()
        obj = np.asarray(obs[C.OBS_OBJECT_POSES], dtype=float)[self.target, :3]
        if float(np.linalg.norm(d.site_xpos[idx.tool_site] - obj)) <= self.REPLAN_GAP:
            return False
        self.replans += 1
        return True

    # ------------------------------------------------------------------ planning
    def _make_plan(self, q0: np.ndarray, poses: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        obj = poses[self.target]
        yaw = 0.0
        if self.align_yaw:
            yaw = (_yaw(obj[3:]) + np.pi / 4) % (np.pi / 2) - np.pi / 4
        c, s = np.cos(yaw), np.sin(yaw)
        # Top-down tool: x along world x (turned by yaw), z pointing down.
        rot = np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])
        pre = self._ik(obj[:3] + np.array([0.0, 0.0, 0.12]), rot, self.home)
        grasp = self._ik(obj[:3] + np.array([0.0, 0.0, self.grasp_height]), rot, pre)
        return q0.copy(), pre, grasp

    def _ik(self, pos: np.ndarray, rot: np.ndarray, seed: np.ndarray,
            iterations: int = 60, damping: float = 1e-3) -> np.ndarray:
        physics, d, idx = self.physics, self.data, self.index
        q = seed.copy()
        dofs = idx.arm_dof
        for _ in range(iterations):
            d.qpos[idx.arm_qpos] = q
            physics.kinematics(com=True)
            cur_p, cur_r = physics.site_pose(idx.tool_site)
            err = np.concatenate([pos - cur_p,
                                  0.5 * sum(np.cross(cur_r[:, i], rot[:, i]) for i in range(3))])
            if np.linalg.norm(err) < 1e-5:
                break
            jacp, jacr = physics.site_jacobian(idx.tool_site)
            jac = np.vstack([jacp[:, dofs], jacr[:, dofs]])
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), err)
            q = np.clip(q + dq, self.lower, self.upper)
        return q


class ScriptedNav:
    """Go-to-waypoint baseline for gps_nav (``scripted:gps_nav``): steers the base toward the
    current waypoint of ``nav_goal`` (latitude, longitude, waypoints left) from the ``gps``
    fix (flat-earth east/north offsets) and the IMU's yaw; stops when the route is done.

    Reads only ``gps``, ``imu`` and ``nav_goal`` (what the sensor topics and sim_node's
    task_state carry exactly), so GPS dropout and IMU noise change what it does. No
    localization filter: during a GPS outage it steers toward the waypoint from the held fix.
    Deterministic; stateless between steps.

    Args:
        max_speed: forward speed when facing the waypoint (m/s).
        turn_gain: yaw rate per radian of heading error (1/s), clipped to ``max_turn``.
        max_turn: yaw rate limit (rad/s).
        slow_radius: within this distance (m) the speed falls linearly to zero.
    """

    #: The observation it reads (declared like a checkpoint's layout, so policy_node takes
    #: ``nav_goal`` from task_state).
    obs_spec = {C.OBS_GPS: 3, C.OBS_IMU: 10, C.OBS_NAV_GOAL: 3}

    def __init__(self, max_speed: float = 0.8, turn_gain: float = 1.5, max_turn: float = 1.0,
                 slow_radius: float = 2.0) -> None:
        self.max_speed = float(max_speed)
        self.turn_gain = float(turn_gain)
        self.max_turn = float(max_turn)
        self.slow_radius = float(slow_radius)

    def reset(self) -> None:
        """Nothing to forget (stateless)."""

    def act(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The base twist (forward m/s, yaw rate rad/s) toward the current waypoint."""
        from clawgym_ros.perturbations.gps import EARTH_RADIUS_M

        goal = np.asarray(obs[C.OBS_NAV_GOAL], dtype=float)
        if goal[2] <= 0:
            return {C.ACT_BASE_TWIST: np.zeros(2)}
        lat, lon = (float(v) for v in np.asarray(obs[C.OBS_GPS], dtype=float)[:2])
        north = np.radians(goal[0] - lat) * EARTH_RADIUS_M
        east = np.radians(goal[1] - lon) * EARTH_RADIUS_M * np.cos(np.radians(lat))
        yaw = _yaw(np.asarray(obs[C.OBS_IMU], dtype=float)[:4])
        error = float(np.arctan2(north, east)) - yaw
        error = (error + np.pi) % (2 * np.pi) - np.pi
        w = float(np.clip(self.turn_gain * error, -self.max_turn, self.max_turn))
        distance = float(np.hypot(east, north))
        v = self.max_speed * max(0.0, float(np.cos(error))) * min(1.0,
                                                                  distance / self.slow_radius)
        return {C.ACT_BASE_TWIST: np.array([v, w])}
