"""Gazebo world of a scene: ``worlds/<name>.sdf`` generated from its spec.

:func:`scene_sdf` writes the environment only (the robot is spawned from the same URDF by
``launch/gazebo_launch.py``). A test checks that the committed SDF equals the generated one;
regenerate with ``python -m clawgym_ros.sim.scene_sdf``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clawgym_ros.sim.scene_spec import (
    ROOT,
    SCENE_NAMES,
    SceneSpec,
    Shape,
    load_scene,
    lookat_axes,
    matrix_to_rpy,
)

#: the committed worlds (``worlds/<scene>.sdf``), written by :func:`write_worlds`
WORLDS_DIR = ROOT / "worlds"


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
           "clawgym_ros.sim.scene_sdf.scene_sdf; do not edit "
           "(python -m clawgym_ros.sim.scene_sdf). -->",
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
