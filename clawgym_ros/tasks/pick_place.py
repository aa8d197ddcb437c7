"""pick_place: pick an object and place it in a target bin (``clawgym/PickPlace-v0``).

The task class (:class:`PickPlace`), its goal and stage tracker, the task env and the
planner-driven expert (:func:`generate`). See the class docstring for the task itself.
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
from clawgym_ros.tasks.expert import (
    ArmExpert,
    ExpertError,
    as_pose,
    run_expert,
    top_down_quat,
)
from clawgym_ros.tasks.families import TemplateFamily, TemplateParam
from clawgym_ros.tasks.world import TaskEnv

ENV_ID = C.ENV_PICK_PLACE
STAGES = ("reach", "grasp", "lift", "transport", "place", "release")
SKILLS = ("move_to", "approach", "grasp", "lift", "place", "release", "retreat")
#: One placement: reach the object, grasp, lift, carry (one or more moves), place, release.
PLACEMENT = "move_to approach grasp lift move_to+ place release retreat"
#: A recovery segment (one placement) from a failure state: let go and back off if the
#: gripper is closed on nothing useful, pick again unless the object is still held, carry on.
RECOVERY = "(release retreat)? (move_to approach grasp)? lift move_to+ place release retreat"
TABLE_Z = 0.40
#: Names of the two free objects every template has (the manipulated one first).
OBJECTS = ("object_a", "object_b")
DEFAULT_BINS = ((0.50, 0.33), (0.50, -0.33))
SIDE_BINS = ((0.40, 0.33), (0.62, 0.33))
BIN_INNER, BIN_HEIGHT, BIN_WALL = 0.16, 0.06, 0.01
OBJECT_REGION = ((0.40, 0.60), (-0.16, 0.16))
MIN_SEPARATION = 0.13
#: Shapes: (shape, size) in scene-spec units (box full extents; cylinder radius, length; a torus
#: is a ring of capsules: ring radius, tube radius).
SHAPES: dict[str, tuple[str, tuple[float, ...], float]] = {
    "cube": ("box", (0.045, 0.045, 0.045), 0.10),
    "cube_small": ("box", (0.04, 0.04, 0.04), 0.08),
    "cylinder": ("cylinder", (0.022, 0.07), 0.08),
    "small_box": ("box", (0.03, 0.05, 0.04), 0.06),
    "distractor": ("cylinder", (0.02, 0.05), 0.05),
    "torus": ("torus", (0.032, 0.011), 0.06),
    # Held out, beyond the procedural family's declared sizes (OBJECT_FAMILY): a box 1 cm
    # longer than its largest, a stick 5 mm thinner than its thinnest.
    "long_box": ("box", (0.07, 0.04, 0.045), 0.10),
    "thin_box": ("box", (0.02, 0.02, 0.05), 0.05),
}
TORUS_SEGMENTS = 10


def shape_spec(key: Any) -> tuple[str, tuple[float, ...], float]:
    """(shape, size, mass) of a template's object: a :data:`SHAPES` key, or an inline
    ``[shape, size, mass]`` (procedural templates, :data:`OBJECT_FAMILY`)."""
    if isinstance(key, str):
        return SHAPES[key]
    shape, size, mass = key
    return str(shape), tuple(float(v) for v in size), float(mass)


def _template(name: str, split: str, obj: str, second: str = "distractor",
              bins: tuple = DEFAULT_BINS, placements: int = 1, description: str = "") -> Template:
    return Template(name, split, {"object": obj, "second": second, "bins": [list(b) for b in bins],
                                  "placements": placements}, description)


BIN_LAYOUTS = {"opposite": DEFAULT_BINS, "side": SIDE_BINS}


def describe_template(template: Template) -> dict[str, Any]:
    """The :data:`OBJECT_FAMILY` parameter values of a pick_place template (a torus: its
    ring's outer diameter and tube thickness; unlisted bin layouts: ``other``)."""
    prm = template.params
    if "values" in prm:
        return dict(prm["values"])
    shape, size, mass = shape_spec(prm["object"])
    if shape == "box":
        sx, sy, sz = size
    elif shape == "cylinder":
        sx = sy = 2 * size[0]
        sz = size[1]
    else:
        sx = sy = 2 * (size[0] + size[1])
        sz = 2 * size[1]
    bins = [tuple(b) for b in prm["bins"]]
    layout = next((k for k, v in BIN_LAYOUTS.items() if [tuple(b) for b in v] == bins), "other")
    return {"shape": shape, "sx": sx, "sy": sy, "sz": sz, "mass": mass,
            "mu": float(prm.get("friction", 1.0)), "bins": layout, "bin_dx": 0.0,
            "placements": str(int(prm.get("placements", 1)))}


def build_template(values: Mapping[str, Any]) -> dict[str, Any]:
    """``Template.params`` of a procedural pick_place template (the object inline)."""
    if values["shape"] == "box":
        size = [values["sx"], values["sy"], values["sz"]]
    else:
        size = [values["sx"] / 2, values["sz"]]
    dx = float(values["bin_dx"])
    return {"object": [values["shape"], size, values["mass"]], "second": "distractor",
            "bins": [[round(x + dx, 6), y] for x, y in BIN_LAYOUTS[values["bins"]]],
            "placements": int(values["placements"]), "friction": values["mu"]}


#: The procedural object family (``proc:objects``): the training shapes (box, cylinder) with
#: their size (``sx``: box x extent or cylinder diameter, ``sy``: box y extent, unused by a
#: cylinder, ``sz``: height), mass, friction ``mu``, the bin layout and a shift of both bins
#: along x; one placement (the held-out ``stack`` has two, ``torus`` another shape).
OBJECT_FAMILY = TemplateFamily(
    name="objects",
    params=(TemplateParam("shape", choices=("box", "cylinder")),
            TemplateParam("sx", 0.025, 0.06, 0.001, unit="m"),
            TemplateParam("sy", 0.025, 0.06, 0.001, unit="m"),
            TemplateParam("sz", 0.03, 0.08, 0.001, unit="m"),
            TemplateParam("mass", 0.03, 0.2, 0.005, unit="kg"),
            TemplateParam("mu", 0.5, 1.5, 0.05),
            TemplateParam("bins", choices=tuple(BIN_LAYOUTS)),
            TemplateParam("bin_dx", -0.03, 0.03, 0.005, unit="m"),
            TemplateParam("placements", choices=("1",))),
    describe=describe_template, build=build_template, min_distance=0.15,
    description="object shape (box, cylinder), size, mass, friction; bin layout and shift")


class PickPlace(Task):
    """Pick an object and place it in a target bin.

    Task Description:
        A 7-DOF arm with a parallel gripper picks the object ``object_a`` from the table and
        places it in the goal bin (one of two open bins); a second object ``object_b`` is a
        distractor (or, in ``stack``, the second object to place on top of the first). The
        arm starts at its home configuration with the gripper open.

    Randomizations:
        Template (training: ``cube`` 4.5 cm cube, ``cylinder`` r 2.2 cm x 7 cm, ``small_box``
        3 x 5 x 4 cm, ``two_bins`` 4 cm cube with both bins side by side on the left; held
        out: ``torus`` (ring of capsules, unseen shape), ``stack`` (two cubes, composed: the
        second is placed on the first), ``long_box`` (7 x 4 x 4.5 cm) and ``thin_box``
        (2 x 2 x 5 cm), sizes beyond the procedural object family's declared ranges). Object
        positions uniform in x 0.40..0.60, y -0.16..0.16 m (at least 13 cm apart), yaw uniform
        in [-pi, pi); the goal bin uniform among the two bins.

    Success Conditions:
        Every placed object rests inside the goal bin (centre at least 1 cm inside the inner
        walls; for ``stack`` the second object within 1.5 cm of the first's centre, on top of
        it), at its rest height within 1.5 cm, upright within 25 degrees, and released
        (gripper open, all stages reached in order).

    Stages:
        reach, grasp, lift, transport, place, release (``stack``: the six twice).
    """

    name = C.TASK_PICK_PLACE
    env_id = ENV_ID
    stages = STAGES
    skills = SKILLS
    grammar = PLACEMENT
    recovery_grammar = RECOVERY
    templates = (
        _template("cube", C.SPLIT_TRAIN, "cube", description="4.5 cm cube"),
        _template("cylinder", C.SPLIT_TRAIN, "cylinder", description="upright cylinder"),
        _template("small_box", C.SPLIT_TRAIN, "small_box", description="3 x 5 x 4 cm box"),
        _template("two_bins", C.SPLIT_TRAIN, "cube_small", bins=SIDE_BINS,
                  description="4 cm cube, both bins side by side on the left"),
        _template("torus", C.SPLIT_HELD_OUT, "torus", description="unseen shape: a ring"),
        _template("stack", C.SPLIT_HELD_OUT, "cube_small", second="cube_small", placements=2,
                  description="composed: place a cube in the bin, then a second one on it"),
        _template("long_box", C.SPLIT_HELD_OUT, "long_box",
                  description="unseen size: 7 x 4 x 4.5 cm box (longer than any training box)"),
        _template("thin_box", C.SPLIT_HELD_OUT, "thin_box",
                  description="unseen size: 2 x 2 x 5 cm stick (thinner than any training box)"),
    )
    template_families = (OBJECT_FAMILY,)
    expert = "clawgym_ros.tasks.pick_place:generate"
    #: Mid-episode disturbances it supports (``disturbance`` family): event -> trigger stage.
    disturbances = {"object_drop": "lift", "object_displace": "grasp", "goal_move": "lift",
                    "arm_push": "lift"}
    goal_tolerance = 0.0
    max_contact_force = 150.0
    arm_expert = True

    def template_stages(self, template: Template) -> tuple[str, ...]:
        return STAGES * int(template.params.get("placements", 1))

    def template_grammar(self, template: Template) -> str:
        n = int(template.params.get("placements", 1))
        return " ".join(f"({PLACEMENT})" for _ in range(n)) if n > 1 else PLACEMENT


# ---------------------------------------------------------------------------------------------
# Goal and stage tracker
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Placement:
    """One placement: which object, where to (a bin or on another object), its geometry."""

    index: int                      # row in object_poses
    name: str
    half_height: float
    radius: float                   # footprint radius (m)
    grasp_width: float              # width across the gripped part (m)
    rest_z: float                   # centre height where it starts (m)
    on_object: int = -1             # >= 0: place on this object (stack), else in the bin


@dataclasses.dataclass(frozen=True)
class PickPlaceGoal:
    """The goal bin (centre, inner half size, floor top) and the placements in order."""

    bin: str
    center: tuple[float, float]
    half_inner: float
    floor_z: float
    wall_top: float
    placements: tuple[Placement, ...]
    half_heights: tuple[float, ...]  # per object row

    def to_dict(self) -> dict[str, Any]:
        """record.goal: the bin (and that the second object is stacked, for ``stack``)."""
        out: dict[str, Any] = {"bin": self.bin,
                               "objects": "+".join(p.name for p in self.placements)}
        if any(p.on_object >= 0 for p in self.placements):
            out["stacked"] = True
        return out

    def rest_z(self, p: Placement, poses: np.ndarray) -> float:
        """Centre height of ``p``'s object when it rests at its target."""
        if p.on_object >= 0:
            return float(poses[p.on_object, 2] + self.half_heights[p.on_object]
                         + p.half_height)
        return self.floor_z + p.half_height

    def target_xy(self, p: Placement, poses: np.ndarray) -> np.ndarray:
        """Target centre (x, y) of ``p``."""
        if p.on_object >= 0:
            return poses[p.on_object, :2].copy()
        return np.array(self.center)

    def in_region(self, p: Placement, poses: np.ndarray) -> bool:
        """Whether ``p``'s object centre lies over its target region."""
        xy = poses[p.index, :2]
        if p.on_object >= 0:
            return (_norm(xy - poses[p.on_object, :2]) <= 0.015
                    and self.in_bin(poses[p.on_object]))
        return self.in_bin(poses[p.index])

    def in_bin(self, pose: np.ndarray) -> bool:
        """Whether a centre lies at least 1 cm inside the goal bin's inner walls."""
        (cx, cy), lim = self.center, self.half_inner - 0.01     # per step: Python floats
        return abs(float(pose[0]) - cx) <= lim and abs(float(pose[1]) - cy) <= lim


def _norm(v: np.ndarray) -> float:
    """``float(np.linalg.norm(v))`` of a 1-D float vector, without its per-call overhead (the
    same computation: the square root of ``v.dot(v)``; stage checks run every step)."""
    return math.sqrt(v.dot(v))


def _upright(quat: np.ndarray, max_tilt: float = math.radians(25)) -> bool:
    w, x, y, z = quat
    zz = 1.0 - 2.0 * (x * x + y * y)     # world z component of the body z axis
    return zz >= math.cos(max_tilt)


class PickPlaceTracker(StageTracker):
    """Stage validators of pick_place (see :class:`PickPlace`), over the true state.

    Per placement: reach = gripper open and the tool within the object's footprint (+1 cm)
    horizontally, below its top + 3 cm; grasp = the object held (gripper width between 4 mm
    and the open width, tool within footprint + 2 cm of the object's centre); lift = held and
    3 cm above its start height; transport = held over the target region with its bottom above
    the bin walls; place = over the target region within 2 cm of its rest height; release =
    gripper open (> width + 1 cm), the object resting at its target height (+-1.5 cm).
    """

    def __init__(self, goal: PickPlaceGoal) -> None:
        super().__init__(STAGES * len(goal.placements))
        self.goal = goal

    def _held(self, p: Placement, state: Mapping[str, np.ndarray]) -> bool:
        width = float(state[C.OBS_GRIPPER][0])
        tool = state[C.OBS_TOOL_POSE][:3]
        obj = state[C.OBS_OBJECT_POSES][p.index]
        close = _norm(tool - obj[:3]) <= p.radius + 0.02
        return 0.004 < width < p.grasp_width + 0.008 and close

    def _stage_view(self, index: int, state: Mapping[str, np.ndarray]):
        """(placement, stage name, object poses, its object's pose, tool position, gripper
        width) for stage ``index``."""
        p = self.goal.placements[index // len(STAGES)]
        poses = state[C.OBS_OBJECT_POSES]
        return (p, STAGES[index % len(STAGES)], poses, poses[p.index],
                state[C.OBS_TOOL_POSE][:3], float(state[C.OBS_GRIPPER][0]))

    def check(self, index: int, state: Mapping[str, np.ndarray]) -> bool:
        p, stage, poses, obj, tool, width = self._stage_view(index, state)
        if stage == "reach":
            near = _norm(tool[:2] - obj[:2]) <= p.radius + 0.01
            return near and tool[2] <= obj[2] + p.half_height + 0.03 and \
                width >= p.grasp_width + 0.01
        if stage == "grasp":
            return self._held(p, state)
        if stage == "lift":
            return self._held(p, state) and obj[2] >= p.rest_z + 0.03
        if stage == "transport":
            return (self._held(p, state) and self.goal.in_region(p, poses)
                    and obj[2] - p.half_height >= self.goal.wall_top - 0.005)
        rest = self.goal.rest_z(p, poses)
        if stage == "place":
            return self.goal.in_region(p, poses) and obj[2] <= rest + 0.02
        return (width >= p.grasp_width + 0.01 and self.goal.in_region(p, poses)
                and abs(obj[2] - rest) <= 0.015)

    def stage_distance(self, index: int, state: Mapping[str, np.ndarray]) -> float:
        """Distance (m) to stage ``index``: tool to object (reach, grasp), height still to
        lift, object to its target (transport, place: over the walls, then down to rest), and
        the gripper opening still missing (release)."""
        p, stage, poses, obj, tool, width = self._stage_view(index, state)
        open_gap = max(0.0, p.grasp_width + 0.01 - width)
        if stage == "reach":
            return (float(np.linalg.norm(tool[:2] - obj[:2]))
                    + max(0.0, float(tool[2] - obj[2]) - p.half_height - 0.03) + open_gap)
        if stage == "grasp":
            return (float(np.linalg.norm(tool - obj[:3]))
                    + max(0.0, width - p.grasp_width - 0.008))
        if stage == "lift":
            return max(0.0, p.rest_z + 0.03 - float(obj[2]))
        xy = float(np.linalg.norm(obj[:2] - self.goal.target_xy(p, poses)))
        if stage == "transport":
            return xy + max(0.0, self.goal.wall_top - float(obj[2]) + p.half_height)
        rest = self.goal.rest_z(p, poses)
        if stage == "place":
            return xy + max(0.0, float(obj[2]) - rest - 0.02)
        return open_gap + abs(float(obj[2]) - rest)

    def success(self, state: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        poses = state[C.OBS_OBJECT_POSES]
        if len(self.reached) < len(self.stages):
            return False, f"stage {self.stages[len(self.reached)]!r} not reached"
        for p in self.goal.placements:
            if not self.goal.in_region(p, poses):
                return False, f"{p.name} is not in its target region"
            if abs(poses[p.index, 2] - self.goal.rest_z(p, poses)) > 0.015:
                return False, f"{p.name} is not resting at its target height"
            if not _upright(poses[p.index, 3:]):
                return False, f"{p.name} tipped over"
        if float(state[C.OBS_GRIPPER][0]) < max(p.grasp_width for p in self.goal.placements):
            return False, "gripper still closed"
        return True, ""

    def achieved(self, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
        poses = state[C.OBS_OBJECT_POSES]
        ok = all(self.goal.in_region(p, poses) for p in self.goal.placements)
        out: dict[str, Any] = {"bin": self.goal.bin if ok else "",
                               "objects": "+".join(p.name for p in self.goal.placements),
                               "object_xyz": [[round(float(v), 5) for v in poses[p.index, :3]]
                                              for p in self.goal.placements]}
        if any(p.on_object >= 0 for p in self.goal.placements):
            out["stacked"] = ok
        return out


# ---------------------------------------------------------------------------------------------
# Env
# ---------------------------------------------------------------------------------------------

def _shape(name: str, key: Any, x: float, y: float, friction: float = 1.0) -> S.Shape:
    shape, size, mass = shape_spec(key)
    if shape == "torus":
        ring, tube = size
        return S.Shape(name=name, shape="cylinder", size=(ring + tube, 2 * tube),
                       pos=(x, y, TABLE_Z + tube), mass=mass, friction=friction,
                       rgba=(0.9, 0.6, 0.1, 1.0))
    half = size[2] / 2 if shape == "box" else size[1] / 2
    rgba = (0.85, 0.15, 0.15, 1.0) if name == OBJECTS[0] else (0.15, 0.3, 0.85, 1.0)
    return S.Shape(name=name, shape=shape, size=size, pos=(x, y, TABLE_Z + half), mass=mass,
                   friction=friction, rgba=rgba)


def geometry(key: str) -> tuple[float, float, float]:
    """(half height, footprint radius, grasp width) of a shape key."""
    shape, size, _ = shape_spec(key)
    if shape == "box":
        return size[2] / 2, math.hypot(size[0], size[1]) / 2, min(size[0], size[1])
    if shape == "cylinder":
        return size[1] / 2, size[0], 2 * size[0]
    ring, tube = size
    return tube, ring + tube, 2 * tube


class PickPlaceEnv(TaskEnv):
    """``clawgym/PickPlace-v0``: the tabletop with the template's objects and bins; stage
    tracking and success as in :class:`PickPlace`. kwargs: ``template`` (empty = a training
    template per reset) and :class:`~clawgym_ros.sim.envs.ClawEnv`'s. Besides the simulator's
    observation keys the observation has ``place_goal`` (:meth:`place_goal`): the goal bin is
    drawn per episode, so a policy must be told where to place."""

    task_cls = PickPlace

    def build_scene(self, template: Template) -> S.SceneSpec:
        base = S.load_scene(C.SCENE_TABLETOP)
        prm = template.params
        bins = tuple(S.Bin(name=f"bin_{i}", pos=(x, y, TABLE_Z), inner=(BIN_INNER, BIN_INNER),
                           height=BIN_HEIGHT, wall=BIN_WALL,
                           rgba=(0.2, 0.45, 0.25, 1.0) if i == 0 else (0.25, 0.3, 0.55, 1.0))
                     for i, (x, y) in enumerate(prm["bins"]))
        objects = (_shape(OBJECTS[0], prm["object"], 0.45, -0.08, prm.get("friction", 1.0)),
                   _shape(OBJECTS[1], prm["second"], 0.55, 0.08))
        return dataclasses.replace(base, bins=bins, objects=objects)

    def edit_spec(self, spec: Any, template: Template) -> None:
        from clawgym_ros.sim.world import spec_enum

        capsule = spec_enum("geom", "capsule")
        for i, name in enumerate(OBJECTS):
            key = template.params["object" if i == 0 else "second"]
            if shape_spec(key)[0] != "torus":
                continue
            ring, tube = shape_spec(key)[1]
            body = spec.body(name)
            old = body.geoms[0]
            rgba, friction, mass = list(old.rgba), list(old.friction), shape_spec(key)[2]
            spec.delete(old)
            half = ring * math.tan(math.pi / TORUS_SEGMENTS) + 0.002
            for k in range(TORUS_SEGMENTS):
                a = 2 * math.pi * k / TORUS_SEGMENTS
                body.add_geom(
                    name=name if k == 0 else f"{name}_seg{k}", type=capsule,
                    size=[tube, half, 0.0], pos=[ring * math.cos(a), ring * math.sin(a), 0.0],
                    quat=list(S.rpy_to_quat((math.pi / 2, 0.0, a))), rgba=rgba,
                    friction=friction, condim=4, mass=mass / TORUS_SEGMENTS)

    def sample_goal(self, rng: np.random.Generator, template: Template) -> PickPlaceGoal:
        b = self.backend
        prm = template.params
        # Objects: uniform in the region, at least MIN_SEPARATION apart (own sampler: the scene
        # sampler's footprint test lets the gripper fingers reach the neighbour).
        q = b.data.qpos[b.index.object_qpos].reshape(-1, 7).copy()
        placed: list[np.ndarray] = []
        for i in range(len(OBJECTS)):
            for _ in range(100):
                xy = np.array([rng.uniform(*OBJECT_REGION[0]), rng.uniform(*OBJECT_REGION[1])])
                if all(np.linalg.norm(xy - p) >= MIN_SEPARATION for p in placed):
                    break
            placed.append(xy)
            q[i, :2] = xy
            q[i, 3:] = S.rpy_to_quat((0.0, 0.0, float(rng.uniform(-math.pi, math.pi))))
        b.data.qpos[b.index.object_qpos] = q.ravel()
        goal_bin = int(rng.integers(len(prm["bins"])))
        keys = (prm["object"], prm["second"])
        placements = []
        half_heights = tuple(geometry(k)[0] for k in keys)
        for k in range(int(prm.get("placements", 1))):
            hh, radius, width = geometry(keys[k])
            placements.append(Placement(k, OBJECTS[k], hh, radius, width, float(q[k, 2]),
                                        on_object=k - 1 if k > 0 else -1))
        cx, cy = prm["bins"][goal_bin]
        return PickPlaceGoal(bin=f"bin_{goal_bin}", center=(cx, cy), half_inner=BIN_INNER / 2,
                             floor_z=TABLE_Z + BIN_WALL, wall_top=TABLE_Z + BIN_HEIGHT,
                             placements=tuple(placements), half_heights=half_heights)

    def make_tracker(self, goal: PickPlaceGoal) -> PickPlaceTracker:
        return PickPlaceTracker(goal)

    # ------------------------------------------------------------------ disturbances
    def apply_disturbance(self, event: str, draw: Mapping[str, float],
                          reached: list[str]) -> float:
        """Apply a ``disturbance`` event now (see :mod:`clawgym_ros.perturbations.disturbance`)
        to the placement in progress; returns its size (m the object or the goal moved).

        ``object_drop`` / ``object_displace``: the object is put at rest, upright with yaw
        ``draw["yaw"]``, on the table ``radius + 5 cm + draw["distance"]`` from where it was,
        in direction ``draw["angle"]`` (the next of six directions when that spot is off the
        region objects start in (x 0.40..0.60, y -0.16..0.16 m: clear of the bins), within
        13 cm of another object or within radius + 5 cm of the fingers; when none fits, the
        fitting point of a 9 x 13 grid over the region nearest the aimed spot); the gripper
        keeps its command.
        ``goal_move``: the goal becomes the other bin (tracker and ``place_goal`` follow).
        """
        goal: PickPlaceGoal = self.goal
        assert goal is not None and self.tracker is not None
        p = goal.placements[min(len(reached) // len(STAGES), len(goal.placements) - 1)]
        if event == "goal_move":
            bins = self.template.params["bins"]
            now = int(goal.bin.split("_")[1])
            other = (now + 1) % len(bins)
            moved = dataclasses.replace(goal, bin=f"bin_{other}", center=tuple(bins[other]))
            self.goal = moved
            self.tracker.goal = moved
            return float(np.linalg.norm(np.subtract(bins[other], bins[now])))
        if event not in ("object_drop", "object_displace"):
            raise ValueError(f"pick_place has no disturbance {event!r}")
        b = self.backend
        q = b.data.qpos[b.index.object_qpos].reshape(-1, 7)
        old = q[p.index, :3].copy()
        tool = b.observation(cameras=())[C.OBS_TOOL_POSE][:3]
        reach = p.radius + 0.05 + float(draw["distance"])
        lo, hi = np.array(OBJECT_REGION).T
        clearance = p.radius + 0.05

        def fits(xy: np.ndarray) -> bool:
            return (bool(np.all((xy >= lo) & (xy <= hi)))
                    and all(np.linalg.norm(xy - q[i, :2]) >= MIN_SEPARATION
                            for i in range(len(q)) if i != p.index)
                    and np.linalg.norm(xy - tool[:2]) >= clearance)

        aim = old[:2] + reach * np.array([math.cos(draw["angle"]), math.sin(draw["angle"])])
        tries = [old[:2] + reach * np.array([math.cos(a), math.sin(a)])
                 for a in float(draw["angle"]) + np.arange(6) * math.pi / 3]
        spot = next((xy for xy in tries if fits(xy)), None)
        if spot is None:    # no direction fits (near a corner, the other object beside it):
            grid = [np.array([x, y]) for x in np.linspace(lo[0], hi[0], 9)
                    for y in np.linspace(lo[1], hi[1], 13)]
            ok = [xy for xy in grid if fits(xy)]      # the fitting point nearest the aim
            spot = min(ok, key=lambda xy: float(np.linalg.norm(xy - aim))) if ok else \
                max(grid, key=lambda xy: float(np.linalg.norm(xy - tool[:2])))
        new_q = q.copy()
        new_q[p.index, :3] = (spot[0], spot[1], p.rest_z)
        new_q[p.index, 3:] = S.rpy_to_quat((0.0, 0.0, float(draw["yaw"])))
        b.data.qpos[b.index.object_qpos] = new_q.ravel()
        b.data.qvel[b.index.object_dof] = 0.0
        from clawgym_ros.sim.world import MujocoPhysics

        MujocoPhysics(b.model, b.data).forward()
        return float(np.linalg.norm(new_q[p.index, :3] - old))

    # ------------------------------------------------------------------ goal observation
    def _observation_space(self) -> Any:
        from gymnasium import spaces

        items = dict(super()._observation_space().spaces)
        items[C.OBS_PLACE_GOAL] = spaces.Box(-np.inf, np.inf, (3,), np.float64)
        return spaces.Dict(items)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset (see :class:`TaskEnv`); the observation carries ``place_goal``."""
        obs, info = super().reset(seed=seed, options=options)
        return self._with_goal(obs), info

    def step(self, action: dict[str, Any]
             ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """One control step (see :class:`TaskEnv`); the observation carries ``place_goal``."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self._with_goal(obs), reward, terminated, truncated, info

    def _with_goal(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        obs[C.OBS_PLACE_GOAL] = self.place_goal(obs[C.OBS_OBJECT_POSES])
        return obs

    def place_goal(self, poses: np.ndarray) -> np.ndarray:
        """The goal of the current placement, as the policy observes it: (x, y, z) where the
        centre of the object being placed comes to rest (the goal bin's centre or, for the
        second object of ``stack``, on top of the first object); zeros before a goal is drawn.
        """
        goal: PickPlaceGoal | None = self.goal
        if goal is None or self.tracker is None:
            return np.zeros(3)
        k = min(len(self.tracker.reached) // len(STAGES), len(goal.placements) - 1)
        p = goal.placements[k]
        xy = goal.target_xy(p, poses) if p.on_object >= 0 else goal.center   # (per step)
        return np.array([xy[0], xy[1], goal.rest_z(p, poses)], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Expert
# ---------------------------------------------------------------------------------------------

def _wrap_half_pi(angle: float) -> float:
    """Equivalent gripper yaw in [-pi/2, pi/2) (the gripper is symmetric under pi)."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


def _object_yaw(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def grasp_plan(key: str, pose: np.ndarray) -> tuple[np.ndarray, float]:
    """Grasp point (x, y, z of the tool) and gripper yaw for an object of shape ``key``."""
    shape, size, _ = shape_spec(key)
    hh = geometry(key)[0]
    yaw_obj = _object_yaw(pose[3:])
    point = pose[:3].copy()
    if shape == "box":
        # close across the shorter side: the closing axis (sin yaw, -cos yaw) along box x
        # when x is shorter, else along box y
        yaw = yaw_obj + (math.pi / 2 if size[0] <= size[1] else 0.0)
        yaw = _wrap_half_pi(yaw)
    elif shape == "cylinder":
        yaw = 0.0
    else:
        ring = size[0]
        # grip the tube on the rim side nearer the robot's mid-plane, closing radially (y)
        sign = -1.0 if pose[1] > 0 else 1.0
        point[:2] = pose[:2] + np.array([0.0, sign * ring])
        yaw = 0.0
    point[2] = max(pose[2] + (0.3 * hh if shape != "torus" else 0.0), TABLE_Z + 0.024)
    return point, yaw


class DisturbedError(ExpertError):
    """The scene no longer matches the plan: the carried object left the gripper or the goal
    moved (the expert replans from the state it finds)."""


#: Replans per placement after disturbances before the expert gives up.
MAX_REPLANS = 3


class PickPlaceExpert(ArmExpert):
    """The pick_place expert: per placement move_to (pre-grasp), approach (Cartesian), grasp,
    lift (Cartesian), move_to (above the target, joint line or OMPL with the object attached),
    place (Cartesian), release, retreat (Cartesian).

    Replanning (episodes under the ``disturbance`` family; elsewhere the expert runs as it
    always did, so existing datasets keep their ids): from the grasp until the release it
    watches the true state after every step;
    when the carried object is no longer between the fingers (its centre more than its
    footprint radius + 4 cm from the tool) or the goal it is carrying to has moved, the skill
    in progress ends failed (detail ``disturbed: ...``) and the placement starts again from
    the state found (:meth:`recover`: carry on if still held, else open, back off, pick
    again), up to :data:`MAX_REPLANS` times."""

    _carrying: Placement | None = None
    _carry_goal: tuple[float, float] | None = None

    def run(self) -> None:
        goal: PickPlaceGoal = self.base.goal
        keys = (self.template.params["object"], self.template.params["second"])
        if self.snapshot is not None:
            self.recover(goal, goal.placements[0], keys[0])
            return
        for p in goal.placements:
            self.with_replans(p, keys[p.index])

    def with_replans(self, p: Placement, key: str) -> None:
        """One placement, replanned from the state found after each disturbance."""
        for attempt in range(MAX_REPLANS + 1):
            try:
                if attempt == 0:
                    self.place_one(self.base.goal, p, key)
                else:
                    self.recover(self.base.goal, p, key)
                return
            except DisturbedError:
                self._carrying, self._carry_goal = None, None
                self.planner.detach_object()
                self.q_cmd = self.q()           # the arm may have been pushed off its path
                if attempt == MAX_REPLANS:
                    raise

    def step(self, q_target: np.ndarray, dq: np.ndarray, width: float | None = None,
             action_override: Mapping[str, np.ndarray] | None = None) -> None:
        """One control step (see :meth:`ArmExpert.step`), then the disturbance watch.

        Raises:
            DisturbedError: the carried object left the gripper or the goal moved.
        """
        super().step(q_target, dq, width, action_override)
        p, target = self._carrying, self._carry_goal
        if p is None or C.FAMILY_DISTURBANCE not in self.perturbations:
            return
        if target is not None and tuple(self.base.goal.center) != target:
            self._carrying, self._carry_goal = None, None
            raise DisturbedError(f"disturbed: the goal moved to {self.base.goal.bin}")
        state = self.state()
        gap = float(np.linalg.norm(state[C.OBS_TOOL_POSE][:3]
                                   - state[C.OBS_OBJECT_POSES][p.index, :3]))
        if gap > p.radius + 0.04:
            self._carrying, self._carry_goal = None, None
            raise DisturbedError(f"disturbed: {p.name} left the gripper ({gap:.3f} m from "
                                 "the tool)")

    def recover(self, goal: PickPlaceGoal, p: Placement, key: str) -> None:
        """Finish the task from a restored failure state (one placement).

        Object held clear of the table: carry it on (move_to, place, release, retreat).
        Otherwise: open the gripper and back off if it is closed (release, retreat), then the
        whole placement from wherever the object now lies.

        Raises:
            ExpertError: the object is out of reach, tipped over, or a motion fails.
        """
        state = self.state()
        tracker = self.base.tracker
        obj = state[C.OBS_OBJECT_POSES][p.index]
        held = tracker._held(p, state) and obj[2] >= p.rest_z + 0.02
        self.sync_planner()                         # the planner still has the last episode
        if held:
            self.gripper_cmd = 0.0                  # keep squeezing, as after a grasp
            self.planner.detach_object()
            self.sync_planner()
            self.planner.attach_object(p.name)
            tool = state[C.OBS_TOOL_POSE]
            self._carrying = p
            self.deliver(goal, p, np.asarray(tool[3:7]), float(tool[2] - obj[2]))
            return
        if not _upright(obj[3:]):
            raise ExpertError(f"{p.name} tipped over: no grasp from above")
        open_width = min(0.08, p.grasp_width + 0.03)
        if float(state[C.OBS_GRIPPER][0]) < open_width - 0.005:
            tool = state[C.OBS_TOOL_POSE]
            with self.skill("release", {"object": p.name}):
                self.gripper(open_width, settle=0.1)
            with self.skill("retreat", {}):
                self.move_cartesian(as_pose(tool[:3] + [0.0, 0.0, 0.06], tool[3:7]),
                                    check=False)
        self.place_one(goal, p, key)

    def place_one(self, goal: PickPlaceGoal, p: Placement, key: str) -> None:
        state = self.state()
        obj = state[C.OBS_OBJECT_POSES][p.index]
        point, yaw = grasp_plan(key, obj)
        quat = top_down_quat(yaw)
        pre = as_pose(point + [0, 0, 0.10], quat)
        self.sync_planner()
        with self.skill("move_to", {"target": "pregrasp", "object": p.name,
                                    "pose": [round(float(v), 4) for v in pre.position]}) as s:
            q_pre = self.ik(pre)
            s["planner"] = self.move_joints(q_pre, gripper=min(0.08, p.grasp_width + 0.03))
        self.sync_planner()                         # the gripper opening changed
        with self.skill("approach", {"object": p.name}):
            self.move_cartesian(as_pose(point, quat))
        self._carrying = p                          # from here on it is between the fingers
        with self.skill("grasp", {"object": p.name}) as s:
            width = self.gripper(0.0, settle=0.12)
            s["width"] = round(width, 4)
            if width < 0.004:
                raise ExpertError(f"gripper closed on nothing (width {width:.4f} m)")
        self.planner.detach_object()
        self.sync_planner()
        self.planner.attach_object(p.name)
        self._carrying = p
        self.deliver(goal, p, quat, float(point[2] - obj[2]), point)

    def deliver(self, goal: PickPlaceGoal, p: Placement, quat: np.ndarray, offset: float,
                point: np.ndarray | None = None) -> None:
        """Lift (from ``point``, the grasp point; skipped when None: already carried), carry
        above the target, place, release and retreat. ``offset``: tool above the object's
        centre."""
        poses = self.state()[C.OBS_OBJECT_POSES]
        self._carry_goal = tuple(goal.center)
        target_xy = goal.target_xy(p, poses)
        rest = goal.rest_z(p, poses)
        carry_z = max(goal.wall_top + 0.04 + p.half_height, rest + 0.06) + offset
        if p.on_object >= 0:
            carry_z = max(carry_z, rest + p.half_height + 0.04 + offset)
        if point is not None:
            with self.skill("lift", {"object": p.name, "height": round(carry_z, 4)}):
                self.move_cartesian(as_pose([point[0], point[1], carry_z], quat),
                                    check=False)
        else:
            tool = self.state()[C.OBS_TOOL_POSE]
            with self.skill("lift", {"object": p.name, "height": round(carry_z, 4)}):
                self.move_cartesian(as_pose([tool[0], tool[1], max(carry_z, tool[2])], quat),
                                    check=False)
        above = as_pose([target_xy[0], target_xy[1], carry_z], quat)
        with self.skill("move_to", {"target": goal.bin if p.on_object < 0 else "stack",
                                    "pose": [round(float(v), 4) for v in above.position]}) as s:
            self.sync_planner()
            q_above = self.ik(above)
            s["planner"] = self.move_joints_with_fault(q_above)
        place_z = rest + 0.008 + offset
        with self.skill("place", {"object": p.name, "height": round(place_z, 4)}):
            self.move_cartesian(as_pose([target_xy[0], target_xy[1], place_z], quat),
                                check=False, tool_speed=0.25)
        self._carrying, self._carry_goal = None, None
        with self.skill("release", {"object": p.name}):
            self.gripper(min(0.08, p.grasp_width + 0.03), settle=0.1)
        self.planner.detach_object()
        with self.skill("retreat", {}):
            self.move_cartesian(as_pose([target_xy[0], target_xy[1], place_z + 0.08], quat),
                                check=False)

    def move_joints_with_fault(self, goal: np.ndarray) -> str:
        """The transport move; injects the configured fault (tests of the sign-off).

        ``gripper_open_mid_transport``: the gripper opens (at the normal rate) half-way;
        ``joint_limit``: after the move the wrist is driven into its upper limit stop (target
        at the limit plus full velocity feed-forward for 1.6 s), then back.
        """
        fault = self.options.fault
        if fault not in ("gripper_open_mid_transport", "joint_limit"):
            return self.move_joints(goal)
        from clawgym_ros.tasks.expert import GRIPPER_RATE, quintic_path

        pos, vel = quintic_path(np.vstack([self.q_cmd, goal]), self.vmax, self.amax, self.dt)
        widths = np.full(len(pos), self.gripper_cmd)
        if fault == "gripper_open_mid_transport":
            mid = len(pos) // 2
            held = float(self.state()[C.OBS_GRIPPER][0])   # open from the held width
            ramp = held + GRIPPER_RATE * self.dt * np.arange(1, len(pos) - mid + 1)
            widths[mid:] = np.minimum(ramp, 0.08)
        self.run_path(pos, vel, widths)
        if fault == "joint_limit":
            target, dq = goal.copy(), np.zeros(7)
            target[6], dq[6] = self.planner.checker.upper[6], 3.0
            for _ in range(80):
                self.step(target, dq)
            back, _ = quintic_path(np.vstack([self.q(), goal]), self.vmax, self.amax, self.dt)
            self.run_path(back, np.zeros_like(back))
        return "line"


def generate(spec: EpisodeSpec) -> EpisodeRecord:
    """The pick_place expert: one episode for ``spec`` (deterministic in the spec)."""
    expert = PickPlaceExpert(spec, PickPlace(), PickPlaceEnv)
    return run_expert(expert, PickPlaceExpert.run)
