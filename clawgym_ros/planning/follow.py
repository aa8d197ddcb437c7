"""Execute a planned trajectory in MuJoCo with the simulator's arm actuators and measure it.

Per physics step the position actuators (``<joint>_pos``) get the trajectory's position and the
velocity actuators (``<joint>_vel``) its velocity as feed-forward, as sim_node does. The result
reports the largest tracking error (over every physics step, hence every control step) and any
contact between the arm and the scene's static geometry or objects.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from clawgym_ros.planning.types import Trajectory
from clawgym_ros.sim.world import MujocoPhysics


@dataclasses.dataclass
class FollowResult:
    """Tracking outcome."""

    max_error: float             # rad, over all steps and joints
    final_error: float           # rad, after the settle time
    steps: int
    arm_contacts: list[tuple[str, str]]  # (arm body, other body or geom) pairs touched


def follow_trajectory(
    model: Any,
    data: Any,
    trajectory: Trajectory,
    settle: float = 0.2,
    ignore_bodies: tuple[str, ...] = (),
) -> FollowResult:
    """Run ``trajectory`` from the data's current state (the arm should be at its start).

    Args:
        model, data: a simulation with ``<joint>_pos`` and ``<joint>_vel`` actuators.
        trajectory: the planned trajectory (times from 0).
        settle: extra seconds holding the last point.
        ignore_bodies: bodies whose contacts with the arm are expected (e.g. a grasped object).

    Returns:
        A :class:`FollowResult`.
    """
    names = trajectory.joint_names
    qadr = np.array([model.jnt_qposadr[model.joint(n).id] for n in names])
    pos_act = np.array([model.actuator(f"{n}_pos").id for n in names])
    vel_act = np.array([model.actuator(f"{n}_vel").id for n in names])
    sim = trajectory.to_sim()
    physics = MujocoPhysics(model, data)
    arm_bodies = _arm_bodies(model, names)
    ignore = {model.body(b).id for b in ignore_bodies}
    t0 = data.time
    steps = int(np.ceil((trajectory.duration + settle) / model.opt.timestep))
    max_err = 0.0
    touched: set[tuple[str, str]] = set()
    for _ in range(steps):
        ref, vel = sim.sample(data.time - t0 + model.opt.timestep)
        data.ctrl[pos_act] = ref
        data.ctrl[vel_act] = vel
        physics.step()
        ref_now, _ = sim.sample(data.time - t0)
        max_err = max(max_err, float(np.max(np.abs(data.qpos[qadr] - ref_now))))
        for c in data.contact[:data.ncon]:
            b1, b2 = int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])
            for arm, other, g in ((b1, b2, c.geom2), (b2, b1, c.geom1)):
                if arm in arm_bodies and other not in arm_bodies and other not in ignore:
                    label = (model.geom(int(g)).name if other == 0 else model.body(other).name)
                    touched.add((model.body(arm).name, label))
    final = float(np.max(np.abs(data.qpos[qadr] - trajectory.positions[-1])))
    return FollowResult(max_err, final, steps, sorted(touched))


def _arm_bodies(model: Any, joint_names: tuple[str, ...]) -> set[int]:
    roots = {int(model.jnt_bodyid[model.joint(n).id]) for n in joint_names}
    out = set()
    for b in range(model.nbody):
        a = b
        while a > 0:
            if a in roots:
                out.add(b)
                break
            a = int(model.body_parentid[a])
    return out
