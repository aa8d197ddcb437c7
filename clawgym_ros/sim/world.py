"""The World contract: what tasks, experts, planning and evaluation need from a simulator.

Four parts, each with its MuJoCo implementation in ``sim/`` (nothing outside ``sim/`` imports
``mujoco``; test/test_boundaries.py):

1. Stepping, state, lighting and dynamics of a running world: :class:`~.backend.SimBackend`
   (``reset``, ``step``, ``get_state`` / ``set_state``, ``set_lighting``, ``set_dynamics``,
   ``restore_defaults``, ``time``; :class:`~.mujoco_backend.MujocoBackend`).
   :class:`~.gazebo_backend.GazeboBackend` offers reset, lighting, object mass and friction
   and stepping over gz-transport, and raises for the knobs gz-sim cannot change at run time.
2. Physics queries on a model and its state: :class:`Physics` (names -> indices, forward
   kinematics, site poses and Jacobians, physics steps, contact forces and flagged contacts,
   state copies); :class:`MujocoPhysics`. ``MujocoPhysics(backend.model, backend.data)`` reads and
   moves a running backend; :meth:`MujocoPhysics.scratch` gives a private copy for planning
   and experts (kinematics only, no effect on the world).
3. Collision queries of arm configurations for planning:
   :class:`~.collision.CollisionChecker` (a private model copy; MuJoCo's collision detection).
4. Scene edits before compiling (tasks add geoms, mocap bodies and welds to a template's
   uncompiled model): :func:`spec_enum` names the element types, :func:`model_from_xml`
   compiles a robot description.

Model and data arrays (``model.jnt_range``, ``data.qpos``, ``data.site_xpos``...) keep
MuJoCo's layout; :class:`Physics` is what a caller needs beyond reading them. A backend that
cannot offer a part says so (``GazeboBackend`` offers none of parts 2-4: gz-transport exposes
no Jacobians, contact forces or private model copies). docs/extending.md walks through adding
a backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import mujoco
import numpy as np

#: Kinds of named model elements (:meth:`Physics.index`).
KINDS = ("body", "site", "geom", "joint", "actuator", "camera", "light")

_OBJ = {kind: getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}") for kind in KINDS}
#: spec_enum groups -> (MuJoCo enum, prefix of its members)
_ENUMS = {"geom": (mujoco.mjtGeom, "mjGEOM_"), "equality": (mujoco.mjtEq, "mjEQ_"),
          "object": (mujoco.mjtObj, "mjOBJ_"), "joint": (mujoco.mjtJoint, "mjJNT_")}

#: Engine and its version, for benchmark records.
ENGINE, ENGINE_VERSION = "mujoco", mujoco.__version__


class Physics(Protocol):
    """Physics queries on one model and its state (part 2 of the module docstring)."""

    model: Any
    data: Any

    def index(self, kind: str, name: str) -> int:
        """Index of the ``kind`` element called ``name``; -1 when there is none."""

    def kinematics(self, com: bool = False) -> None:
        """Positions and orientations of every body, site and geom from ``qpos``; with ``com``
        also what :meth:`site_jacobian` needs."""

    def forward(self) -> None:
        """Every derived quantity (kinematics, contacts, forces) from the current state."""

    def step(self, n: int = 1) -> None:
        """``n`` physics steps with the current controls."""

    def site_pose(self, site: int) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation matrix (3, 3)) of a site, as of the last kinematics."""

    def site_jacobian(self, site: int) -> tuple[np.ndarray, np.ndarray]:
        """(translational, rotational) Jacobians (3, nv) of a site; needs
        ``kinematics(com=True)`` first."""

    def contacts(self, flagged: np.ndarray) -> tuple[float, bool]:
        """(largest contact normal force in N, whether two geoms marked in the (ngeom, ngeom)
        boolean matrix ``flagged`` touch) at this instant."""

    def copy_state_from(self, other: Physics) -> None:
        """Take over ``other``'s whole state (same model)."""

    def scratch(self) -> Physics:
        """A private state of the same model (a planning / expert copy)."""


