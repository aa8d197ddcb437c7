"""Replay a recorded log's commands in the simulator at given parameter values (MuJoCo,
through :mod:`clawgym_ros.sim.active_calibration`).

The model is the scene's (``clawgym_ros.sim.scene_mjcf.build_spec``). The replay starts from
the log's first joint state (and first object poses), applies the recorded commands as the arm's
position + velocity servo targets - each from its stamp plus the command latency, held until
the next (a physics step straddling a switch gets the time average, so the simulated motion
is smooth in the latency) - and returns positions and velocities at the joint state stamps
(linear interpolation between physics steps) and the efforts the servos exert there: kp (q* -
q) + kv (qd* - qd) with the command in effect at that instant, clamped to the joint's effort
limit (what the robot's effort reading is; the step-averaged control would put half of a
switch's jump on a sample taken just before it). The fingers hold their first recorded
opening. Rollouts run in C (``sim.calibrated.BatchRollout``), several parameter sets in one batch.

When the log's objects never move (no object pose topic, or every object within 1 mm of its
start), contacts are switched off: the excitation is collision-free, and a replay is then
about 3x faster; object mass has no effect on such a log, which the fit reports as "not
excited".
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.calibration.log import LogError, RobotLog
from clawgym_ros.sim.calibrated import (
    BatchRollout,
    ModelParams,
    build_model,
    disable_contacts,
    full_state,
)
from clawgym_ros.sim.calibration_params import BIAS_PREFIX

#: objects that moved less than this (m) count as still
STILL_M = 1e-3


@dataclasses.dataclass
class Prediction:
    """Simulated arm joint readings at the log's joint state stamps (no encoder bias)."""

    position: np.ndarray   # (N, 7)
    velocity: np.ndarray   # (N, 7)
    effort: np.ndarray     # (N, 7)


def objects_moved(log: RobotLog) -> float:
    """Largest displacement (m) of any object from its first recorded pose (0 without poses)."""
    if len(log.object_t) < 2 or log.object_poses.shape[1] == 0:
        return 0.0
    p = log.object_poses[:, :, :3]
    return float(np.linalg.norm(p - p[:1], axis=2).max())


