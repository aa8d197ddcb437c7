"""A stand-in real robot for tests and benchmarks: the scene's arm in MuJoCo with hidden
parameter offsets, driven by an excitation and recorded to MCAP like a robot log.

What differs from the simulator a calibration starts from (drawn from a seed by
:func:`draw_truth`; only scoring reads them, never the calibrator):

* joint dry friction, damping, armature, servo gain, object mass, command latency (the
  parameters of :mod:`.params`);
* an encoder bias on one arm joint: its reported position is offset, its servo acts on the
  true position;
* sensor noise on every reported position, velocity and effort (white, Gaussian).

Commands take effect exactly at their stamp plus the latency (a 1 ms grid) and hold until the
next: a physics step in which a command switches is split into two half steps at the switch
(the calibrator instead averages the command over such a step). Joint states are sampled at
``state_rate_hz`` (effort = the actuator force at the sample time), object poses at
``object_rate_hz``. ``timestep`` defaults to the scene's physics step (a twin of the
simulator, as the issue asks); a smaller one adds discretization error the calibrator's model
cannot express (model mismatch, as with a real robot).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.calibration.excitation import Excitation
from clawgym_ros.calibration.log import encode_log
from clawgym_ros.sim.calibrated import ModelParams, build_model
from clawgym_ros.sim.calibration_params import BIAS_PREFIX

#: (position rad, velocity rad/s, effort N m) standard deviations of the twin's sensor noise
NOISE = (5e-5, 2e-3, 0.05)


def draw_truth(seed: int) -> dict[str, float]:
    """Hidden parameter values of a twin (all parameters of :mod:`.params`).

    Around the issue's example: friction 0.3-1.0 N m (nominally none), damping x1.5-2.5,
    armature x0.7-1.5, servo gain x0.8-1.25, object mass x1.1-1.3, latency 10-20 ms (1 ms
    grid), one joint's encoder off by 5-20 mrad (either sign), the others exact.
    """
    rng = np.random.default_rng([seed, 0x7717])
    truth = {
        "joint_friction": float(rng.uniform(0.3, 1.0)),
        "damping_scale": float(math.exp(rng.uniform(math.log(1.5), math.log(2.5)))),
        "armature_scale": float(math.exp(rng.uniform(math.log(0.7), math.log(1.5)))),
        "actuator_gain_scale": float(math.exp(rng.uniform(math.log(0.8), math.log(1.25)))),
        "object_mass_scale": float(rng.uniform(1.1, 1.3)),
        "command_latency_s": float(rng.integers(10, 21)) / 1000.0,
    }
    biased = int(rng.integers(0, 7))
    for k, joint in enumerate(C.ARM_JOINTS):
        value = 0.0
        if k == biased:
            value = float(rng.uniform(0.005, 0.02) * rng.choice([-1.0, 1.0]))
        truth[BIAS_PREFIX + joint] = value
    return truth


@dataclasses.dataclass(frozen=True)
class TwinRecording:
    """A twin's log (MCAP bytes) and what only scoring may read."""

    mcap: bytes
    truth: dict[str, float]
    noise: tuple[float, float, float]


