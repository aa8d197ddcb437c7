"""MuJoCo model of a scene: the robot's xacro plus the scene's world, built with ``mujoco.MjSpec``.

:func:`build_spec` / :func:`build_model` make the model from a
:class:`~clawgym_ros.sim.scene_spec.SceneSpec` (actuators, sites, sensors and cameras are added
here); :func:`expand_xacro` expands a robot description. MuJoCo is imported lazily (only
:func:`build_spec` needs it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.sim.scene_spec import (
    GRIPPER_MAX_WIDTH,
    SceneSpec,
    Shape,
    load_scene,
    lookat_axes,
    rpy_to_quat,
)

# Actuator gains of the arm: kp (N m / rad) of the position actuators and kv (N m s / rad) of the
# velocity feed-forward actuators (Panda-like impedance; tracking measured ~0.01 rad).
ARM_KP = (1500.0, 1500.0, 1200.0, 1200.0, 400.0, 300.0, 150.0)
ARM_KV = (100.0, 100.0, 80.0, 80.0, 25.0, 20.0, 10.0)
ARM_ARMATURE = (0.2, 0.2, 0.2, 0.2, 0.05, 0.05, 0.05)
FINGER_KP = 2000.0          # N/m; saturates at the URDF effort limit when closed on an object
FINGER_KV = 40.0
WHEEL_KV = 20.0             # N m s / rad of the wheel velocity servos


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