class MujocoPhysics:
    """:class:`Physics` over a MuJoCo ``MjModel`` and ``MjData`` (a new one when not given)."""

    def __init__(self, model: Any, data: Any = None) -> None:
        self.model = model
        self.data = mujoco.MjData(model) if data is None else data
        self._jacp: np.ndarray | None = None
        self._jacr: np.ndarray | None = None

    def index(self, kind: str, name: str) -> int:
        return name_index(self.model, kind, name)

    def kinematics(self, com: bool = False) -> None:
        mujoco.mj_kinematics(self.model, self.data)
        if com:
            mujoco.mj_comPos(self.model, self.data)

    def forward(self) -> None:
        mujoco.mj_forward(self.model, self.data)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            mujoco.mj_step(self.model, self.data)

    def site_pose(self, site: int) -> tuple[np.ndarray, np.ndarray]:
        return self.data.site_xpos[site], self.data.site_xmat[site].reshape(3, 3)

    def site_jacobian(self, site: int) -> tuple[np.ndarray, np.ndarray]:
        if self._jacp is None:
            self._jacp = np.zeros((3, self.model.nv))
            self._jacr = np.zeros((3, self.model.nv))
        mujoco.mj_jacSite(self.model, self.data, self._jacp, self._jacr, site)
        return self._jacp, self._jacr

    def contacts(self, flagged: np.ndarray) -> tuple[float, bool]:
        return contact_summary(self.data, flagged)

    def copy_state_from(self, other: Physics) -> None:
        mujoco.mj_copyData(self.data, self.model, other.data)

    def scratch(self) -> MujocoPhysics:
        return MujocoPhysics(self.model)


def name_index(model: Any, kind: str, name: str) -> int:
    """Index of the ``kind`` element (one of :data:`KINDS`) called ``name``; -1 when none."""
    return int(mujoco.mj_name2id(model, _OBJ[kind], name))


def contact_summary(data: Any, flagged: np.ndarray) -> tuple[float, bool]:
    """:meth:`Physics.contacts` of a MuJoCo ``MjData`` (called every control step by the task
    envs: a plain loop over the few active contacts, ~4x cheaper than NumPy calls on arrays
    this small). The force is the largest ``|efc_force|`` of a contact's first constraint row
    (NaN if any is NaN, as ``np.max``); a contact counts as touching at ``dist <= 0``."""
    n = data.ncon
    if n == 0:
        return 0.0, False
    con = data.contact
    efc = con.efc_address.tolist()
    dist = con.dist.tolist()
    efc_force = data.efc_force.tolist()
    force, active, unintended = 0.0, False, False
    geoms = None
    for i in range(n):
        row = efc[i]
        if row < 0:
            continue
        value = abs(efc_force[row])
        if not active or value > force or value != value:
            force = value if force == force else force      # a NaN stays
        active = True
        if not unintended and dist[i] <= 0.0:
            if geoms is None:
                geoms = con.geom.tolist()
            g1, g2 = geoms[i]
            unintended = bool(flagged[g1, g2])
    return force, unintended


def joint_ranges(model: Any, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) limits of the named joints (copies)."""
    lo, hi = model.jnt_range[[name_index(model, "joint", n) for n in names]].T
    return lo.copy(), hi.copy()


def is_scalar_joint(model: Any, joint: int) -> bool:
    """Whether a joint has one coordinate (hinge or slide)."""
    return int(model.jnt_type[joint]) in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                          int(mujoco.mjtJoint.mjJNT_SLIDE))


def mat_to_quat(mat: Any, out: np.ndarray | None = None) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a 3x3 rotation matrix (any shape with 9 values)."""
    quat = np.empty(4) if out is None else out
    mujoco.mju_mat2Quat(quat, np.asarray(mat, dtype=float).reshape(-1))
    return quat


def quat_to_mat(quat: Any) -> np.ndarray:
    """3x3 rotation matrix of a unit quaternion (w, x, y, z)."""
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    return mat.reshape(3, 3)


def spec_enum(group: str, name: str) -> Any:
    """An element type for scene edits: ``spec_enum("geom", "box")``, ``("equality", "weld")``,
    ``("object", "body")``, ``("joint", "hinge")``.

    Raises:
        KeyError: an unknown group. AttributeError: an unknown name in the group.
    """
    enum, prefix = _ENUMS[group]
    return getattr(enum, prefix + name.upper())


def model_from_xml(text: str) -> Any:
    """Compile a model from MJCF or URDF text."""
    return mujoco.MjModel.from_xml_string(text)


def enable_energy(model: Any) -> None:
    """Have the model compute kinetic and potential energy every step."""
    model.opt.enableflags |= int(mujoco.mjtEnableBit.mjENBL_ENERGY)
