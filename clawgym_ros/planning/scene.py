"""Planning scenes on top of the simulator's scene builder: the tabletop plus extra obstacles.

The benchmark and the tracking test use a wall across the table that separates a left start
region from a right goal region, so that straight joint-space motions mostly collide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.sim import scene_mjcf as MJ
from clawgym_ros.sim import scene_spec as S

#: A wall across the table between y > 0 and y < 0: 40 cm long, 35 cm tall (top at z = 0.75);
#: the arm must go over it or around its near end.
WALL_OBSTACLES: tuple[S.Shape, ...] = (
    S.Shape(name="planning_wall", shape="box", size=(0.40, 0.03, 0.35),
            pos=(0.55, 0.0, 0.575), rgba=(0.5, 0.5, 0.55, 1.0)),
)


def scene_with_obstacles(
    scene: str | S.SceneSpec = "tabletop", obstacles: Sequence[S.Shape] = WALL_OBSTACLES,
) -> S.SceneSpec:
    """The scene spec with ``obstacles`` added as static geometry."""
    spec = S.load_scene(scene) if isinstance(scene, str) else scene
    return dataclasses.replace(spec, obstacles=(*spec.obstacles, *obstacles))


def build_planning_model(
    scene: str | S.SceneSpec = "tabletop", obstacles: Sequence[S.Shape] = WALL_OBSTACLES,
) -> tuple[Any, S.SceneSpec]:
    """Compiled MuJoCo model (with the sim's actuators) of the scene plus obstacles."""
    spec = scene_with_obstacles(scene, obstacles)
    return MJ.build_model(spec), spec


def home_qpos(model: Any, spec: S.SceneSpec) -> np.ndarray:
    """Full qpos: arm at the scene's home, gripper open, objects at their nominal poses."""
    qpos = model.qpos0.copy()
    for name, value in zip(C.ARM_JOINTS, spec.robot.home, strict=True):
        qpos[model.jnt_qposadr[model.joint(name).id]] = value
    for name in C.GRIPPER_JOINTS:
        qpos[model.jnt_qposadr[model.joint(name).id]] = spec.robot.gripper_home / 2
    return qpos


def describe_obstacles(obstacles: Sequence[S.Shape]) -> list[dict[str, Any]]:
    """JSON-able obstacle list (for benchmark output)."""
    return [{"name": o.name, "shape": o.shape, "size": list(o.size), "pos": list(o.pos)}
            for o in obstacles]
