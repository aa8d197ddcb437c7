"""Scene specs: authored once in ``config/scenes/<name>.yaml``, turned into MuJoCo and Gazebo.

A :class:`SceneSpec` (robot URDF + pose, static geometry, bins, free objects with
randomization ranges, lights, cameras, GPS origin) is the single source of a world:

* :func:`build_spec` / :func:`build_model` make the MuJoCo model with ``mujoco.MjSpec`` from the
  spec and the robot's xacro (actuators, sites, sensors and cameras are added here);
* :func:`scene_sdf` generates the Gazebo world ``worlds/<name>.sdf`` (environment only; the robot
  is spawned from the same URDF by ``launch/gazebo_launch.py``). A test checks that the committed
  SDF equals the generated one; regenerate with ``python -m clawgym_ros.sim.scene``;
* :func:`sample_object_poses` / :func:`sample_robot_pose` draw the randomized poses from a
  caller-supplied ``np.random.Generator`` (both back ends use the same sampler).

This module imports MuJoCo lazily (only :func:`build_spec` needs it), so SDF generation and spec
loading work without it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_range, data_root, from_dict, load_yaml
from clawgym_ros.errors import ConfigError

#: repository / share root holding config/, urdf/ and worlds/
ROOT = data_root()
SCENES_DIR = ROOT / "config" / "scenes"
WORLDS_DIR = ROOT / "worlds"
SHAPES = ("box", "cylinder", "sphere")
LIGHT_TYPES = ("directional", "point", "spot")
SCENE_NAMES = (C.SCENE_TABLETOP, C.SCENE_OUTDOOR)

# Actuator gains of the arm: kp (N m / rad) of the position actuators and kv (N m s / rad) of the
# velocity feed-forward actuators (Panda-like impedance; tracking measured ~0.01 rad).
ARM_KP = (1500.0, 1500.0, 1200.0, 1200.0, 400.0, 300.0, 150.0)
ARM_KV = (100.0, 100.0, 80.0, 80.0, 25.0, 20.0, 10.0)
ARM_ARMATURE = (0.2, 0.2, 0.2, 0.2, 0.05, 0.05, 0.05)
FINGER_KP = 2000.0          # N/m; saturates at the URDF effort limit when closed on an object
FINGER_KV = 40.0
WHEEL_KV = 20.0             # N m s / rad of the wheel velocity servos
GRIPPER_MAX_WIDTH = 0.08    # sum of both finger openings (URDF limit 0.04 each)
WHEEL_RADIUS = 0.10         # must match urdf/mobile_base.urdf.xacro
WHEEL_SEPARATION = 0.46


def _vec(field: str, value: Any, n: int | None = None) -> tuple[float, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigError(field, value, f"a list of {n or 'some'} numbers")
    if n is not None and len(value) != n:
        raise ConfigError(field, value, f"a list of {n} numbers")
    return tuple(float(check_range(f"{field}[{i}]", v)) for i, v in enumerate(value))


@dataclasses.dataclass(frozen=True)
class Randomize:
    """Uniform ranges (absolute world values) for x, y and yaw; empty range = keep nominal."""

    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    yaw: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("x", "y", "yaw"):
            value = getattr(self, name)
            if len(value):
                lo, hi = _vec(f"randomize.{name}", value, 2)
                if lo > hi:
                    raise ConfigError(f"randomize.{name}", value, "[low, high] with low <= high")
                object.__setattr__(self, name, (lo, hi))


@dataclasses.dataclass(frozen=True)
class Shape:
    """A primitive body: static geometry (mass None) or a free object (mass > 0)."""

    name: str
    shape: str
    size: tuple[float, ...]
    pos: tuple[float, ...]
    rpy: tuple[float, ...] = (0.0, 0.0, 0.0)
    rgba: tuple[float, ...] = (0.7, 0.7, 0.7, 1.0)
    mass: float | None = None
    friction: float = 1.0
    randomize: Randomize | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("shape.name", self.name, "a non-empty name")
        check_choice(f"{self.name}.shape", self.shape, SHAPES)
        nsize = {"box": 3, "cylinder": 2, "sphere": 1}[self.shape]
        object.__setattr__(self, "size", _vec(f"{self.name}.size", self.size, nsize))
        for v in self.size:
            check_range(f"{self.name}.size", v, 0.0, 100.0, low_open=True)
        object.__setattr__(self, "pos", _vec(f"{self.name}.pos", self.pos, 3))
        object.__setattr__(self, "rpy", _vec(f"{self.name}.rpy", self.rpy, 3))
        object.__setattr__(self, "rgba", _vec(f"{self.name}.rgba", self.rgba, 4))
        if self.mass is not None:
            check_range(f"{self.name}.mass", self.mass, 0.0, 1000.0, low_open=True)
        check_range(f"{self.name}.friction", self.friction, 0.0, 10.0)
        if isinstance(self.randomize, Mapping):
            object.__setattr__(self, "randomize", from_dict(Randomize, self.randomize))

    @property
    def half_height(self) -> float:
        """Half the vertical extent when upright."""
        return {"box": self.size[2] / 2 if len(self.size) == 3 else 0.0,
                "cylinder": self.size[-1] / 2, "sphere": self.size[0]}[self.shape]

    @property
    def footprint_radius(self) -> float:
        """Radius of the circle bounding the object's footprint (for non-overlap sampling)."""
        if self.shape == "box":
            return math.hypot(self.size[0], self.size[1]) / 2
        return self.size[0]