class Replay:
    """A log ready to replay (see the module docstring).

    Args:
        log: the recorded log.
        scene: scene name the robot is modelled by.
        threads: rollout threads (batches of parameter sets run in parallel).

    Raises:
        LogError: the log's joints or objects do not fit the scene's robot.
    """

    def __init__(self, log: RobotLog, scene: str = C.SCENE_TABLETOP, threads: int = 2) -> None:
        self.log = log
        self.moved = objects_moved(log)
        self.contacts = self.moved > STILL_M
        self.model = build_model(scene, objects=self.contacts)
        if not self.contacts:
            disable_contacts(self.model)
        m = self.model
        self.params = ModelParams(m)
        self.dt = float(m.opt.timestep)
        self.cols = log.arm()
        self.cmd_cols = _cmd_columns(log)
        self.s = log.t - log.t[0]
        self.nstep = int(np.ceil(self.s[-1] / self.dt)) + 2
        self.threads = max(1, threads)
        self.rollout = BatchRollout(m, self.threads)
        self.initial = self._initial_state(scene)
        # command values (arm targets, arm velocities) and their running integral
        self.cmd_s = log.cmd_t - log.t[0]
        self.cmd_u = np.concatenate([log.cmd_position[:, self.cmd_cols],
                                     log.cmd_velocity[:, self.cmd_cols]], axis=1)
        steps = np.diff(self.cmd_s)[:, None] * self.cmd_u[:-1]
        self.cmd_int = np.concatenate([np.zeros((1, 14)), np.cumsum(steps, axis=0)])
        self.qpos_off = 1
        self.qvel_off = 1 + m.nq
        self.arm_q = np.array([m.jnt_qposadr[m.joint(n).id] for n in C.ARM_JOINTS])
        self.arm_v = np.array([m.jnt_dofadr[m.joint(n).id] for n in C.ARM_JOINTS])
        arm_j = [m.joint(n).id for n in C.ARM_JOINTS]
        self.effort_lo = m.jnt_actfrcrange[arm_j, 0].copy()
        self.effort_hi = m.jnt_actfrcrange[arm_j, 1].copy()

    def _initial_state(self, scene_name: str) -> np.ndarray:
        from clawgym_ros.sim import scene_spec as S

        m, log = self.model, self.log
        qpos = m.qpos0.copy()
        qvel = np.zeros(m.nv)
        q0 = log.position[0]
        v0 = np.nan_to_num(log.velocity[0])
        for k, name in enumerate(C.ARM_JOINTS):
            j = m.joint(name).id
            qpos[m.jnt_qposadr[j]] = q0[self.cols[k]]
            qvel[m.jnt_dofadr[j]] = v0[self.cols[k]]
        scene = S.load_scene(scene_name)
        fingers = [log.joint_names.index(n) for n in C.GRIPPER_JOINTS if n in log.joint_names]
        width = (q0[fingers] if len(fingers) == 2 else
                 np.full(2, scene.robot.gripper_home / 2))
        for k, name in enumerate(C.GRIPPER_JOINTS):
            qpos[m.jnt_qposadr[m.joint(name).id]] = width[k]
        self.finger_ctrl = np.asarray(width, dtype=np.float64)
        if self.contacts:
            names = [o.name for o in scene.objects]
            if log.object_poses.shape[1] != len(names):
                raise LogError(f"{log.source}: {C.TOPIC_OBJECT_POSES} has "
                               f"{log.object_poses.shape[1]} poses per message, scene "
                               f"{scene.name} has {len(names)} objects ({', '.join(names)})")
            for i, name in enumerate(names):
                adr = m.jnt_qposadr[m.joint(f"{name}_joint").id]
                qpos[adr:adr + 7] = log.object_poses[0, i]
        return full_state(m, qpos, qvel)

    def controls(self, latency: float, on_steps: bool = False) -> np.ndarray:
        """(nstep, nu) controls: each physics step's time average of the delayed commands
        (``on_steps``: the command in effect at the step's middle, i.e. every switch moved to
        the nearest step boundary - the alternative the fit's model-error term compares)."""
        if on_steps:
            mid = (np.arange(self.nstep) + 0.5) * self.dt - latency
            k = np.clip(np.searchsorted(self.cmd_s, mid, side="right") - 1, 0,
                        len(self.cmd_s) - 1)
            arm = self.cmd_u[k]
        else:
            edges = np.arange(self.nstep + 1) * self.dt - latency
            arm = np.diff(self._integral(edges), axis=0) / self.dt
        ctrl = np.empty((self.nstep, self.model.nu))
        ctrl[:, :14] = arm
        ctrl[:, 14:16] = self.finger_ctrl
        return ctrl

    def _integral(self, x: np.ndarray) -> np.ndarray:
        """The integral from the first command of the held command signal, at times ``x``
        (before the first command: the first command held)."""
        s, u, cum = self.cmd_s, self.cmd_u, self.cmd_int
        k = np.clip(np.searchsorted(s, x, side="right") - 1, 0, len(s) - 1)
        return cum[k] + (x - s[k])[:, None] * u[k]

    def run(self, batch: Sequence[Mapping[str, float]], on_steps: bool = False
            ) -> list[Prediction]:
        """Simulate each parameter set of ``batch`` (values by name; missing = nominal);
        ``on_steps``: see :meth:`controls`."""
        models, controls = [], []
        for values in batch:
            model = copy.copy(self.model)
            self.params.apply(model, values)
            models.append(model)
            controls.append(self.controls(float(values.get("command_latency_s", 0.0)),
                                          on_steps))
        state = self.rollout.run(models, self.initial, np.stack(controls), self.nstep)
        return [self._sample(state[b], models[b], float(batch[b].get("command_latency_s", 0.0)))
                for b in range(len(models))]

    def _sample(self, state: np.ndarray, model: Any, latency: float) -> Prediction:
        q = np.concatenate([self.initial[None, self.qpos_off + self.arm_q],
                            state[:, self.qpos_off + self.arm_q]])
        v = np.concatenate([self.initial[None, self.qvel_off + self.arm_v],
                            state[:, self.qvel_off + self.arm_v]])
        x = self.s / self.dt
        i = np.minimum(np.floor(x).astype(int), len(q) - 2)
        f = (x - i)[:, None]

        def interp(a: np.ndarray) -> np.ndarray:
            return a[i] * (1 - f) + a[i + 1] * f

        pos, vel = interp(q), interp(v)
        return Prediction(position=pos, velocity=vel, effort=self._effort(model, latency,
                                                                         pos, vel))

    def _effort(self, model: Any, latency: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The arm servos' joint torque at the sample stamps (see the module docstring)."""
        k = np.clip(np.searchsorted(self.cmd_s, self.s - latency, side="right") - 1, 0,
                    len(self.cmd_s) - 1)
        u = self.cmd_u[k]
        m = model
        pos_act, vel_act = self.params.arm_act[:7], self.params.arm_act[7:14]
        target = np.clip(u[:, :7], m.actuator_ctrlrange[pos_act, 0],
                         m.actuator_ctrlrange[pos_act, 1])
        speed = np.clip(u[:, 7:], m.actuator_ctrlrange[vel_act, 0],
                        m.actuator_ctrlrange[vel_act, 1])
        kp = m.actuator_gainprm[pos_act, 0]
        kv = m.actuator_gainprm[vel_act, 0]
        torque = kp * (target - q) + kv * (speed - qd)
        return np.clip(torque, self.effort_lo, self.effort_hi)


def _cmd_columns(log: RobotLog) -> np.ndarray:
    missing = [n for n in C.ARM_JOINTS if n not in log.cmd_names]
    if missing:
        raise LogError(f"{log.source}: {C.TOPIC_JOINT_TRAJECTORY} commands joints "
                       f"{list(log.cmd_names)[:9]}, not this robot's: missing "
                       f"{', '.join(missing)} (expected {', '.join(C.ARM_JOINTS)})")
    return np.array([log.cmd_names.index(n) for n in C.ARM_JOINTS], dtype=int)


def observe(pred: Prediction, values: Mapping[str, float]) -> np.ndarray:
    """Reported positions: the simulated ones plus each joint's encoder bias."""
    bias = np.array([values.get(BIAS_PREFIX + j, 0.0) for j in C.ARM_JOINTS])
    return pred.position + bias
