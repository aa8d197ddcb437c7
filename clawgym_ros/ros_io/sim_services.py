"""Conversions between the simulator services' requests and the core's settings dataclasses.

Used by sim_node (server side), the lighting/dynamics perturbation nodes and the lockstep
evaluator (client side).
"""

from __future__ import annotations

from geometry_msgs.msg import Point, Vector3

from clawgym_interfaces.srv import SetCameraPose, SetDynamics, SetLighting
from clawgym_ros.sim.backend import CameraPoseSettings, DynamicsSettings, LightingSettings


def lighting_settings(request: SetLighting.Request) -> LightingSettings | None:
    """LightingSettings of a SetLighting request; None when it asks to restore defaults.

    Raises:
        ConfigError: a value outside the allowed range (named in the message).
    """
    if request.restore_defaults:
        return None
    d, p = request.direction, request.position
    return LightingSettings(
        light_name=request.light_name, diffuse_scale=request.diffuse_scale,
        ambient_scale=request.ambient_scale, specular_scale=request.specular_scale,
        headlight_scale=request.headlight_scale,
        direction=(d.x, d.y, d.z) if request.set_direction else None,
        position=(p.x, p.y, p.z) if request.set_position else None,
    )


def lighting_request(settings: LightingSettings | None) -> SetLighting.Request:
    """A SetLighting request for ``settings`` (None: restore the defaults)."""
    if settings is None:
        return SetLighting.Request(restore_defaults=True)
    request = SetLighting.Request(
        light_name=settings.light_name, diffuse_scale=settings.diffuse_scale,
        ambient_scale=settings.ambient_scale, specular_scale=settings.specular_scale,
        headlight_scale=settings.headlight_scale)
    if settings.direction is not None:
        request.set_direction = True
        request.direction = Vector3(x=float(settings.direction[0]),
                                    y=float(settings.direction[1]),
                                    z=float(settings.direction[2]))
    if settings.position is not None:
        request.set_position = True
        request.position = Point(x=float(settings.position[0]), y=float(settings.position[1]),
                                 z=float(settings.position[2]))
    return request


def dynamics_settings(request: SetDynamics.Request) -> DynamicsSettings | None:
    """DynamicsSettings of a SetDynamics request; None when it asks to restore defaults.

    Raises:
        ConfigError: a value outside the allowed range (named in the message).
    """
    if request.restore_defaults:
        return None
    return DynamicsSettings(
        target=request.target, mass_scale=request.mass_scale,
        friction_scale=request.friction_scale, damping_scale=request.damping_scale,
        actuator_gain_scale=request.actuator_gain_scale,
        command_latency=request.command_latency,
    )


def dynamics_request(settings: DynamicsSettings | None) -> SetDynamics.Request:
    """A SetDynamics request for ``settings`` (None: restore the defaults)."""
    if settings is None:
        return SetDynamics.Request(restore_defaults=True)
    return SetDynamics.Request(
        target=settings.target, mass_scale=settings.mass_scale,
        friction_scale=settings.friction_scale, damping_scale=settings.damping_scale,
        actuator_gain_scale=settings.actuator_gain_scale,
        command_latency=settings.command_latency)


def camera_pose_settings(request: SetCameraPose.Request) -> CameraPoseSettings | None:
    """CameraPoseSettings of a SetCameraPose request; None when it asks to restore defaults.

    Raises:
        ConfigError: a value outside the allowed range (named in the message).
    """
    if request.restore_defaults:
        return None
    o, r = request.offset, request.rotation
    return CameraPoseSettings(camera_name=request.camera_name, offset=(o.x, o.y, o.z),
                              rotation=(r.x, r.y, r.z))


def camera_pose_request(settings: CameraPoseSettings | None) -> SetCameraPose.Request:
    """A SetCameraPose request for ``settings`` (None: restore the defaults)."""
    if settings is None:
        return SetCameraPose.Request(restore_defaults=True)
    o, r = settings.offset, settings.rotation
    return SetCameraPose.Request(
        camera_name=settings.camera_name,
        offset=Vector3(x=float(o[0]), y=float(o[1]), z=float(o[2])),
        rotation=Vector3(x=float(r[0]), y=float(r[1]), z=float(r[2])))
