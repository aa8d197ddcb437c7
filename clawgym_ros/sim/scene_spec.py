"""Scene specs: authored once in ``config/scenes/<name>.yaml``, the single source of a world.

A :class:`SceneSpec` (robot URDF + pose, static geometry, bins, free objects with
randomization ranges, lights, cameras, GPS origin) is loaded by :func:`load_scene` and turned
into MuJoCo by :mod:`clawgym_ros.sim.scene_mjcf` and into the Gazebo world by
:mod:`clawgym_ros.sim.scene_sdf`. :func:`sample_object_poses` / :func:`sample_robot_pose` draw
the randomized poses from a caller-supplied ``np.random.Generator`` (both back ends use the same
sampler); :func:`rpy_to_quat`, :func:`lookat_axes` and :func:`matrix_to_rpy` are the pure
geometry helpers both writers share. No MuJoCo here.
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
SHAPES = ("box", "cylinder", "sphere")
LIGHT_TYPES = ("directional", "point", "spot")
SCENE_NAMES = (C.SCENE_TABLETOP, C.SCENE_OUTDOOR)

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
