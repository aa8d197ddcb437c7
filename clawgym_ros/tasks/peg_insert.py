"""peg_insert: precision assembly, a peg into a hole with <= 1 mm clearance
(``clawgym/PegInsert-v0``); task class, tracker, env and expert (:func:`generate`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.tasks.base import StageTracker, Task, Template
from clawgym_ros.tasks.expert import ArmExpert, ExpertError, as_pose, run_expert, top_down_quat
from clawgym_ros.tasks.world import TaskEnv

STAGES = ("reach", "grasp", "lift", "align", "insert", "release")
SKILLS = ("move_to", "approach", "grasp", "lift", "align", "insert", "release", "retreat")
GRAMMAR = "move_to approach grasp lift move_to align insert release retreat"
#: A recovery segment from a failure state (:meth:`PegExpert.recover`): a peg held far from
#: the hole is lifted clear (when low) and carried to it; one held near the hole axis is
#: lifted off the block (when resting on it) and aligned where it is; a peg standing free is
#: picked again (after letting go and backing off if the gripper is closed); an inserted peg
#: still held is released.
RECOVERY = ("(release retreat)? (move_to approach grasp)? lift? move_to align insert release "
            "retreat | lift? align insert release retreat | release retreat")
#: Largest tilt (rad) of a peg the recovery expert takes on: held (it would jam in the hole)
#: or standing free (no grasp from above).
RECOVERY_MAX_TILT = math.radians(5)
#: Height of the peg's bottom above the block's top after a recovery's lift (m).
RECOVERY_CLEARANCE = 0.04
#: A held peg this close to the hole axis (m) is aligned again where it is (after lifting it
#: off the block's top to :data:`RECOVERY_GAP` if it rests there), not carried anew.
RECOVERY_NEAR = 0.01
RECOVERY_GAP = 0.004
TABLE_Z = 0.40
OBJECTS = ("peg", "hole_block")
PEG_LENGTH = 0.08
PEG_WIDTH = 0.02            # diameter / across flats (m)
CLEARANCE = 0.0005          # gap per side along the tightest axis (total 1 mm)
HOLE_DEPTH = 0.035
BLOCK_SIZE = 0.07           # outer side of the hole block (m)
BLOCK_MASS = 3.0
#: Finger friction of a new tool; wear scales it down with the episode index (see tool_wear).
FINGER_FRICTION = 1.5
WEAR_FLOOR, WEAR_EPISODES = 0.5, 5000.0
PEG_REGION = ((0.40, 0.52), (-0.18, -0.04))
HOLE_REGION = ((0.45, 0.58), (0.06, 0.18))


def tool_wear(episode_index: int) -> float:
    """Finger friction factor after ``episode_index`` episodes of use:
    ``WEAR_FLOOR + (1 - WEAR_FLOOR) * exp(-episode_index / WEAR_EPISODES)`` (1.0 new, 0.5
    worn out; 0.82 after 2,000 episodes)."""
    return WEAR_FLOOR + (1.0 - WEAR_FLOOR) * math.exp(-max(0, episode_index) / WEAR_EPISODES)


def _hole_size(shape: str) -> tuple[float, float]:
    """(x, y) inner size of the hole for a peg shape (clearance on the tightest axis)."""
    if shape == "hex":
        corners = PEG_WIDTH / math.cos(math.pi / 6)
        return corners + 2 * CLEARANCE, PEG_WIDTH + 2 * CLEARANCE
    return PEG_WIDTH + 2 * CLEARANCE, PEG_WIDTH + 2 * CLEARANCE


class PegInsert(Task):
    """Insert a peg into a hole with at most 1 mm clearance.

    Task Description:
        The arm grasps an upright peg (8 cm long, 2 cm wide) from the table and inserts it
        into the hole of a heavy block (hole 3.5 cm deep; the hole is 1 mm wider than the peg
        along its tightest axis, i.e. 0.5 mm per side). The final pose deviation of the peg
        axis from the hole axis is reported in micrometres. Tool wear: the finger friction of
        episode k is ``1.5 * tool_wear(k)`` (exponential decay to half over ~5,000 episodes).

    Randomizations:
        Template (training: ``round_peg`` cylinder, ``square_peg`` box; held out: ``hex_peg``
        hexagonal prism with a rectangular hole). Peg position uniform in x 0.40..0.52,
        y -0.18..-0.04, yaw uniform; block position uniform in x 0.45..0.58, y 0.06..0.18, yaw
        uniform; finger friction from the episode index (tool wear).

    Success Conditions:
        The peg is released, upright within 5 degrees, inserted at least 90 % of the hole depth,
        with its axis within the hole's clearance (+0.5 mm) of the hole axis.

    Stages:
        reach, grasp, lift, align (peg over the hole, within 2 mm, bottom less than 2 cm above
        the block), insert (depth >= 90 %), release.
    """

    name = C.TASK_PEG_INSERT
    env_id = C.ENV_PEG_INSERT
    stages = STAGES
    skills = SKILLS
    grammar = GRAMMAR
    recovery_grammar = RECOVERY
    templates = (
        Template("round_peg", C.SPLIT_TRAIN, {"shape": "round"}, "cylindrical peg"),
        Template("square_peg", C.SPLIT_TRAIN, {"shape": "square"}, "square peg"),
        Template("hex_peg", C.SPLIT_HELD_OUT, {"shape": "hex"}, "unseen hexagonal peg"),
    )
    expert = "clawgym_ros.tasks.peg_insert:generate"
    goal_tolerance = 0.0
    max_contact_force = 150.0
    arm_expert = True


@dataclasses.dataclass(frozen=True)
class PegGoal:
    """Hole geometry: block top height, inner half sizes, symmetry of the peg."""

    shape: str
    block_top: float
    half_hole: tuple[float, float]
    rest_z: float

    def to_dict(self) -> dict[str, Any]:
        return {"inserted": True, "shape": self.shape}


def _yaw(q: np.ndarray) -> float:
    w, x, y, z = q
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _tilt(q: np.ndarray) -> float:
    w, x, y, z = q
    return math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (x * x + y * y))))


class PegTracker(StageTracker):
    """Stage validators of peg_insert (see :class:`PegInsert`), over the true state."""

    def __init__(self, goal: PegGoal) -> None:
        super().__init__(STAGES)
        self.goal = goal

    def deviation(self, state: Mapping[str, np.ndarray]) -> tuple[float, float]:
        """(lateral deviation of the peg axis from the hole axis in m, insertion depth in m)."""
        peg, block = state[C.OBS_OBJECT_POSES][0], state[C.OBS_OBJECT_POSES][1]
        lateral = float(np.linalg.norm(peg[:2] - block[:2]))
        bottom = peg[2] - PEG_LENGTH / 2
        return lateral, float(self.goal.block_top - bottom)

    def _held(self, state: Mapping[str, np.ndarray]) -> bool:
        width = float(state[C.OBS_GRIPPER][0])
        tool, peg = state[C.OBS_TOOL_POSE][:3], state[C.OBS_OBJECT_POSES][0]
        return 0.004 < width < PEG_WIDTH / math.cos(math.pi / 6) + 0.008 and \
            float(np.linalg.norm(tool - peg[:3])) < PEG_LENGTH / 2 + 0.02

    def _inserted(self, state: Mapping[str, np.ndarray]) -> bool:
        lateral, depth = self.deviation(state)
        return depth >= 0.9 * HOLE_DEPTH and lateral <= CLEARANCE + 0.0005 + \
            (max(self.goal.half_hole) - min(self.goal.half_hole))

    def check(self, index: int, state: Mapping[str, np.ndarray]) -> bool:
        stage = STAGES[index]
        peg = state[C.OBS_OBJECT_POSES][0]
        tool = state[C.OBS_TOOL_POSE][:3]
        width = float(state[C.OBS_GRIPPER][0])
        if stage == "reach":
            return (float(np.linalg.norm(tool[:2] - peg[:2])) <= 0.02 and width >= 0.035
                    and tool[2] <= peg[2] + PEG_LENGTH / 2 + 0.01)
        if stage == "grasp":
            return self._held(state)
        if stage == "lift":
            return self._held(state) and peg[2] >= self.goal.rest_z + 0.03
        if stage == "align":
            lateral, depth = self.deviation(state)
            return self._held(state) and lateral <= 0.002 and -0.02 <= depth
        if stage == "insert":
            return self._inserted(state)
        return width >= 0.035 and self._inserted(state)

    def stage_distance(self, index: int, state: Mapping[str, np.ndarray]) -> float:
        """Distance (m) to stage ``index``: tool to peg (reach, grasp), height still to lift,
        lateral offset from the hole axis plus depth still missing (align, insert), and the
        gripper opening still missing (release)."""
        stage = STAGES[index]
        peg = state[C.OBS_OBJECT_POSES][0]
        tool = state[C.OBS_TOOL_POSE][:3]
        width = float(state[C.OBS_GRIPPER][0])
        if stage == "reach":
            return (float(np.linalg.norm(tool[:2] - peg[:2])) + max(0.0, 0.035 - width)
                    + max(0.0, float(tool[2] - peg[2]) - PEG_LENGTH / 2 - 0.01))
        if stage == "grasp":
            return float(np.linalg.norm(tool - peg[:3]))
        if stage == "lift":
            return max(0.0, self.goal.rest_z + 0.03 - float(peg[2]))
        lateral, depth = self.deviation(state)
        if stage == "align":
            return lateral + max(0.0, -0.02 - depth)
        if stage == "insert":
            return lateral + max(0.0, 0.9 * HOLE_DEPTH - depth)
        return max(0.0, 0.035 - width)

    def success(self, state: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        if len(self.reached) < len(self.stages):
            return False, f"stage {self.stages[len(self.reached)]!r} not reached"
        if not self._inserted(state):
            lateral, depth = self.deviation(state)
            return False, f"peg not inserted (depth {depth * 1000:.1f} mm, lateral " \
                f"{lateral * 1e6:.0f} um)"
        if _tilt(state[C.OBS_OBJECT_POSES][0, 3:]) > math.radians(5):
            return False, "peg tilted"
        return True, ""

    def achieved(self, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
        lateral, depth = self.deviation(state)
        peg, block = state[C.OBS_OBJECT_POSES][0], state[C.OBS_OBJECT_POSES][1]
        return {"inserted": self._inserted(state), "shape": self.goal.shape,
                "deviation_um": round(lateral * 1e6, 1), "depth_mm": round(depth * 1e3, 3),
                "tilt_deg": round(math.degrees(_tilt(peg[3:])), 3),
                "block_xy": [round(float(v), 5) for v in block[:2]]}


class PegInsertEnv(TaskEnv):
    """``clawgym/PegInsert-v0``: a peg and a hole block on the tabletop (no bins)."""

    task_cls = PegInsert

    def build_scene(self, template: Template) -> S.SceneSpec:
        base = S.load_scene(C.SCENE_TABLETOP)
        shape = template.params["shape"]
        if shape == "round":
            peg = S.Shape(name=OBJECTS[0], shape="cylinder", size=(PEG_WIDTH / 2, PEG_LENGTH),
                          pos=(0.45, -0.1, TABLE_Z + PEG_LENGTH / 2), mass=0.05)
        else:
            peg = S.Shape(name=OBJECTS[0], shape="box", size=(PEG_WIDTH, PEG_WIDTH, PEG_LENGTH),
                          pos=(0.45, -0.1, TABLE_Z + PEG_LENGTH / 2), mass=0.05)
        block = S.Shape(name=OBJECTS[1], shape="box", size=(BLOCK_SIZE, BLOCK_SIZE, HOLE_DEPTH),
                        pos=(0.5, 0.1, TABLE_Z + HOLE_DEPTH / 2), mass=BLOCK_MASS,
                        rgba=(0.5, 0.5, 0.55, 1.0))
        return dataclasses.replace(base, bins=(), objects=(peg, block))

    def edit_spec(self, spec: Any, template: Template) -> None:
        from clawgym_ros.sim.world import spec_enum

        box = spec_enum("geom", "box")
        shape = template.params["shape"]
        peg = spec.body(OBJECTS[0])
        if shape == "hex":
            # A regular hexagonal prism (across flats PEG_WIDTH, side PEG_WIDTH / sqrt(3)) as
            # the union of three side x across-flats boxes at 0, 60 and 120 degrees: flats at
            # y = +-PEG_WIDTH / 2, corners on the x axis (the hole's long side). All three
            # boxes must have this size; a box with the half sizes swapped and turned by 60
            # degrees is a box at 150 degrees whose corners stick out 1.5 mm past the flats.
            g = peg.geoms[0]
            g.size = [PEG_WIDTH / (2 * math.sqrt(3)), PEG_WIDTH / 2, PEG_LENGTH / 2]
            for k in (1, 2):
                peg.add_geom(name=f"{OBJECTS[0]}_part{k}", type=box,
                             size=list(g.size), rgba=list(g.rgba), friction=list(g.friction),
                             condim=4, mass=0.0,
                             quat=list(S.rpy_to_quat((0.0, 0.0, k * math.pi / 3))))
        for g in peg.geoms:
            g.solref = [0.004, 1.0]
        block = spec.body(OBJECTS[1])
        old = block.geoms[0]
        rgba, friction = list(old.rgba), list(old.friction)
        spec.delete(old)
        hx, hy = (v / 2 for v in _hole_size(shape))
        half, depth = BLOCK_SIZE / 2, HOLE_DEPTH / 2
        walls = [((hx + half) / 2, 0.0, (half - hx) / 2, half),
                 (-(hx + half) / 2, 0.0, (half - hx) / 2, half),
                 (0.0, (hy + half) / 2, hx, (half - hy) / 2),
                 (0.0, -(hy + half) / 2, hx, (half - hy) / 2)]
        for k, (x, y, sx, sy) in enumerate(walls):
            block.add_geom(name=OBJECTS[1] if k == 0 else f"{OBJECTS[1]}_wall{k}",
                           type=box, size=[sx, sy, depth], pos=[x, y, 0.0],
                           rgba=rgba, friction=friction, condim=4, solref=[0.004, 1.0],
                           mass=BLOCK_MASS / 4)

    def sample_goal(self, rng: np.random.Generator, template: Template) -> PegGoal:
        b = self.backend
        q = b.data.qpos[b.index.object_qpos].reshape(-1, 7).copy()
        for i, region in enumerate((PEG_REGION, HOLE_REGION)):
            q[i, 0], q[i, 1] = rng.uniform(*region[0]), rng.uniform(*region[1])
            q[i, 3:] = S.rpy_to_quat((0.0, 0.0, float(rng.uniform(-math.pi, math.pi))))
        b.data.qpos[b.index.object_qpos] = q.ravel()
        hx, hy = _hole_size(template.params["shape"])
        return PegGoal(template.params["shape"], TABLE_Z + HOLE_DEPTH, (hx / 2, hy / 2),
                       float(q[0, 2]))

    def after_reset(self, rng: np.random.Generator) -> None:
        m = self.backend.model
        index = int(self.reset_options.get("episode_index", 0))
        friction = FINGER_FRICTION * tool_wear(index)
        for name in ("gripper_left_finger_geom0", "gripper_right_finger_geom0"):
            m.geom(name).friction[0] = friction

    def make_tracker(self, goal: PegGoal) -> PegTracker:
        return PegTracker(goal)


def _turn_shape(shape: str) -> str:
    """The shape whose grasp yaw and turn toward the hole the expert uses: a round peg is
    handled as a square one (see :meth:`PegExpert.run`)."""
    return "square" if shape == "round" else shape


def _symmetry(shape: str) -> float:
    return {"round": 0.0, "square": math.pi / 2, "hex": math.pi}[shape]


def _closest(angle: float, period: float) -> float:
    if period <= 0.0:
        return 0.0
    return (angle + period / 2) % period - period / 2


class PegExpert(ArmExpert):
    """Grasp the peg near its top, move above the hole, align (Cartesian), insert with a slow
    final segment (1 cm/s), release, retreat. The in-hand pose of the peg is measured after
    the grasp and compensated in the insertion target."""

    def extra_params(self) -> dict[str, float]:
        return {"tool_wear.friction_factor": tool_wear(self.spec.index)}

    def run(self) -> None:
        if self.snapshot is not None:
            self.recover()
            return
        self.insert_held(self.pick())

    def pick(self) -> float:
        """Grasp the peg near its top and lift it; the grasp's tool yaw (rad)."""
        goal: PegGoal = self.base.goal
        shape = goal.shape
        peg = self.state()[C.OBS_OBJECT_POSES][0]
        peg_yaw = _yaw(peg[3:])
        # The fingers close along the tool's y axis, (sin yaw, -cos yaw): yaw = peg yaw + pi/2
        # closes along the peg's x axis (square: a pair of faces), yaw = peg yaw along its y
        # axis (hex: across the flats; its x axis runs through two corners, a grip there
        # pinches the corners and lets the peg turn in the hand). A round peg is grasped and
        # turned as a square one: its yaw does not matter to the hole, but the observation
        # does not tell the two training pegs apart, so a wrist motion that differs between
        # them cannot be imitated (BC on both: square pegs met the hole 4-43 degrees off;
        # docs/results/2026-12-05-peg-insert-bc.md).
        turn = _turn_shape(shape)
        yaw = _closest(peg_yaw + (math.pi / 2 if turn == "square" else 0.0), math.pi)
        quat = top_down_quat(yaw)
        grasp = np.array([peg[0], peg[1], peg[2] + PEG_LENGTH / 2 - 0.018])
        self.sync_planner()
        with self.skill("move_to", {"target": "pregrasp"}) as s:
            s["planner"] = self.move_joints(self.ik(as_pose(grasp + [0, 0, 0.08], quat)),
                                            gripper=0.05)
        self.sync_planner()
        with self.skill("approach", {}):
            self.move_cartesian(as_pose(grasp, quat))
        with self.skill("grasp", {}) as s:
            s["width"] = round(self.gripper(0.0, settle=0.15), 4)
        with self.skill("lift", {}):
            self.move_cartesian(as_pose(grasp + [0, 0, 0.10], quat), check=False)
        return yaw

    def insertion_frame(self, yaw: float) -> tuple[np.ndarray, Any]:
        """The tool orientation that turns the held peg (grasped at tool yaw ``yaw``) to the
        hole, and ``tool_for(h)``: the tool position that puts the peg's bottom ``h`` above
        the block's top on the hole axis (the in-hand pose measured now)."""
        goal: PegGoal = self.base.goal
        turn = _turn_shape(goal.shape)
        state = self.state()
        peg, block = state[C.OBS_OBJECT_POSES][0], state[C.OBS_OBJECT_POSES][1]
        tool = state[C.OBS_TOOL_POSE]
        r_tool = _rot(tool[3:])
        offset = r_tool.T @ (peg[:3] - tool[:3])
        delta = _closest(_yaw(block[3:]) - _yaw(peg[3:]), _symmetry(turn))
        yaw_t = _closest(yaw + delta, math.pi)
        if abs(yaw_t - (yaw + delta)) > 1e-6:
            yaw_t = yaw + delta                      # keep the exact relative rotation
        quat_t = top_down_quat(yaw_t)
        r_t = _rot(quat_t)

        def tool_for(bottom_above_top: float) -> np.ndarray:
            peg_pos = np.array([block[0], block[1],
                                goal.block_top + bottom_above_top + PEG_LENGTH / 2])
            return peg_pos - r_t @ offset

        return quat_t, tool_for

    def insert_held(self, yaw: float) -> None:
        """From a lifted peg held at tool yaw ``yaw``: above the hole, align, insert, release,
        retreat."""
        quat_t, tool_for = self.insertion_frame(yaw)
        with self.skill("move_to", {"target": "above_hole"}) as s:
            self.planner.detach_object()
            self.sync_planner()
            self.planner.attach_object(OBJECTS[0])
            s["planner"] = self.move_joints(self.ik(as_pose(tool_for(0.04), quat_t),
                                                    check=False))
        self.align_and_insert(quat_t, tool_for)

    def align_and_insert(self, quat_t: np.ndarray, tool_for: Any) -> None:
        """Down to 4 mm above the hole, correct the peg-to-hole error (closed loop), insert
        slowly, release, retreat."""
        with self.skill("align", {}) as s:
            self.move_cartesian(as_pose(tool_for(0.004), quat_t), check=False,
                                tool_speed=0.05)
            self.hold(0.2)
            # Closed-loop correction: shift the tool by the measured peg-to-hole error
            # (tracking and IK errors are a few mm; the clearance is 0.5 mm per side).
            for _ in range(3):
                st = self.state()
                err = st[C.OBS_OBJECT_POSES][1][:2] - st[C.OBS_OBJECT_POSES][0][:2]
                if float(np.linalg.norm(err)) < 1e-4:
                    break
                shift = np.array([err[0], err[1], 0.0])
                target = self.planner.checker.tool_pose(self.q_cmd)[0] + shift
                self.move_cartesian(as_pose(target, quat_t), check=False, tool_speed=0.02)
                self.hold(0.2)
            st = self.state()
            s["error_um"] = round(float(np.linalg.norm(
                st[C.OBS_OBJECT_POSES][1][:2] - st[C.OBS_OBJECT_POSES][0][:2])) * 1e6, 1)
        with self.skill("insert", {"speed_m_s": 0.01}):
            start = self.planner.checker.tool_pose(self.q_cmd)[0]
            self.move_cartesian(as_pose(start - [0, 0, HOLE_DEPTH + 0.001], quat_t),
                                check=False, tool_speed=0.01)
            self.hold(0.2)
            _, depth = self.base.tracker.deviation(self.state())  # type: ignore[union-attr]
            if depth < 0.9 * HOLE_DEPTH:
                raise ExpertError(f"peg jammed at depth {depth * 1000:.1f} mm")
        self.release_and_retreat(tool_for(0.0), quat_t)

    def release_and_retreat(self, tool: np.ndarray, quat: np.ndarray) -> None:
        """Open the gripper, then move the tool 6 cm up from ``tool`` (a position)."""
        with self.skill("release", {}):
            self.gripper(0.05, settle=0.1)
        self.planner.detach_object()
        with self.skill("retreat", {}):
            self.move_cartesian(as_pose(tool + [0, 0, 0.06], quat), check=False)

    def recover(self) -> None:
        """Finish the task from a restored failure state.

        Peg held and inserted: release and retreat. Peg held within :data:`RECOVERY_NEAR` of
        the hole axis (typically pressed on the block's top beside the hole): lift it straight
        up until its bottom is :data:`RECOVERY_GAP` above the block if it is lower, then the
        expert's own alignment from there (the closed-loop correction), insert, release,
        retreat. Peg held farther away: lift it until its bottom is
        :data:`RECOVERY_CLEARANCE` above the block if it is lower, then the normal insertion
        (above the hole, align, insert, release, retreat).
        Peg not held but standing: open and back off if the gripper is closed, then the whole
        task.

        Raises:
            ExpertError: the peg is tilted (held or standing) or a motion fails.
        """
        state = self.state()
        tracker: PegTracker = self.base.tracker  # type: ignore[assignment]
        peg, tool = state[C.OBS_OBJECT_POSES][0], state[C.OBS_TOOL_POSE]
        yaw = _yaw(tool[3:7])                     # the tool's x axis: top_down_quat's yaw
        quat = top_down_quat(yaw)
        tilt = _tilt(peg[3:])
        self.sync_planner()                       # the planner still has the last episode
        self.planner.detach_object()
        if tracker._held(state):
            if tilt > RECOVERY_MAX_TILT:
                raise ExpertError(f"peg tilted {math.degrees(tilt):.1f} degrees in the hand")
            self.gripper_cmd = 0.0                # keep squeezing, as after a grasp
            if tracker._inserted(state):
                self.release_and_retreat(tool[:3], quat)
                return
            self.planner.attach_object(OBJECTS[0])
            lateral, depth = tracker.deviation(state)
            gap = -depth                          # the peg's bottom above the block's top
            near = lateral <= RECOVERY_NEAR
            rise = (RECOVERY_GAP if near else RECOVERY_CLEARANCE) - gap
            if rise > 0.001:
                with self.skill("lift", {"height": round(float(tool[2]) + rise, 4)}):
                    self.move_cartesian(as_pose(tool[:3] + [0.0, 0.0, rise], quat),
                                        check=False)
            if near:
                # Where the expert itself would be during its alignment: carry on from here.
                self.align_and_insert(*self.insertion_frame(yaw))
            else:
                self.insert_held(yaw)
            return
        if tilt > RECOVERY_MAX_TILT:
            raise ExpertError(f"peg tipped over ({math.degrees(tilt):.1f} degrees): no grasp "
                              "from above")
        if float(state[C.OBS_GRIPPER][0]) < 0.045:
            self.release_and_retreat(tool[:3], quat)
        self.insert_held(self.pick())


def _rot(quat: np.ndarray) -> np.ndarray:
    w, x, y, z = quat
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def generate(spec: EpisodeSpec) -> EpisodeRecord:
    """The peg_insert expert: one episode for ``spec`` (deterministic in the spec)."""
    return run_expert(PegExpert(spec, PegInsert(), PegInsertEnv), PegExpert.run)
