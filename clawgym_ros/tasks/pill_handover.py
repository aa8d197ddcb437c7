"""pill_handover: pick a pill box and hand it to a slowly moving simulated human hand.

The task (:class:`PillHandover`), its env (:class:`PillHandoverEnv`,
``clawgym/PillHandover-v0``), its stage tracker (:class:`HandoverTracker`) and the
planner-driven expert (:func:`generate`) live here; the hand is
:mod:`clawgym_ros.tasks.human_hand`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from clawgym_ros import constants as C
from clawgym_ros.planning.ik import IkConfig, IkSolver
from clawgym_ros.planning.types import Pose
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.world import MujocoPhysics, mat_to_quat, name_index, quat_to_mat
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.tasks.base import StageTracker, Task, Template
from clawgym_ros.tasks.episode_tools import resample, spec_env, start_episode
from clawgym_ros.tasks.families import TemplateFamily, TemplateParam
from clawgym_ros.tasks.human_hand import (
    FINGER_BODIES,
    HAND_BODY,
    HandConfig,
    HandPath,
    HumanHand,
    add_hand,
)
from clawgym_ros.tasks.world import TaskEnv

TASK = C.TASK_PILL_HANDOVER
ENV_ID = C.ENV_PILL_HANDOVER
OBS_HAND = C.OBS_HAND
OBJECT = "pill"
STAGES = ("reach", "grasp", "lift", "approach_hand", "wait_for_hand", "release")
SKILLS = ("move_to", "descend", "grasp", "lift", "approach_hand", "wait_for_hand", "release",
          "retreat")
GRAMMAR = "move_to descend grasp lift move_to approach_hand wait_for_hand release retreat"
#: Final approach: within this tool-to-hand distance (m) the tool must stay slower than
#: APPROACH_SPEED_LIMIT (m/s) until the hand has closed.
HAND_RADIUS = 0.15
APPROACH_SPEED_LIMIT = 0.06
#: The object counts as presented / held when its centre is this close to the hand centre.
IN_HAND_RADIUS = 0.03
#: Series rate handed to the evaluator (EpisodeSeries.rate_hz).
SERIES_RATE_HZ = 20.0
HAND_CENTER_LOW = (0.48, 0.24, 0.58)
HAND_CENTER_HIGH = (0.60, 0.32, 0.64)
HAND_YAW = (-0.6, 0.6)
OBJECT_RANGE = {"x": (0.40, 0.60), "y": (-0.15, 0.10), "yaw": (-1.5708, 1.5708)}
MAX_EPISODE_STEPS = 2000

TEMPLATES: tuple[Template, ...] = (
    Template("pill_box", C.SPLIT_TRAIN, {"shape": "box", "size": [0.06, 0.034, 0.024],
                                         "mass": 0.03}, "small pill box"),
    Template("pill_box_large", C.SPLIT_TRAIN, {"shape": "box", "size": [0.08, 0.044, 0.03],
                                               "mass": 0.05}, "large pill box"),
    Template("pill_bottle", C.SPLIT_HELD_OUT, {"shape": "cylinder", "size": [0.017, 0.07],
                                               "mass": 0.04}, "held out: upright bottle"),
)



def describe_container(template: Template) -> dict[str, Any]:
    """The :data:`CONTAINER_FAMILY` parameter values of a pill_handover template (a bottle:
    its diameter twice, then its height)."""
    p = template.params
    if "values" in p:
        return dict(p["values"])
    sx, sy, sz = object_dims(template)
    return {"shape": p["shape"], "sx": sx, "sy": sy, "sz": sz, "mass": float(p["mass"])}


def build_container(values: Mapping[str, Any]) -> dict[str, Any]:
    """``Template.params`` of a procedural pill container."""
    return {"shape": values["shape"], "size": [values["sx"], values["sy"], values["sz"]],
            "mass": values["mass"]}


#: The procedural container family (``proc:containers``): pill boxes of any size and mass
#: within the ranges (``sx`` along the hand's pad axis, ``sy`` across the gripper, ``sz``
#: height); the held-out bottle is another shape.
CONTAINER_FAMILY = TemplateFamily(
    name="containers",
    params=(TemplateParam("shape", choices=("box",)),
            TemplateParam("sx", 0.05, 0.09, 0.001, unit="m"),
            TemplateParam("sy", 0.028, 0.05, 0.001, unit="m"),
            TemplateParam("sz", 0.02, 0.035, 0.001, unit="m"),
            TemplateParam("mass", 0.02, 0.07, 0.005, unit="kg")),
    describe=describe_container, build=build_container, min_distance=0.15,
    description="pill box size (along the pads, across the gripper, height) and mass")

def object_dims(template: Template) -> tuple[float, float, float]:
    """(extent along the pad axis, width across the gripper, height) of the object, m."""
    p = template.params
    if p["shape"] == "box":
        return float(p["size"][0]), float(p["size"][1]), float(p["size"][2])
    r, h = float(p["size"][0]), float(p["size"][1])
    return 2 * r, 2 * r, h


def goal_check(record: EpisodeRecord) -> str | None:
    """The object ends in the closed hand, handed over slowly."""
    got = record.achieved
    if not got.get("in_hand"):
        return "the object is not held by the hand at the end"
    if not got.get("slow_approach"):
        return (f"final approach too fast ({got.get('max_near_speed')} m/s > "
                f"{APPROACH_SPEED_LIMIT} m/s within {HAND_RADIUS} m of the hand)")
    return None


class PillHandover(Task):
    """pill_handover: pick a pill box and hand it to a simulated human hand.

    Task Description:
        A small pill box (or bottle) lies on the table; a human hand (two finger pads on a
        slowly drifting wrist, :mod:`clawgym_ros.tasks.human_hand`) waits open beside the
        table. The robot picks the box, carries it to the hand, approaches slowly, holds it
        still in the hand until the hand has closed around it, then releases and retreats;
        the hand then pulls back with the box.

    Randomizations:
        Object pose on the table (x 0.40-0.60, y -0.15-0.10, yaw +-90 deg); the hand's
        presentation point (x 0.48-0.60, y 0.24-0.32, z 0.58-0.64), its pad-axis yaw
        (+-0.6 rad) and its drift (Lissajous, amplitude up to 1.5 cm, 0.06-0.12 Hz); all from
        the env's generator. Templates: pill_box, pill_box_large (train), pill_bottle
        (held out).

    Success Conditions:
        All stages in order; the tool never exceeded 0.06 m/s within 0.15 m of the hand
        before the hand closed; the gripper still held the object when the hand closed; at
        the end the object is pinched by both hand pads within 3 cm of the hand centre and
        no longer touches the gripper.

    Stages:
        ``reach`` (tool at the object, gripper open), ``grasp`` (gripper closed on it),
        ``lift`` (4 cm up), ``approach_hand`` (object within 3 cm of the hand centre after a
        slow approach), ``wait_for_hand`` (hand closed on the object while the gripper still
        holds it), ``release`` (gripper open, the hand holds the object).
    """

    name = TASK
    env_id = ENV_ID
    scene = C.SCENE_TABLETOP
    stages = STAGES
    skills = SKILLS
    grammar = GRAMMAR
    templates = TEMPLATES
    template_families = (CONTAINER_FAMILY,)
    expert = "clawgym_ros.tasks.pill_handover:generate"
    max_contact_force = 150.0

    def goal_check(self) -> Any:
        """:func:`goal_check` (in hand, slow approach)."""
        return goal_check


@dataclasses.dataclass(frozen=True)
class HandoverGoal:
    """An episode's goal: the object, its dimensions and the hand's path."""

    template: str
    dims: tuple[float, float, float]
    path: HandPath

    def to_dict(self) -> dict[str, Any]:
        """``record.goal``."""
        return {"in_hand": True, "slow_approach": True,
                "hand_center": self.path.center.round(4).tolist(),
                "hand_yaw": round(self.path.yaw, 4)}


class HandoverTracker(StageTracker):
    """Stages of pill_handover on the true state (see :class:`PillHandover`).

    The state holds the backend observation plus ``hand_state`` (8,), ``hand_grasp``
    (both pads touch the object), ``gripper_contact`` (a gripper finger touches it),
    ``tool_speed`` (m/s) and ``rest_z`` (object height at rest).
    """

    def __init__(self, goal: HandoverGoal) -> None:
        super().__init__(STAGES)
        self.goal = goal
        self.max_near_speed = 0.0
        self.hand_distance: list[float] = []

    def observe(self, time: float, state: Mapping[str, np.ndarray]) -> None:
        """Track the hand distance and the fastest tool speed near the hand (until the hand
        has closed)."""
        hand = np.asarray(state[OBS_HAND])
        d = float(np.linalg.norm(np.asarray(state[C.OBS_TOOL_POSE])[:3] - hand[:3]))
        self.hand_distance.append(d)
        closed = "wait_for_hand" in self.reached_names
        if d < HAND_RADIUS and not closed:
            self.max_near_speed = max(self.max_near_speed, float(state["tool_speed"][0]))

    def check(self, index: int, state: Mapping[str, np.ndarray]) -> bool:
        """Stage ``index`` on the true state."""
        along, width, height = self.goal.dims
        obj = np.asarray(state[C.OBS_OBJECT_POSES])[0, :3]
        tool = np.asarray(state[C.OBS_TOOL_POSE])[:3]
        grip = float(state[C.OBS_GRIPPER][0])
        held = bool(state["gripper_contact"][0])
        hand = np.asarray(state[OBS_HAND])
        in_hand = float(np.linalg.norm(obj - hand[:3])) < IN_HAND_RADIUS
        name = self.stages[index]
        if name == "reach":
            return (float(np.linalg.norm(tool[:2] - obj[:2])) < 0.015
                    and tool[2] < obj[2] + height / 2 + 0.01 and grip > width + 0.004)
        if name == "grasp":
            return held and grip < width + 0.004
        if name == "lift":
            return held and obj[2] > float(state["rest_z"][0]) + 0.04
        if name == "approach_hand":
            return in_hand and held and self.max_near_speed <= APPROACH_SPEED_LIMIT
        if name == "wait_for_hand":
            return held and bool(state["hand_grasp"][0]) and hand[7] >= 1.0
        return (not held and grip > width + 0.008 and bool(state["hand_grasp"][0])
                and in_hand)

    def stage_distance(self, index: int, state: Mapping[str, np.ndarray]) -> float:
        """Distance (m) to stage ``index``: tool to object (reach, grasp), height still to
        lift, object to the hand (approach_hand, wait_for_hand), gripper opening still
        missing (release)."""
        along, width, height = self.goal.dims
        obj = np.asarray(state[C.OBS_OBJECT_POSES])[0, :3]
        tool = np.asarray(state[C.OBS_TOOL_POSE])[:3]
        grip = float(state[C.OBS_GRIPPER][0])
        name = self.stages[index]
        if name == "reach":
            return (float(np.linalg.norm(tool[:2] - obj[:2])) + max(0.0, width + 0.004 - grip)
                    + max(0.0, float(tool[2] - obj[2]) - height / 2 - 0.01))
        if name == "grasp":
            return float(np.linalg.norm(tool - obj)) + max(0.0, grip - width - 0.004)
        if name == "lift":
            return max(0.0, float(state["rest_z"][0]) + 0.04 - float(obj[2]))
        if name in ("approach_hand", "wait_for_hand"):
            return float(np.linalg.norm(obj - np.asarray(state[OBS_HAND])[:3]))
        return max(0.0, width + 0.008 - grip)

    def success(self, state: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        """All stages, slow approach, and the object in the hand now."""
        ach = self.achieved(state)
        if self.next_index < len(self.stages):
            return False, f"stopped after stages {self.reached_names}"
        if not ach["slow_approach"]:
            return False, f"approach too fast ({ach['max_near_speed']} m/s near the hand)"
        if not ach["in_hand"]:
            return False, "the hand does not hold the object"
        return True, ""

    def achieved(self, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """In hand now, slow approach, fastest speed near the hand."""
        obj = np.asarray(state[C.OBS_OBJECT_POSES])[0, :3]
        hand = np.asarray(state[OBS_HAND])
        in_hand = (bool(state["hand_grasp"][0]) and not bool(state["gripper_contact"][0])
                   and float(np.linalg.norm(obj - hand[:3])) < IN_HAND_RADIUS)
        return {"in_hand": in_hand,
                "slow_approach": self.max_near_speed <= APPROACH_SPEED_LIMIT,
                "max_near_speed": round(self.max_near_speed, 4),
                "hand_center": self.goal.path.center.round(4).tolist(),
                "hand_yaw": round(self.goal.path.yaw, 4)}


class PillHandoverEnv(TaskEnv):
    """Tabletop with one pill object and a simulated human hand (``clawgym/PillHandover-v0``).

    See :class:`PillHandover`. Observations: the tabletop's plus ``hand_state`` = hand
    centre (x, y, z), orientation (w, x, y, z) and closure in [0, 1] (what a perception
    system would report). ``info`` adds ``hand_phase``, ``hand_distance`` (tool to hand
    centre, m) and ``tool_speed`` (m/s). Robot contact with the hand is unintended.

    Args:
        template: fixed template name, or "" for a training template per reset.
        hand: hand geometry and timing.
        **kwargs: :class:`ClawEnv` options.
    """

    task_cls = PillHandover

    def __init__(self, template: str = "", hand: HandConfig | None = None,
                 **kwargs: Any) -> None:
        self.hand_config = hand or HandConfig()
        self.hand: HumanHand | None = None
        self._prev_tool = np.zeros(3)
        self._tool_speed = 0.0
        super().__init__(template=template, **kwargs)

    # ------------------------------------------------------------------ TaskEnv hooks
    def build_scene(self, template: Template) -> S.SceneSpec:
        """The tabletop with the template's object as its only free object."""
        base = S.load_scene(C.SCENE_TABLETOP)
        p = template.params
        size = tuple(p["size"])
        half = size[2] / 2 if p["shape"] == "box" else size[1] / 2
        obj = S.Shape(name=OBJECT, shape=p["shape"], size=size, pos=(0.5, 0.0, 0.40 + half),
                      rgba=(0.95, 0.95, 0.98, 1.0), mass=float(p["mass"]), friction=1.2,
                      randomize=S.Randomize(**OBJECT_RANGE))
        return dataclasses.replace(base, objects=(obj,))

    def edit_spec(self, spec: Any, template: Template) -> None:
        """Add the human hand's mocap bodies."""
        add_hand(spec, self.hand_config)

    def sample_goal(self, rng: np.random.Generator, template: Template) -> HandoverGoal:
        """The hand's path drawn from ``rng``."""
        path = HandPath.sample(rng, HAND_CENTER_LOW, HAND_CENTER_HIGH, HAND_YAW,
                               self.hand_config)
        return HandoverGoal(template.name, object_dims(template), path)

    def after_reset(self, rng: np.random.Generator) -> None:
        """Create the hand and put its bodies at their start poses."""
        goal: HandoverGoal = self.goal
        self.hand = HumanHand(goal.path, goal.dims[0], self.hand_config)
        self._ids()
        self._place_hand(teleport=True)
        self._rest_z = float(self.backend.object_poses()[OBJECT][2])
        self._prev_tool = self.backend.tool_pose()[:3].copy()
        self._tool_speed = 0.0

    def make_tracker(self, goal: HandoverGoal) -> HandoverTracker:
        """A fresh tracker for ``goal``."""
        return HandoverTracker(goal)

    # ------------------------------------------------------------------ contacts and hand
    def _ids(self) -> None:
        m = self.backend.model
        self._mocap = [int(m.body_mocapid[name_index(m, "body", n)])
                       for n in (HAND_BODY, *(f"{f}_target" for f in FINGER_BODIES))]
        self._pad_qpos = [int(m.jnt_qposadr[m.joint(f"{f}_joint").id]) for f in FINGER_BODIES]
        self._pad_geoms = [name_index(m, "geom", n) for n in FINGER_BODIES]
        self._obj_geom = int(self.backend.index.object_geoms[0])
        fingers = [name_index(m, "body", n) for n in ("gripper_left_finger",
                                                       "gripper_right_finger")]
        self._finger_geoms = {g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in fingers}
        self._obj_dof = self.backend.index.object_dof

    def _place_hand(self, teleport: bool = False) -> None:
        """Move the mocap targets (and, on reset, the welded pads onto them)."""
        assert self.hand is not None
        d = self.backend.data
        a, b = self.hand.pad_positions()
        for mid, pos in zip(self._mocap, (self.hand.position, a, b), strict=True):
            d.mocap_pos[mid] = pos
            d.mocap_quat[mid] = self.hand.quat
        if teleport:
            for adr, pos in zip(self._pad_qpos, (a, b), strict=True):
                d.qpos[adr:adr + 3] = pos
                d.qpos[adr + 3:adr + 7] = self.hand.quat

    def _touches(self) -> tuple[bool, bool]:
        """(both hand pads touch the object, a gripper finger touches it)."""
        d = self.backend.data
        pads = [False, False]
        grip = False
        for c in d.contact[:d.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            if self._obj_geom not in (g1, g2) or c.dist > 0.0:
                continue
            other = g2 if g1 == self._obj_geom else g1
            if other == self._pad_geoms[0]:
                pads[0] = True
            elif other == self._pad_geoms[1]:
                pads[1] = True
            elif other in self._finger_geoms:
                grip = True
        return pads[0] and pads[1], grip

    def true_state(self) -> dict[str, np.ndarray]:
        """Backend observation plus the hand and contact signals the tracker reads."""
        obs = self.backend.observation(cameras=())
        return self._extend(obs)

    def _extend(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        hand_grasp, grip = self._touches()
        obs[OBS_HAND] = (self.hand.state_vector() if self.hand is not None
                         else np.zeros(8))
        obs["hand_grasp"] = np.array([float(hand_grasp)])
        obs["gripper_contact"] = np.array([float(grip)])
        obs["tool_speed"] = np.array([self._tool_speed])
        obs["rest_z"] = np.array([getattr(self, "_rest_z", 0.0)])
        return obs

    # ------------------------------------------------------------------ spaces and API
    def _observation_space(self) -> spaces.Dict:
        items = dict(super()._observation_space().spaces)
        items[OBS_HAND] = spaces.Box(-np.inf, np.inf, (8,), np.float64)
        return spaces.Dict(items)

    def before_physics(self, action: Mapping[str, Any]) -> None:
        """Move the hand (it reacts to the object and the grip before the robot's step)."""
        assert self.hand is not None
        b = self.backend
        _, grip = self._touches()
        obj_pos = b.object_poses()[OBJECT][:3]
        obj_speed = float(np.linalg.norm(b.data.qvel[self._obj_dof][:3]))
        self.hand.update(b.time, b.control_dt, obj_pos, obj_speed, grip)
        self._place_hand()

    def after_physics(self) -> None:
        """Measure the tool speed over the step."""
        tool = self.backend.tool_pose()[:3]
        self._tool_speed = float(np.linalg.norm(tool - self._prev_tool)) / \
            self.backend.control_dt
        self._prev_tool = tool.copy()

    def step_info(self, info: dict[str, Any], state: Mapping[str, np.ndarray]) -> None:
        """Add ``hand_phase``, ``hand_distance`` and ``tool_speed``."""
        info.update(self._hand_info(state))

    def _hand_info(self, obs: Mapping[str, np.ndarray]) -> dict[str, Any]:
        assert self.hand is not None
        tool = np.asarray(obs[C.OBS_TOOL_POSE])[:3]
        return {"hand_phase": self.hand.phase,
                "hand_distance": float(np.linalg.norm(tool - self.hand.position)),
                "tool_speed": self._tool_speed}


# --- expert ----------------------------------------------------------------------------------


def tool_rotation(yaw: float) -> np.ndarray:
    """Top-down tool orientation (z down) with its x axis at ``yaw``."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])


class ArmServo:
    """Joint commands for the arm: IK joint moves (min-jerk) and a resolved-rate Cartesian
    servo (damped least squares on the site Jacobian) for straight, slow tool motions.

    The servo integrates its own joint command (kinematics on a scratch copy of the data),
    which the position + velocity actuators track.

    Args:
        model: the env backend's model.
        q0: current arm joints.
        seed: IK restart seed.
    """

    def __init__(self, model: Any, q0: np.ndarray, seed: int) -> None:
        self.model = model
        self.physics = MujocoPhysics(model)
        self.data = self.physics.data
        self.ik = IkSolver(model, C.ARM_JOINTS, C.FRAME_TOOL,
                           IkConfig(position_tolerance=0.001, orientation_tolerance=0.01,
                                    attempts=8, timeout=2.0), seed=seed)
        self.site = name_index(model, "site", C.FRAME_TOOL)
        self.qadr = np.array([model.jnt_qposadr[model.joint(n).id] for n in C.ARM_JOINTS])
        self.dadr = np.array([model.jnt_dofadr[model.joint(n).id] for n in C.ARM_JOINTS])
        self.lower = model.jnt_range[[model.joint(n).id for n in C.ARM_JOINTS], 0]
        self.upper = model.jnt_range[[model.joint(n).id for n in C.ARM_JOINTS], 1]
        self.q = np.asarray(q0, dtype=float).copy()

    def fk(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tool position and rotation at ``q``."""
        self.data.qpos[self.qadr] = q
        self.physics.kinematics(com=True)
        return (self.data.site_xpos[self.site].copy(),
                self.data.site_xmat[self.site].reshape(3, 3).copy())

    def solve(self, pos: np.ndarray, rot: np.ndarray) -> np.ndarray | None:
        """IK for a tool pose seeded with the current command."""
        res = self.ik.solve(Pose(tuple(pos), tuple(mat_to_quat(rot))), seed=self.q)
        return res.q if res.success else None

    def joint_profile(self, goal: np.ndarray, dt: float, max_speed: float = 0.8
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Min-jerk joint motion from the command to ``goal``: [(q, dq)] per control step."""
        start = self.q.copy()
        delta = goal - start
        duration = max(0.6, 1.875 * float(np.max(np.abs(delta))) / max_speed)
        n = int(math.ceil(duration / dt))
        out = []
        for i in range(1, n + 1):
            s = i / n
            pos = 10 * s**3 - 15 * s**4 + 6 * s**5
            vel = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
            out.append((start + delta * pos, delta * vel))
        self.q = goal.copy()
        return out

    def servo(self, pos_d: np.ndarray, rot_d: np.ndarray, vel_d: np.ndarray, dt: float,
              gain: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
        """One resolved-rate step toward (pos_d, rot_d) with feed-forward ``vel_d``."""
        pos, rot = self.fk(self.q)
        err_p = pos_d - pos
        err_r = 0.5 * sum(np.cross(rot[:, i], rot_d[:, i]) for i in range(3))
        twist = np.concatenate([vel_d + gain * err_p, gain * err_r])
        jp, jr = self.physics.site_jacobian(self.site)
        jac = np.vstack([jp[:, self.dadr], jr[:, self.dadr]])
        lam = 1e-3
        dq = jac.T @ np.linalg.solve(jac @ jac.T + lam * np.eye(6), twist)
        dq = np.clip(dq, -1.5, 1.5)
        self.q = np.clip(self.q + dq * dt, self.lower, self.upper)
        return self.q.copy(), dq


@dataclasses.dataclass(frozen=True)
class ExpertConfig:
    """Speeds (m/s), heights (m) and timeouts (s) of the handover expert."""

    pregrasp_height: float = 0.10
    descend_speed: float = 0.08
    lift_height: float = 0.12
    lift_speed: float = 0.10
    standoff: float = 0.18
    approach_speed: float = 0.03
    wait_timeout_s: float = 12.0
    retreat_distance: float = 0.10
    retreat_speed: float = 0.04
    settle_s: float = 3.0
    squeeze: float = 0.010


def generate(spec: EpisodeSpec, config: ExpertConfig | None = None) -> EpisodeRecord:
    """Run the handover expert for one episode and record it.

    Options (``spec.options``): ``fault``: ``"early_release"`` (open the gripper as soon
    as the object is in the hand, before the hand closes) or ``"fast_approach"`` (approach
    the hand at 0.25 m/s), to test that sign-off rejects them; ``perturbation`` (family ->
    config overrides).

    Returns:
        The record; ``achieved["hand_distance"]`` and ``achieved["tool_speed"]`` are series
        at 20 Hz (tool to hand centre, m; tool speed, m/s) for the evaluator.
    """
    cfg = config or ExpertConfig()
    template = PillHandover().resolve_template(spec.template,
                                               np.random.default_rng(spec.seed)).name
    with spec_env(ENV_ID, spec, template) as env:
        return _HandoverRun(env, spec, template, cfg).run()


class _HandoverRun:
    """One expert episode: motion primitives over the env (every control step recorded, with
    the hand distance and tool speed series) and the skills in order (:meth:`run`)."""

    def __init__(self, env: Any, spec: EpisodeSpec, template: str, cfg: ExpertConfig) -> None:
        self.obs, _, self.rec = start_episode(env, spec, template,
                                              C.ARM_JOINTS + C.GRIPPER_JOINTS)
        self.env, self.cfg = env, cfg
        self.core: PillHandoverEnv = env.unwrapped
        self.b = self.core.backend
        self.dt = self.b.control_dt
        self.fault = spec.options.get("fault")
        self.servo = ArmServo(self.b.model, self.obs[C.OBS_JOINT_POS], seed=spec.seed % (2**31))
        self.grip = float(S.GRIPPER_MAX_WIDTH)
        self.series: dict[str, list[float]] = {"t": [], "d": [], "v": []}

    def run(self) -> EpisodeRecord:
        """pick (pregrasp, descend, grasp, lift) -> the hand (standoff, approach, wait) ->
        release and retreat; a failed skill ends the sequence."""
        if self._pick() and self._to_hand():
            self._release()
        core = self.core
        state = core.true_state()
        success, reason = core.tracker.success(state)
        achieved = core.tracker.achieved(state)
        times = np.asarray(self.series["t"])
        achieved["hand_distance"] = np.round(resample(times, np.asarray(self.series["d"]),
                                                      SERIES_RATE_HZ), 4).tolist()
        achieved["tool_speed"] = np.round(resample(times, np.asarray(self.series["v"]),
                                                   SERIES_RATE_HZ), 4).tolist()
        return self.rec.finish(success=success, reason=reason, goal=core.goal_dict(),
                               achieved=achieved)

    # ------------------------------------------------------------------ skills
    def _pick(self) -> bool:
        cfg, b = self.cfg, self.b
        _, width, height = self.core.goal.dims
        obj, yaw = self.object_pose()
        tool_yaw = _near_yaw(yaw, self.servo.fk(self.servo.q)[1])
        rot = tool_rotation(tool_yaw)
        table_z = obj[2] - height / 2
        grasp_z = max(obj[2] + height / 2 - 0.012, table_z + 0.023)
        t0 = b.time
        ok = self.joint_move(np.array([obj[0], obj[1], grasp_z + cfg.pregrasp_height]), rot)
        self.skill("move_to", {"target": "pregrasp", "xyz": _r(obj[:2])}, t0, ok)
        if ok:
            t0 = b.time
            ok = self.line(lambda: (np.array([obj[0], obj[1], grasp_z]), rot),
                           cfg.descend_speed)
            self.hold(0.2)
            self.skill("descend", {"z": round(grasp_z, 4)}, t0, ok)
        if ok:
            t0 = b.time
            # squeeze through the finger position actuators: ~2000 N/m x 5 mm per finger
            self.gripper_to(max(0.0, width - cfg.squeeze), 0.5)
            self.hold(0.3)
            ok = "grasp" in self.core.tracker.reached_names
            self.skill("grasp", {"width": round(width, 4)}, t0, ok)
        if ok:
            t0 = b.time
            # straight up to the standoff height: the transfer then stays clear of the hand
            hand0 = np.asarray(self.obs[OBS_HAND])
            top = np.array([obj[0], obj[1], max(grasp_z + cfg.lift_height,
                                                hand0[2] + cfg.standoff)])
            ok = self.line(lambda: (top, rot), cfg.lift_speed)
            self.skill("lift", {"height": cfg.lift_height}, t0, ok)
        return ok

    def _to_hand(self) -> bool:
        cfg, b, servo = self.cfg, self.b, self.servo
        # object offset in the tool frame, measured now that it is held
        _, rot_t = servo.fk(servo.q)
        tool_now = b.tool_pose()
        rot_now = quat_to_mat(tool_now[3:7])
        offset = rot_now.T @ (self.object_pose()[0] - tool_now[:3])
        hand = np.asarray(self.obs[OBS_HAND])
        hand_yaw = _near_yaw(2 * math.atan2(hand[6], hand[3]), rot_t)
        hand_rot = tool_rotation(hand_yaw)
        # come down into the open hand from above: the pads sit on the hand's x axis
        standoff = hand[:3] + np.array([0.0, 0.0, cfg.standoff])
        t0 = b.time
        ok = self.joint_move(standoff - hand_rot @ offset, hand_rot)
        self.skill("move_to", {"target": "hand_standoff", "xyz": _r(standoff)}, t0, ok)

        def at_hand() -> tuple[np.ndarray, np.ndarray]:
            h = np.asarray(self.obs[OBS_HAND])
            return h[:3] - hand_rot @ offset, hand_rot

        if ok:
            t0 = b.time
            speed = 0.25 if self.fault == "fast_approach" else cfg.approach_speed
            ok = self.line(at_hand, speed, tol=0.003, timeout=20.0)
            self.skill("approach_hand", {"speed": speed}, t0, ok)
        if ok:
            t0 = b.time
            if self.fault == "early_release":
                ok = True
            else:
                ok = self.line(at_hand, cfg.approach_speed, timeout=cfg.wait_timeout_s,
                               until=lambda: float(np.asarray(self.obs[OBS_HAND])[7]) >= 1.0)
                self.hold(0.3)
            self.skill("wait_for_hand", {"timeout_s": cfg.wait_timeout_s}, t0, ok)
        return ok

    def _release(self) -> None:
        cfg, b, servo = self.cfg, self.b, self.servo
        width = self.core.goal.dims[1]
        t0 = b.time
        self.gripper_to(min(S.GRIPPER_MAX_WIDTH - 0.006, width + 0.016), 0.4)
        self.hold(0.3)
        self.skill("release", {"width": round(self.grip, 4)}, t0)
        t0 = b.time
        pos_t, rot_t = servo.fk(servo.q)
        back = pos_t + np.array([0.0, 0.0, cfg.retreat_distance])
        ok = self.line(lambda: (back, rot_t), cfg.retreat_speed)
        self.skill("retreat", {"distance": cfg.retreat_distance}, t0, ok)
        self.hold(cfg.settle_s)

    def skill(self, name: str, args: dict[str, Any], start: float,
              ok: bool | None = None) -> None:
        """Record a skill call from ``start`` to now (with its outcome when ``ok`` is given)."""
        outcome = {} if ok is None else {"outcome": C.SKILL_OK if ok else C.SKILL_FAILED}
        self.rec.skill(name, args, start=start, end=self.b.time, **outcome)

    # ------------------------------------------------------------------ motion primitives
    def act(self, q: np.ndarray, dq: np.ndarray) -> None:
        """One control step with joint target ``q``, velocity ``dq`` and the gripper width."""
        b, rec = self.b, self.rec
        action = {C.ACT_JOINT_TARGET: q, C.ACT_JOINT_VEL: dq,
                  C.ACT_GRIPPER: np.array([self.grip])}
        prev = self.obs
        o, _, _, _, inf = self.env.step(action)
        _, qj, dqj, tau = b.joint_state()
        rec.step(b.time, obs=prev, action=action, joint_position=qj, joint_velocity=dqj,
                 joint_effort=tau, contact_force=float(inf.get("contact_force", 0.0)),
                 collision=bool(inf.get("collision", False)),
                 energy=float(b.data.energy.sum()))
        for name in inf.get("new_stages", []):
            rec.stage(name, b.time)
        self.obs = o
        self.series["t"].append(b.time)
        self.series["d"].append(float(inf["hand_distance"]))
        self.series["v"].append(float(inf["tool_speed"]))

    def hold(self, seconds: float) -> None:
        for _ in range(int(round(seconds / self.dt))):
            self.act(self.servo.q.copy(), np.zeros(7))

    def gripper_to(self, target: float, seconds: float) -> None:
        """Ramp the commanded width (finger speed well under the 0.2 m/s limit)."""
        start = self.grip
        n = max(1, int(round(seconds / self.dt)))
        for i in range(1, n + 1):
            self.grip = start + (target - start) * i / n
            self.act(self.servo.q.copy(), np.zeros(7))

    def joint_move(self, pos: np.ndarray, rot: np.ndarray) -> bool:
        goal = self.servo.solve(pos, rot)
        if goal is None:
            return False
        for q, dq in self.servo.joint_profile(goal, self.dt):
            self.act(q, dq)
        return True

    def line(self, target_fn: Any, speed: float, tol: float = 0.002, timeout: float = 15.0,
             until: Any = None) -> bool:
        """Servo the tool toward target_fn() -> (pos, rot) at <= speed until within tol."""
        b, servo, dt = self.b, self.servo, self.dt
        t_end = b.time + timeout
        cmd_pos = servo.fk(servo.q)[0]
        while b.time < t_end:
            pos_d, rot_d = target_fn()
            err = pos_d - cmd_pos
            dist = float(np.linalg.norm(err))
            if until is None and dist < tol:
                return True
            if until is not None and until():
                return True
            step = min(dist, speed * dt)
            direction = err / dist if dist > 1e-9 else np.zeros(3)
            cmd_pos = cmd_pos + direction * step
            q, dq = servo.servo(cmd_pos, rot_d, direction * step / dt, dt)
            self.act(q, dq)
        return False

    def object_pose(self) -> tuple[np.ndarray, float]:
        pose = np.asarray(self.obs[C.OBS_OBJECT_POSES])[0]
        w, x, y, z = pose[3:7]
        return pose[:3].copy(), math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _near_yaw(yaw: float, rot: np.ndarray) -> float:
    """``yaw`` or ``yaw + pi`` (a symmetric grasp), whichever is closer to the tool's x axis."""
    current = math.atan2(rot[1, 0], rot[0, 0])
    best = min((yaw, yaw + math.pi, yaw - math.pi),
               key=lambda y: abs(math.remainder(y - current, 2 * math.pi)))
    return float(math.remainder(best, 2 * math.pi))


def _r(values: Any) -> list[float]:
    return [round(float(v), 4) for v in values]