def record(excitation: Excitation, truth: dict[str, float], *, seed: int = 0,
           state_rate_hz: float = 100.0, object_rate_hz: float = 10.0,
           noise: tuple[float, float, float] = NOISE, start_stamp: float = 1000.0,
           scene: str = C.SCENE_TABLETOP, timestep: float | None = None) -> TwinRecording:
    """Drive the twin with ``excitation`` and record the log (see the module docstring).

    Args:
        excitation: the joint targets to send (stamped ``start_stamp + t``).
        truth: the hidden values (e.g. :func:`draw_truth`).
        seed: seeds the sensor noise.
        start_stamp: the robot clock at the excitation's start, s.
        timestep: physics step (default: the scene's); a multiple of 1 ms.
    """
    from clawgym_ros.sim import scene_spec as S
    from clawgym_ros.sim.world import MujocoPhysics

    model = build_model(scene, timestep=timestep)
    ModelParams(model).apply(model, truth)
    physics = MujocoPhysics(model)
    data = physics.data
    spec = S.load_scene(scene)
    arm_q = np.array([model.jnt_qposadr[model.joint(n).id] for n in C.ARM_JOINTS])
    joints = (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)
    q_adr = np.array([model.jnt_qposadr[model.joint(n).id] for n in joints])
    v_adr = np.array([model.jnt_dofadr[model.joint(n).id] for n in joints])
    data.qpos[arm_q] = excitation.position[0]
    finger = spec.robot.gripper_home / 2
    for n in C.GRIPPER_JOINTS:
        data.qpos[model.jnt_qposadr[model.joint(n).id]] = finger
    data.ctrl[:7] = excitation.position[0]
    data.ctrl[7:14] = excitation.velocity[0]
    data.ctrl[14:16] = finger
    physics.forward()
    obj_adr = [model.jnt_qposadr[model.joint(f"{o.name}_joint").id] for o in spec.objects]
    ms = 1e-3
    dt = float(model.opt.timestep)
    sub = int(round(dt / ms))
    latency_ms = int(round(truth.get("command_latency_s", 0.0) / ms))
    cmd_ms = np.round(excitation.t / ms).astype(int) + latency_ms
    total_ms = int(round(excitation.t[-1] / ms))
    state_every = int(round(1.0 / (state_rate_hz * ms)))
    object_every = int(round(1.0 / (object_rate_hz * ms)))
    if state_every % sub or object_every % sub:
        raise ValueError("sample periods must be multiples of the physics step")
    bias = np.array([truth.get(BIAS_PREFIX + j, 0.0) for j in C.ARM_JOINTS] + [0.0, 0.0])
    rng = np.random.default_rng([seed, 0x5E75])
    t_js, pos, vel, eff, t_obj, obj = [], [], [], [], [], []
    next_cmd = 0

    def apply_commands(now_ms: int) -> None:
        nonlocal next_cmd
        while next_cmd < len(cmd_ms) and cmd_ms[next_cmd] <= now_ms:
            data.ctrl[:7] = excitation.position[next_cmd]
            data.ctrl[7:14] = excitation.velocity[next_cmd]
            next_cmd += 1

    now = 0
    while now <= total_ms:
        apply_commands(now)
        if now % state_every == 0:
            physics.forward()
            t_js.append(now * ms)
            pos.append(data.qpos[q_adr] + bias)
            vel.append(data.qvel[v_adr].copy())
            eff.append(data.qfrc_actuator[v_adr].copy())
        if now % object_every == 0:
            t_obj.append(now * ms)
            obj.append([data.qpos[a:a + 7].copy() for a in obj_adr])
        switch = next_cmd < len(cmd_ms) and now < cmd_ms[next_cmd] < now + sub
        if switch:
            # split the step at the command's switch time
            split = int(cmd_ms[next_cmd] - now)
            model.opt.timestep = split * ms
            physics.step()
            apply_commands(now + split)
            model.opt.timestep = (sub - split) * ms
            physics.step()
            model.opt.timestep = dt
        else:
            physics.step()
        now += sub
    pos, vel, eff = (np.array(a) for a in (pos, vel, eff))
    pos += rng.normal(0.0, noise[0], pos.shape)
    vel += rng.normal(0.0, noise[1], vel.shape)
    eff += rng.normal(0.0, noise[2], eff.shape)
    meta: dict[str, Any] = {"robot": "claw_arm twin (MuJoCo, hidden parameters)",
                            "scene": scene, "excitation": excitation.config,
                            "state_rate_hz": state_rate_hz}
    data_bytes = encode_log(
        start_stamp + np.array(t_js), joints, pos, vel, eff, start_stamp + excitation.t,
        C.ARM_JOINTS, excitation.position, excitation.velocity,
        start_stamp + np.array(t_obj), np.array(obj), meta)
    return TwinRecording(mcap=data_bytes, truth=dict(truth), noise=tuple(noise))


def write_twin_log(path: str | Path, seed: int, duration_s: float = 60.0, *,
                   hold_s: float = 1.0, ramp_s: float = 2.0,
                   timestep: float | None = None) -> dict[str, float]:
    """Record a twin log of a seeded excitation (hidden values ``draw_truth(seed)``) to
    ``path``; returns the hidden values (for scoring only)."""
    from clawgym_ros.calibration.excitation import ExcitationConfig, make_excitation

    excitation = make_excitation(ExcitationConfig(seed=seed, duration_s=duration_s,
                                                  hold_s=hold_s, ramp_s=ramp_s))
    truth = draw_truth(seed)
    rec = record(excitation, truth, seed=seed, timestep=timestep)
    Path(path).write_bytes(rec.mcap)
    return rec.truth