@dataclasses.dataclass(frozen=True)
class Bin:
    """An open box: a floor plate and four walls; ``pos`` is the floor's underside centre."""

    name: str
    pos: tuple[float, ...]
    inner: tuple[float, ...] = (0.16, 0.16)
    height: float = 0.06
    wall: float = 0.01
    rgba: tuple[float, ...] = (0.3, 0.5, 0.3, 1.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pos", _vec(f"{self.name}.pos", self.pos, 3))
        object.__setattr__(self, "inner", _vec(f"{self.name}.inner", self.inner, 2))
        object.__setattr__(self, "rgba", _vec(f"{self.name}.rgba", self.rgba, 4))
        check_range(f"{self.name}.height", self.height, 0.0, 1.0, low_open=True)
        check_range(f"{self.name}.wall", self.wall, 0.0, 0.1, low_open=True)

    def parts(self) -> list[Shape]:
        """The bin as five boxes in world coordinates (floor first, then walls)."""
        x, y, z = self.pos
        ix, iy = self.inner
        w, h = self.wall, self.height
        ox, oy = ix + 2 * w, iy + 2 * w
        kw = {"shape": "box", "rgba": self.rgba}
        return [
            Shape(f"{self.name}_floor", size=(ox, oy, w), pos=(x, y, z + w / 2), **kw),
            Shape(f"{self.name}_wall_px", size=(w, oy, h), pos=(x + (ix + w) / 2, y, z + h / 2),
                  **kw),
            Shape(f"{self.name}_wall_nx", size=(w, oy, h), pos=(x - (ix + w) / 2, y, z + h / 2),
                  **kw),
            Shape(f"{self.name}_wall_py", size=(ix, w, h), pos=(x, y + (iy + w) / 2, z + h / 2),
                  **kw),
            Shape(f"{self.name}_wall_ny", size=(ix, w, h), pos=(x, y - (iy + w) / 2, z + h / 2),
                  **kw),
        ]


@dataclasses.dataclass(frozen=True)
class Light:
    """A light; colours are the defaults that lighting perturbations scale."""

    name: str
    type: str = "directional"
    pos: tuple[float, ...] = (0.0, 0.0, 3.0)
    dir: tuple[float, ...] = (0.0, 0.0, -1.0)
    diffuse: tuple[float, ...] = (0.7, 0.7, 0.7)
    specular: tuple[float, ...] = (0.3, 0.3, 0.3)
    ambient: tuple[float, ...] = (0.0, 0.0, 0.0)
    cast_shadows: bool = False

    def __post_init__(self) -> None:
        check_choice(f"{self.name}.type", self.type, LIGHT_TYPES)
        for name in ("pos", "dir", "diffuse", "specular", "ambient"):
            object.__setattr__(self, name, _vec(f"{self.name}.{name}", getattr(self, name), 3))
        if not any(abs(v) > 1e-9 for v in self.dir):
            raise ConfigError(f"{self.name}.dir", self.dir, "a non-zero vector")


@dataclasses.dataclass(frozen=True)
class Camera:
    """A camera: fixed (``pos`` + ``lookat``) or on a robot frame (``frame``, REP 103 optical)."""

    name: str
    pos: tuple[float, ...] = ()
    lookat: tuple[float, ...] = ()
    frame: str = ""
    fovy: float = 60.0

    def __post_init__(self) -> None:
        check_range(f"{self.name}.fovy", self.fovy, 1.0, 179.0)
        if self.frame:
            return
        object.__setattr__(self, "pos", _vec(f"{self.name}.pos", self.pos, 3))
        object.__setattr__(self, "lookat", _vec(f"{self.name}.lookat", self.lookat, 3))


@dataclasses.dataclass(frozen=True)
class Robot:
    """The robot: xacro path (relative to the package root), base pose, home configuration."""

    urdf: str
    pos: tuple[float, ...] = (0.0, 0.0, 0.0)
    yaw: float = 0.0
    home: tuple[float, ...] = ()
    gripper_home: float = GRIPPER_MAX_WIDTH
    randomize: Randomize | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pos", _vec("robot.pos", self.pos, 3))
        object.__setattr__(self, "home", _vec("robot.home", self.home))
        check_range("robot.yaw", self.yaw)
        check_range("robot.gripper_home", self.gripper_home, 0.0, GRIPPER_MAX_WIDTH)
        if isinstance(self.randomize, Mapping):
            object.__setattr__(self, "randomize", from_dict(Randomize, self.randomize))

    @property
    def is_arm(self) -> bool:
        """True for the claw arm, False for the mobile base."""
        return "arm" in Path(self.urdf).name


@dataclasses.dataclass(frozen=True)
class Physics:
    """Physics timestep and control period (``control_dt`` a multiple of ``timestep``)."""

    timestep: float = 0.002
    control_dt: float = 0.02

    def __post_init__(self) -> None:
        check_range("physics.timestep", self.timestep, 1e-4, 0.02)
        check_range("physics.control_dt", self.control_dt, self.timestep, 1.0)
        ratio = self.control_dt / self.timestep
        if abs(ratio - round(ratio)) > 1e-6:
            raise ConfigError("physics.control_dt", self.control_dt,
                              f"a multiple of physics.timestep={self.timestep}")

    @property
    def substeps(self) -> int:
        """Physics steps per control step."""
        return int(round(self.control_dt / self.timestep))


@dataclasses.dataclass(frozen=True)
class GpsOrigin:
    """WGS84 geodetic position of the world origin (local ENU frame)."""

    latitude: float
    longitude: float
    altitude: float = 0.0

    def __post_init__(self) -> None:
        check_range("gps_origin.latitude", self.latitude, -90.0, 90.0)
        check_range("gps_origin.longitude", self.longitude, -180.0, 180.0)
        check_range("gps_origin.altitude", self.altitude, -500.0, 9000.0)


@dataclasses.dataclass(frozen=True)
class Floor:
    """The ground plane."""

    size: tuple[float, ...] = (4.0, 4.0)
    rgba: tuple[float, ...] = (0.5, 0.5, 0.5, 1.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", _vec("floor.size", self.size, 2))
        object.__setattr__(self, "rgba", _vec("floor.rgba", self.rgba, 4))


@dataclasses.dataclass(frozen=True)
class SceneSpec:
    """One world, authored once (see config/scenes/*.yaml)."""

    name: str
    robot: Robot
    physics: Physics = dataclasses.field(default_factory=Physics)
    floor: Floor = dataclasses.field(default_factory=Floor)
    statics: tuple[Shape, ...] = ()
    landmarks: tuple[Shape, ...] = ()
    obstacles: tuple[Shape, ...] = ()
    bins: tuple[Bin, ...] = ()
    objects: tuple[Shape, ...] = ()
    lights: tuple[Light, ...] = ()
    cameras: tuple[Camera, ...] = ()
    gps_origin: GpsOrigin | None = None

    def __post_init__(self) -> None:
        src = f"scene {self.name}"
        for field, cls in (("robot", Robot), ("physics", Physics), ("floor", Floor),
                           ("gps_origin", GpsOrigin)):
            value = getattr(self, field)
            if isinstance(value, Mapping):
                object.__setattr__(self, field, from_dict(cls, value, src))
        for field, cls in (("statics", Shape), ("landmarks", Shape), ("obstacles", Shape),
                           ("bins", Bin), ("objects", Shape), ("lights", Light),
                           ("cameras", Camera)):
            items = tuple(from_dict(cls, v, src) if isinstance(v, Mapping)
                          else v for v in (getattr(self, field) or ()))
            object.__setattr__(self, field, items)
        for obj in self.objects:
            if obj.mass is None:
                raise ConfigError(f"{obj.name}.mass", None, "a mass > 0 for a free object")
        names = [s.name for s in self.static_shapes()] + [o.name for o in self.objects]
        names += [b.name for b in self.bins] + [li.name for li in self.lights]
        names += [c.name for c in self.cameras]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError("scene names", dup[0], "unique names across the scene")
        if not self.lights:
            raise ConfigError("lights", [], "at least one light")
        if self.robot.is_arm and len(self.robot.home) != len(C.ARM_JOINTS):
            raise ConfigError("robot.home", self.robot.home,
                              f"{len(C.ARM_JOINTS)} joint positions")

    def static_shapes(self) -> list[Shape]:
        """Every fixed primitive: statics, landmarks, obstacles and bin parts."""
        parts = [p for b in self.bins for p in b.parts()]
        return [*self.statics, *self.landmarks, *self.obstacles, *parts]

    @property
    def urdf_path(self) -> Path:
        """Absolute path of the robot's xacro file."""
        return ROOT / self.robot.urdf


def load_scene(name_or_path: str | Path) -> SceneSpec:
    """Load a scene spec by name (``tabletop``, ``outdoor``) or YAML path.

    Raises:
        ConfigError: unknown scene, bad YAML or invalid values (naming the field).
    """
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        if str(name_or_path) not in SCENE_NAMES and not (SCENES_DIR / f"{path}.yaml").exists():
            raise ConfigError("scene", str(name_or_path), "one of " + ", ".join(SCENE_NAMES))
        path = SCENES_DIR / f"{name_or_path}.yaml"
    return _load_scene_cached(str(path.resolve()))


@functools.lru_cache(maxsize=16)
def _load_scene_cached(path: str) -> SceneSpec:
    data = load_yaml(path)
    return from_dict(SceneSpec, data, path)


# ---------------------------------------------------------------------------------------------
# Randomization (shared by the MuJoCo and Gazebo back ends)
# ---------------------------------------------------------------------------------------------

def sample_object_poses(scene: SceneSpec, rng: np.random.Generator,
                        max_tries: int = 200) -> dict[str, tuple[np.ndarray, float]]:
    """Draw each free object's (position, yaw) within its ranges without footprint overlap.

    Objects without ``randomize`` keep their nominal pose (and consume no random numbers).

    Args:
        scene: the scene spec.
        rng: the caller's generator (the env's ``np_random``); the only source of randomness.
        max_tries: rejection-sampling attempts per object before accepting an overlap.

    Returns:
        name -> (xyz position, yaw) in the world frame.
    """
    placed: list[tuple[np.ndarray, float]] = []
    poses: dict[str, tuple[np.ndarray, float]] = {}
    for obj in scene.objects:
        pos = np.array(obj.pos, dtype=float)
        yaw = obj.rpy[2]
        r = obj.randomize
        if r is not None:
            for _ in range(max_tries):
                if r.x:
                    pos[0] = rng.uniform(*r.x)
                if r.y:
                    pos[1] = rng.uniform(*r.y)
                if all(np.hypot(*(pos[:2] - p[:2])) > obj.footprint_radius + rad + 0.01
                       for p, rad in placed):
                    break
            if r.yaw:
                yaw = float(rng.uniform(*r.yaw))
        placed.append((pos.copy(), obj.footprint_radius))
        poses[obj.name] = (pos, float(yaw))
    return poses


def sample_robot_pose(scene: SceneSpec, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Draw the robot base (position, yaw) within ``robot.randomize`` (nominal without it)."""
    pos = np.array(scene.robot.pos, dtype=float)
    yaw = scene.robot.yaw
    r = scene.robot.randomize
    if r is not None:
        if r.x:
            pos[0] = rng.uniform(*r.x) + scene.robot.pos[0]
        if r.y:
            pos[1] = rng.uniform(*r.y) + scene.robot.pos[1]
        if r.yaw:
            yaw = float(rng.uniform(*r.yaw)) + scene.robot.yaw
    return pos, float(yaw)


# ---------------------------------------------------------------------------------------------
# Geometry helpers
# ---------------------------------------------------------------------------------------------

def rpy_to_quat(rpy: Sequence[float]) -> np.ndarray:
    """Quaternion (w, x, y, z) of fixed-axis roll-pitch-yaw (URDF/SDF convention)."""
    r, p, y = (v / 2 for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), \
        math.cos(y), math.sin(y)
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


def lookat_axes(pos: Sequence[float], lookat: Sequence[float]) -> tuple[np.ndarray, ...]:
    """(forward, right, up) unit vectors of a camera at ``pos`` looking at ``lookat``."""
    fwd = np.asarray(lookat, float) - np.asarray(pos, float)
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    if np.linalg.norm(right) < 1e-9:
        right = np.array([0.0, -1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    return fwd, right, up


def matrix_to_rpy(rot: np.ndarray) -> tuple[float, float, float]:
    """Fixed-axis roll-pitch-yaw of a rotation matrix (URDF/SDF convention)."""
    pitch = math.asin(max(-1.0, min(1.0, -rot[2, 0])))
    roll = math.atan2(rot[2, 1], rot[2, 2])
    yaw = math.atan2(rot[1, 0], rot[0, 0])
    return roll, pitch, yaw


# ---------------------------------------------------------------------------------------------
# Robot description
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def expand_xacro(path: str | Path, mappings: tuple[tuple[str, str], ...] = ()) -> str:
    """Expand a xacro file with the PyPI ``xacro`` package.

    Args:
        path: the ``.urdf.xacro`` file.
        mappings: xacro arguments as ``(name, value)`` pairs (e.g. ``(("use_gazebo", "true"),)``).

    Returns:
        The URDF XML text.
    """
    import xacro

    doc = xacro.process_file(str(path), mappings=dict(mappings))
    return doc.toprettyxml(indent="  ")


def _mujoco_urdf(urdf: str) -> str:
    """Insert the MuJoCo compiler options into the URDF's <robot> element."""
    start = urdf.index("<robot")
    end = urdf.index(">", start) + 1
    options = ('<mujoco><compiler fusestatic="false" discardvisual="true" '
               'balanceinertia="true" angle="radian"/></mujoco>')
    return urdf[:end] + options + urdf[end:]


# ---------------------------------------------------------------------------------------------
# MuJoCo
# ---------------------------------------------------------------------------------------------

def build_spec(scene: SceneSpec | str) -> Any:
    """Build the scene's ``mujoco.MjSpec``: robot from its xacro plus the scene's world.

    Names in the compiled model: robot bodies = URDF links, joints = URDF joints, robot geoms
    ``<link>_geom<k>``; static geoms = the scene names (bin parts ``<bin>_floor``,
    ``<bin>_wall_px`` ...); free objects = body, geom ``<name>`` and joint ``<name>_joint``;
    site ``tool0`` (arm), sites ``imu_link`` / ``gps_link`` (base); actuators
    ``<joint>_pos`` + ``<joint>_vel`` (arm), ``<finger joint>_pos`` (gripper), ``<wheel>_vel``
    (base); cameras = scene camera names.

    Args:
        scene: a spec or a scene name.

    Returns:
        An uncompiled ``mujoco.MjSpec`` (call ``.compile()``).
    """
    import mujoco

    if isinstance(scene, str):
        scene = load_scene(scene)
    spec = mujoco.MjSpec.from_string(_mujoco_urdf(expand_xacro(scene.urdf_path)))
    spec.modelname = scene.name
    spec.option.timestep = scene.physics.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0
    spec.visual.quality.offsamples = 0
    spec.visual.quality.shadowsize = 2048
    spec.visual.headlight.ambient = [0.1, 0.1, 0.1]
    spec.visual.headlight.diffuse = [0.3, 0.3, 0.3]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]
    spec.visual.map.znear = 0.01
    spec.stat.extent = 2.0

    for body in spec.bodies:
        for k, geom in enumerate(body.geoms):
            geom.name = f"{body.name}_geom{k}"
    base = spec.body(C.FRAME_BASE)
    base.pos = list(scene.robot.pos)
    base.quat = list(rpy_to_quat((0.0, 0.0, scene.robot.yaw)))
    if scene.robot.is_arm:
        _add_arm(spec, scene)
    else:
        _add_mobile_base(spec, base)
    _add_world(spec, scene)
    return spec


def _add_arm(spec: Any, scene: SceneSpec) -> None:
    import mujoco

    for body in spec.bodies:
        if body.name.startswith(("arm_link_", "gripper_", "wrist_camera", C.FRAME_TOOL)):
            body.gravcomp = 1.0
    for i, name in enumerate(C.ARM_JOINTS):
        joint = spec.joint(name)
        joint.armature = ARM_ARMATURE[i]
        effort = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)[i]
        # The joint clamps the *sum* of both actuators to the URDF effort limit.
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.actfrcrange = [-effort, effort]
        pos = spec.add_actuator(name=f"{name}_pos", target=name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        pos.set_to_position(kp=ARM_KP[i], kv=0.0)
        pos.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        pos.ctrlrange = list(joint.range)
    # Velocity feed-forward actuators after all position ones: ctrl = [q*(7), qd*(7), fingers].
    for i, name in enumerate(C.ARM_JOINTS):
        vel = spec.add_actuator(name=f"{name}_vel", target=name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        vel.set_to_velocity(kv=ARM_KV[i])
        vel.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        vel.ctrlrange = [-3.0, 3.0]
    left, right = (spec.body(n) for n in ("gripper_left_finger", "gripper_right_finger"))
    for name in C.GRIPPER_JOINTS:
        joint = spec.joint(name)
        joint.armature = 0.01
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.actfrcrange = [-40.0, 40.0]
        act = spec.add_actuator(name=f"{name}_pos", target=name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=FINGER_KP, kv=FINGER_KV)
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = [0.0, GRIPPER_MAX_WIDTH / 2]
    for finger in (left, right):
        for geom in finger.geoms:
            geom.friction = [1.5, 0.01, 0.0001]
            geom.condim = 4
            geom.priority = 1
    spec.add_exclude(bodyname1=left.name, bodyname2=right.name)
    spec.body(C.FRAME_TOOL).add_site(name=C.FRAME_TOOL, size=[0.005, 0.005, 0.005],
                                     rgba=[1, 0, 0, 0.0])


def _add_mobile_base(spec: Any, base: Any) -> None:
    import mujoco

    base.add_freejoint(name="base_freejoint")
    for name in C.BASE_WHEEL_JOINTS:
        act = spec.add_actuator(name=f"{name}_vel", target=name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_velocity(kv=WHEEL_KV)
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = [-15.0, 15.0]
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-20.0, 20.0]
    for caster in ("front_caster", "rear_caster"):
        for geom in spec.body(caster).geoms:
            # priority: MuJoCo would otherwise combine with the floor's friction (max)
            geom.friction = [0.0, 0.0, 0.0]
            geom.condim = 1
            geom.priority = 2
    for side in ("left_wheel", "right_wheel"):
        for geom in spec.body(side).geoms:
            # An ellipsoid with the cylinder's radius and width touches the ground at one
            # point; a cylinder touches at both rim edges and scrubs when turning in place.
            radius, half_width = geom.size[0], geom.size[1]
            geom.type = mujoco.mjtGeom.mjGEOM_ELLIPSOID
            geom.size = [radius, radius, half_width]
            geom.friction = [1.2, 0.01, 0.001]
    imu = spec.body(C.FRAME_IMU).add_site(name=C.FRAME_IMU, size=[0.01, 0.01, 0.01])
    spec.body(C.FRAME_GPS).add_site(name=C.FRAME_GPS, size=[0.01, 0.01, 0.01])
    obj = mujoco.mjtObj.mjOBJ_SITE
    spec.add_sensor(name="imu_quat", type=mujoco.mjtSensor.mjSENS_FRAMEQUAT, objtype=obj,
                    objname=imu.name)
    spec.add_sensor(name="imu_gyro", type=mujoco.mjtSensor.mjSENS_GYRO, objtype=obj,
                    objname=imu.name)
    spec.add_sensor(name="imu_accel", type=mujoco.mjtSensor.mjSENS_ACCELEROMETER, objtype=obj,
                    objname=imu.name)


def _add_geom(body: Any, shape: Shape, pos: Sequence[float], quat: Sequence[float],
              **extra: Any) -> Any:
    import mujoco

    gtype = {"box": mujoco.mjtGeom.mjGEOM_BOX, "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
             "sphere": mujoco.mjtGeom.mjGEOM_SPHERE}[shape.shape]
    if shape.shape == "box":
        size = [v / 2 for v in shape.size]
    elif shape.shape == "cylinder":
        size = [shape.size[0], shape.size[1] / 2, 0.0]
    else:
        size = [shape.size[0], 0.0, 0.0]
    return body.add_geom(name=shape.name, type=gtype, size=size, pos=list(pos),
                         quat=list(quat), rgba=list(shape.rgba),
                         friction=[shape.friction, 0.005, 0.0001], **extra)


def _add_world(spec: Any, scene: SceneSpec) -> None:
    import mujoco

    world = spec.worldbody
    tex = spec.add_texture(name="floor_tex", type=mujoco.mjtTexture.mjTEXTURE_2D,
                           builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=256, height=256,
                           rgb1=list(scene.floor.rgba[:3]),
                           rgb2=[0.9 * v for v in scene.floor.rgba[:3]])
    mat = spec.add_material(name="floor_mat", texrepeat=[8, 8], reflectance=0.0)
    mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE,
                   size=[scene.floor.size[0] / 2, scene.floor.size[1] / 2, 0.05],
                   material=mat.name)
    for shape in scene.static_shapes():
        _add_geom(world, shape, shape.pos, rpy_to_quat(shape.rpy))
    for obj in scene.objects:
        body = world.add_body(name=obj.name, pos=list(obj.pos), quat=list(rpy_to_quat(obj.rpy)))
        body.add_freejoint(name=f"{obj.name}_joint")
        geom = _add_geom(body, obj, (0, 0, 0), (1, 0, 0, 0), condim=4, mass=obj.mass)
        geom.friction = [obj.friction, 0.01, 0.0001]
    ltype = {"directional": mujoco.mjtLightType.mjLIGHT_DIRECTIONAL,
             "point": mujoco.mjtLightType.mjLIGHT_POINT,
             "spot": mujoco.mjtLightType.mjLIGHT_SPOT}
    for light in scene.lights:
        world.add_light(name=light.name, type=ltype[light.type], pos=list(light.pos),
                        dir=list(np.asarray(light.dir) / np.linalg.norm(light.dir)),
                        diffuse=list(light.diffuse), specular=list(light.specular),
                        ambient=list(light.ambient), castshadow=light.cast_shadows)
    for cam in scene.cameras:
        if cam.frame:
            # MuJoCo cameras look along -z with y up: the REP 103 optical frame (z forward,
            # y down) rotated by pi about x.
            spec.body(cam.frame).add_camera(name=cam.name, fovy=cam.fovy, quat=[0, 1, 0, 0])
        else:
            fwd, right, up = lookat_axes(cam.pos, cam.lookat)
            quat = np.zeros(4)
            mujoco.mju_mat2Quat(quat, np.column_stack([right, up, -fwd]).ravel())
            world.add_camera(name=cam.name, pos=list(cam.pos), quat=list(quat), fovy=cam.fovy)


def build_model(scene: SceneSpec | str) -> Any:
    """Compile the scene's ``mujoco.MjModel`` (see :func:`build_spec` for the names)."""
    return build_spec(scene).compile()


# ---------------------------------------------------------------------------------------------
# Gazebo world (SDF)
# ---------------------------------------------------------------------------------------------

def _f(v: float) -> str:
    text = f"{v:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _fs(values: Sequence[float]) -> str:
    return " ".join(_f(v) for v in values)


def _sdf_geometry(shape: Shape, indent: str) -> str:
    if shape.shape == "box":
        inner = f"<box><size>{_fs(shape.size)}</size></box>"
    elif shape.shape == "cylinder":
        inner = (f"<cylinder><radius>{_f(shape.size[0])}</radius>"
                 f"<length>{_f(shape.size[1])}</length></cylinder>")
    else:
        inner = f"<sphere><radius>{_f(shape.size[0])}</radius></sphere>"
    return f"{indent}<geometry>{inner}</geometry>\n"


def _sdf_inertia(shape: Shape) -> tuple[float, float, float]:
    m = shape.mass or 0.0
    if shape.shape == "box":
        x, y, z = shape.size
        return (m * (y * y + z * z) / 12, m * (x * x + z * z) / 12, m * (x * x + y * y) / 12)
    if shape.shape == "cylinder":
        r, h = shape.size
        i = m * (3 * r * r + h * h) / 12
        return (i, i, m * r * r / 2)
    i = 2 * m * shape.size[0] ** 2 / 5
    return (i, i, i)


def _sdf_model(shape: Shape, pose: Sequence[float], static: bool) -> str:
    rgba = _fs(shape.rgba)
    lines = [f'    <model name="{shape.name}">',
             f"      <static>{'true' if static else 'false'}</static>",
             f"      <pose>{_fs(pose)}</pose>",
             '      <link name="link">']
    if not static:
        ixx, iyy, izz = _sdf_inertia(shape)
        lines += ["        <inertial>",
                  f"          <mass>{_f(shape.mass)}</mass>",
                  f"          <inertia><ixx>{ixx:.6g}</ixx><iyy>{iyy:.6g}</iyy>"
                  f"<izz>{izz:.6g}</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia>",
                  "        </inertial>"]
    lines += ['        <collision name="collision">',
              _sdf_geometry(shape, "          ").rstrip("\n"),
              f"          <surface><friction><ode><mu>{_f(shape.friction)}</mu>"
              f"<mu2>{_f(shape.friction)}</mu2></ode></friction></surface>",
              "        </collision>",
              '        <visual name="visual">',
              _sdf_geometry(shape, "          ").rstrip("\n"),
              f"          <material><ambient>{rgba}</ambient><diffuse>{rgba}</diffuse>"
              "</material>",
              "        </visual>",
              "      </link>",
              "    </model>"]
    return "\n".join(lines)


def scene_sdf(scene: SceneSpec | str) -> str:
    """Generate the Gazebo (gz-sim, SDF 1.9) world of a scene: the environment without the robot.

    Same objects (nominal poses), static geometry, lights and GPS origin as the MuJoCo model;
    the robot is spawned from its URDF at ``scene.robot.pos`` by the launch file.

    Args:
        scene: a spec or a scene name.

    Returns:
        The SDF XML text (deterministic: equal specs give equal text).
    """
    if isinstance(scene, str):
        scene = load_scene(scene)
    ts = scene.physics.timestep
    out = ['<?xml version="1.0"?>',
           f"<!-- Generated from config/scenes/{scene.name}.yaml by "
           "clawgym_ros.sim.scene.scene_sdf; do not edit (python -m clawgym_ros.sim.scene). -->",
           '<sdf version="1.9">',
           f'  <world name="{scene.name}">',
           f'    <physics name="{_f(ts * 1000)}ms" type="ignored">',
           f"      <max_step_size>{_f(ts)}</max_step_size>",
           "      <real_time_factor>1.0</real_time_factor>",
           "    </physics>",
           '    <plugin filename="gz-sim-physics-system" name="gz::sim::systems::Physics"/>',
           '    <plugin filename="gz-sim-user-commands-system"'
           ' name="gz::sim::systems::UserCommands"/>',
           '    <plugin filename="gz-sim-scene-broadcaster-system"'
           ' name="gz::sim::systems::SceneBroadcaster"/>',
           '    <plugin filename="gz-sim-sensors-system" name="gz::sim::systems::Sensors">',
           "      <render_engine>ogre2</render_engine>",
           "    </plugin>",
           '    <plugin filename="gz-sim-imu-system" name="gz::sim::systems::Imu"/>',
           '    <plugin filename="gz-sim-navsat-system" name="gz::sim::systems::NavSat"/>',
           "    <gravity>0 0 -9.81</gravity>",
           "    <scene>",
           "      <ambient>0.3 0.3 0.3 1</ambient>",
           "      <background>0.7 0.75 0.8 1</background>",
           "      <shadows>false</shadows>",
           "    </scene>"]
    if scene.gps_origin is not None:
        g = scene.gps_origin
        out += ["    <spherical_coordinates>",
                "      <surface_model>EARTH_WGS84</surface_model>",
                "      <world_frame_orientation>ENU</world_frame_orientation>",
                f"      <latitude_deg>{g.latitude:.7f}</latitude_deg>",
                f"      <longitude_deg>{g.longitude:.7f}</longitude_deg>",
                f"      <elevation>{_f(g.altitude)}</elevation>",
                "      <heading_deg>0</heading_deg>",
                "    </spherical_coordinates>"]
    for light in scene.lights:
        d = np.asarray(light.dir) / np.linalg.norm(light.dir)
        out += [f'    <light type="{light.type}" name="{light.name}">',
                f"      <cast_shadows>{'true' if light.cast_shadows else 'false'}</cast_shadows>",
                f"      <pose>{_fs(light.pos)} 0 0 0</pose>",
                f"      <diffuse>{_fs(light.diffuse)} 1</diffuse>",
                f"      <specular>{_fs(light.specular)} 1</specular>",
                f"      <direction>{_fs(d)}</direction>",
                "    </light>"]
    fx, fy = scene.floor.size
    rgba = _fs(scene.floor.rgba)
    out += ['    <model name="floor">',
            "      <static>true</static>",
            '      <link name="link">',
            '        <collision name="collision">',
            f"          <geometry><plane><normal>0 0 1</normal><size>{_f(fx)} {_f(fy)}</size>"
            "</plane></geometry>",
            "        </collision>",
            '        <visual name="visual">',
            f"          <geometry><plane><normal>0 0 1</normal><size>{_f(fx)} {_f(fy)}</size>"
            "</plane></geometry>",
            f"          <material><ambient>{rgba}</ambient><diffuse>{rgba}</diffuse></material>",
            "        </visual>",
            "      </link>",
            "    </model>"]
    for shape in scene.static_shapes():
        out.append(_sdf_model(shape, (*shape.pos, *shape.rpy), static=True))
    for obj in scene.objects:
        out.append(_sdf_model(obj, (*obj.pos, *obj.rpy), static=False))
    for cam in scene.cameras:
        if cam.frame:
            continue  # robot cameras live in the URDF's <gazebo> tags
        fwd, right, up = lookat_axes(cam.pos, cam.lookat)
        rpy = matrix_to_rpy(np.column_stack([fwd, -right, up]))
        out += [f'    <model name="{cam.name}">',
                "      <static>true</static>",
                f"      <pose>{_fs((*cam.pos, *rpy))}</pose>",
                '      <link name="link">',
                f'        <sensor name="{cam.name}" type="camera">',
                f"          <topic>{cam.name}</topic>",
                "          <update_rate>10</update_rate>",
                "          <camera>",
                f"            <horizontal_fov>{_f(_hfov(cam.fovy, 4 / 3))}</horizontal_fov>",
                "            <image><width>320</width><height>240</height></image>",
                "            <clip><near>0.05</near><far>50</far></clip>",
                "          </camera>",
                "        </sensor>",
                "      </link>",
                "    </model>"]
    out += ["  </world>", "</sdf>", ""]
    return "\n".join(out)


def _hfov(fovy_deg: float, aspect: float) -> float:
    """Horizontal field of view (rad) for a vertical one (deg) at an aspect ratio."""
    return 2 * math.atan(math.tan(math.radians(fovy_deg) / 2) * aspect)


def write_worlds(directory: str | Path = WORLDS_DIR) -> list[Path]:
    """Write ``<directory>/<scene>.sdf`` for every scene; returns the paths written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in SCENE_NAMES:
        path = directory / f"{name}.sdf"
        path.write_text(scene_sdf(name))
        paths.append(path)
    return paths


if __name__ == "__main__":  # regenerate the committed worlds
    for written in write_worlds():
        print(written)
