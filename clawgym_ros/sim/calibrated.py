"""A MuJoCo model at calibrated values, and the replay machinery of the calibration fit.

:class:`ModelParams` sets a compiled model's physical parameters (:mod:`.calibration_params`)
relative to its defaults; :func:`apply_to_model` does it for fitted values (the active
calibration is :mod:`.active_calibration`'s). The calibration fit (``clawgym_ros.calibration``)
replays logs through :func:`build_model`, :func:`full_state`, :func:`disable_contacts` and
:class:`BatchRollout`, checks its excitation with :class:`ContactsBeyondHome`, and its stand-in
robot steps a :class:`~.world.MujocoPhysics`: nothing in ``calibration/`` imports ``mujoco``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import mujoco
import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.sim.active_calibration import split_values
from clawgym_ros.sim.calibration_params import PARAMS


def apply_to_model(model: Any, values: dict[str, float]) -> None:
    """Set a scene model's joint friction, damping, armature, arm servo gains and object
    masses to ``values`` (relative to the model as compiled; missing = nominal)."""
    ModelParams(model).apply(model, split_values(values)[0])


def build_model(scene_name: str = C.SCENE_TABLETOP, timestep: float | None = None,
                objects: bool = True) -> Any:
    """The scene's MjModel (optionally without its objects, or with another physics step)."""
    from clawgym_ros.sim import scene_mjcf as MJ
    from clawgym_ros.sim import scene_spec as S

    scene = S.load_scene(scene_name)
    if not objects:
        scene = dataclasses.replace(scene, objects=())
    spec = MJ.build_spec(scene)
    if timestep is not None:
        spec.option.timestep = timestep
    return spec.compile()


class ModelParams:
    """Sets a model's physical parameters (``calibration_params.PHYSICS`` kinds) relative to its
    defaults."""

    def __init__(self, model: Any) -> None:
        m = model
        self.arm_dof = np.array([m.jnt_dofadr[m.joint(n).id] for n in C.ARM_JOINTS])
        arm_ids = {m.joint(n).id for n in C.ARM_JOINTS}
        self.arm_act = np.array([a for a in range(m.nu) if m.actuator_trnid[a, 0] in arm_ids])
        free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self.object_bodies = np.array([m.jnt_bodyid[j] for j in free], dtype=int)
        self.defaults = {k: getattr(m, k).copy() for k in (
            "dof_frictionloss", "dof_damping", "dof_armature", "actuator_gainprm",
            "actuator_biasprm", "body_mass", "body_inertia")}

    def apply(self, model: Any, values: Mapping[str, float]) -> None:
        """Set ``model``'s fields from the defaults and ``values`` (missing = nominal)."""
        dft = self.defaults
        for key, arr in dft.items():
            getattr(model, key)[:] = arr
        v = {n: values.get(n, PARAMS[n].nominal) for n in PARAMS}
        dof = self.arm_dof
        model.dof_frictionloss[dof] = v["joint_friction"]
        model.dof_damping[dof] = dft["dof_damping"][dof] * v["damping_scale"]
        model.dof_armature[dof] = dft["dof_armature"][dof] * v["armature_scale"]
        act = self.arm_act
        g = v["actuator_gain_scale"]
        model.actuator_gainprm[act, 0] = dft["actuator_gainprm"][act, 0] * g
        model.actuator_biasprm[act, 1:3] = dft["actuator_biasprm"][act, 1:3] * g
        b = self.object_bodies
        model.body_mass[b] = dft["body_mass"][b] * v["object_mass_scale"]
        model.body_inertia[b] = dft["body_inertia"][b] * v["object_mass_scale"]


def disable_contacts(model: Any) -> None:
    """Switch contacts off in ``model`` (a collision-free replay runs about 3x faster)."""
    model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)


def full_state(model: Any, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """The full physics state vector (time first, then qpos, qvel, ...) of ``model`` at
    ``qpos`` / ``qvel`` after a forward pass: the initial state of a :class:`BatchRollout`."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    data.qvel[:] = qvel
    mujoco.mj_forward(model, data)
    out = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, out, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    return out


class BatchRollout:
    """Open-loop rollouts of several variants of one model in C threads (``mujoco.rollout``).

    Args:
        model: the model the variants are copies of.
        threads: how many rollouts run in parallel.
    """

    def __init__(self, model: Any, threads: int) -> None:
        self.threads = max(1, threads)
        self.datas = [mujoco.MjData(model) for _ in range(self.threads)]

    def run(self, models: Sequence[Any], initial: np.ndarray, controls: np.ndarray,
            nstep: int) -> np.ndarray:
        """(len(models), nstep, state size) full physics states after each step, from the
        state vector ``initial`` (:func:`full_state`) under ``controls`` (len(models), nstep,
        nu)."""
        from mujoco import rollout

        state, _ = rollout.rollout(list(models), self.datas[:min(self.threads, len(models))],
                                   initial[None], controls, nstep=nstep)
        return state


class ContactsBeyondHome:
    """Contacts (closer than 5 mm) of a model at configurations of the named joints, beyond
    those it has at ``home`` (the excitation's collision check)."""

    def __init__(self, model: Any, home: np.ndarray, joints: Sequence[str]) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.qadr = np.array([model.jnt_qposadr[model.joint(n).id] for n in joints])
        self.allowed = self._pairs(home)

    def _pairs(self, q: np.ndarray) -> set[tuple[int, int]]:
        d = self.data
        d.qpos[:] = self.model.qpos0
        d.qpos[self.qadr] = q
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_collision(self.model, d)
        out = set()
        for i in range(d.ncon):
            con = d.contact[i]
            if con.dist < 0.005:
                out.add((int(con.geom1), int(con.geom2)))
        return out

    def free(self, path: np.ndarray) -> bool:
        """Whether no configuration of ``path`` (rows) adds a contact to those at home."""
        return all(self._pairs(q) <= self.allowed for q in path)
