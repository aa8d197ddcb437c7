"""Collision checking of arm configurations in a MuJoCo model (mj_kinematics + mj_collision).

The checker owns a private copy of the model and its own MjData, so planning never disturbs a
running simulation. Only pairs that the arm can change are checked: geoms of bodies moved by the
planning joints (and an attached object) against everything else and each other; pairs of two
static geoms (the robot base on the table, an object resting on the table) are masked out with
contype/conaffinity bits, so MuJoCo does not even generate them. Parent-child filtering is
turned off and the SRDF's disabled pairs decide instead, like MoveIt's allowed collision matrix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import mujoco
import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError

_MOVING_TYPE, _MOVING_AFFINITY = 1, 3
_STATIC_TYPE, _STATIC_AFFINITY = 2, 1


@dataclasses.dataclass(frozen=True)
class Contact:
    """One offending contact: bodies, geoms and the signed distance (m, < 0 = penetration)."""

    body1: str
    body2: str
    dist: float
    geom1: str = ""
    geom2: str = ""

    def describe(self) -> str:
        """``body1(geom1)-body2(geom2)``; geom names only for world (static) geometry."""
        a = self.geom1 if self.body1 == "world" and self.geom1 else self.body1
        b = self.geom2 if self.body2 == "world" and self.geom2 else self.body2
        return f"{a}-{b}"


class CollisionChecker:
    """State validity for the joints ``joint_names`` of ``model``.

    Args:
        model: a MuJoCo model containing the robot and its scene (copied).
        joint_names: the planning joints (hinge or slide), in planning order.
        disabled_pairs: unordered body-name pairs never checked (SRDF disable_collisions).
        padding: safety distance in metres; closer than this counts as a collision.
        tool_frame: body (or site) whose pose attached objects follow.
        scene_qpos: full qpos of the scene (object poses, gripper); default: the model's.

    Raises:
        ConfigError: unknown joint or frame names.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        joint_names: Sequence[str] = C.ARM_JOINTS,
        disabled_pairs: Iterable[Iterable[str]] = (),
        padding: float = 0.0,
        tool_frame: str = C.FRAME_TOOL,
        scene_qpos: np.ndarray | None = None,
    ) -> None:
        self.model = _copy_model(model)
        self.data = mujoco.MjData(self.model)
        self.joint_names = tuple(joint_names)
        self.padding = float(padding)
        ids = []
        for name in self.joint_names:
            jid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise ConfigError("joint_names", name, "joints of the MuJoCo model")
            ids.append(jid)
        self.joint_ids = np.array(ids)
        self.qpos_adr = self.model.jnt_qposadr[self.joint_ids]
        self.lower = self.model.jnt_range[self.joint_ids, 0].copy()
        self.upper = self.model.jnt_range[self.joint_ids, 1].copy()
        unlimited = ~self.model.jnt_limited[self.joint_ids].astype(bool)
        self.lower[unlimited], self.upper[unlimited] = -np.pi, np.pi
        self.tool_body, self.tool_site = _frame_ids(self.model, tool_frame)
        self.scene_qpos = (self.model.qpos0.copy() if scene_qpos is None
                           else np.array(scene_qpos, dtype=float))
        # Remember which geoms collide at all (visual-only geoms have contype = conaffinity = 0).
        self._collidable = (self.model.geom_contype != 0) | (self.model.geom_conaffinity != 0)
        self.model.geom_margin[self._collidable] = self.padding
        self.model.geom_gap[:] = 0.0
        self._arm_bodies = self._moved_bodies()
        self._allowed = np.zeros((self.model.nbody, self.model.nbody), dtype=bool)
        self._disabled_names: set[frozenset[str]] = set()
        for pair in disabled_pairs:
            self.disable_pair(*tuple(pair))
        self._attached: tuple[int, int, np.ndarray, np.ndarray, tuple[int, ...]] | None = None
        self._apply_masks()
        self._update_parent_filter()
        self.checks = 0

    # ----------------------------------------------------------------- configuration
    def body_name(self, body_id: int) -> str:
        """Name of a body (``world`` for 0)."""
        return mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, body_id) or "world"

    def body_id(self, name: str) -> int:
        """Id of a body by name.

        Raises:
            ConfigError: unknown body.
        """
        bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if bid < 0:
            raise ConfigError("body", name, "a body of the MuJoCo model")
        return bid

    def disable_pair(self, name1: str, name2: str) -> None:
        """Never check contacts between bodies ``name1`` and ``name2`` (unknown names ignored:
        SRDF links without geometry, e.g. frames fused away, do not matter)."""
        b1 = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name1)
        b2 = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name2)
        self._disabled_names.add(frozenset((name1, name2)))
        if b1 >= 0 and b2 >= 0:
            self._allowed[b1, b2] = self._allowed[b2, b1] = True
        if hasattr(self, "_attached"):
            self._update_parent_filter()

    def set_padding(self, padding: float) -> None:
        """Change the safety distance (m) used by later checks."""
        self.padding = float(padding)
        self.model.geom_margin[self._collidable] = self.padding

    def set_scene_qpos(self, qpos: np.ndarray) -> None:
        """Take the non-planning joints (objects, gripper) from a full simulator qpos."""
        qpos = np.asarray(qpos, dtype=float)
        if qpos.shape != (self.model.nq,):
            raise ConfigError("scene_qpos", qpos.shape, f"shape ({self.model.nq},)")
        self.scene_qpos = qpos.copy()

    def attach(self, body: str, q: Sequence[float], touch_links: Iterable[str] = ()) -> None:
        """Attach a free-floating body to the tool frame at its current relative pose.

        Args:
            body: name of a body with a free joint (the grasped object).
            q: planning-joint configuration at which the grasp holds (e.g. the current one).
            touch_links: robot bodies allowed to touch the object (the fingers and hand).

        Raises:
            ConfigError: unknown body or one without a free joint.
        """
        bid = self.body_id(body)
        jnt = self.model.body_jntadr[bid]
        if jnt < 0 or self.model.jnt_type[jnt] != mujoco.mjtJoint.mjJNT_FREE:
            raise ConfigError("attached_object", body, "a body with a free joint")
        self._forward(np.asarray(q, dtype=float))
        tool_pos, tool_mat = self._tool_pose()
        obj_pos = self.data.xpos[bid].copy()
        obj_mat = self.data.xmat[bid].reshape(3, 3).copy()
        rel_pos = tool_mat.T @ (obj_pos - tool_pos)
        rel_mat = tool_mat.T @ obj_mat
        touch = tuple(self.body_id(name) for name in touch_links)
        self.detach()
        self._attached = (bid, int(self.model.jnt_qposadr[jnt]), rel_pos, rel_mat, touch)
        for t in touch:
            self._allowed[bid, t] = self._allowed[t, bid] = True
        self._apply_masks()

    def detach(self) -> None:
        """Release the attached object (it stays where the scene qpos puts it)."""
        if self._attached is None:
            return
        bid, _, _, _, touch = self._attached
        for t in touch:
            pair = frozenset((self.body_name(bid), self.body_name(t)))
            if pair not in self._disabled_names:
                self._allowed[bid, t] = self._allowed[t, bid] = False
        self._attached = None
        self._apply_masks()

    @property
    def attached_body(self) -> str | None:
        """Name of the attached object, if any."""
        return None if self._attached is None else self.body_name(self._attached[0])

    # ----------------------------------------------------------------- queries
    def within_limits(self, q: Sequence[float], tol: float = 1e-9) -> bool:
        """Whether ``q`` lies inside the joint limits."""
        q = np.asarray(q, dtype=float)
        return bool(np.all(q >= self.lower - tol) and np.all(q <= self.upper + tol))

    def contacts(self, q: Sequence[float]) -> list[Contact]:
        """Contacts that make ``q`` invalid (empty when collision-free)."""
        bodies, dist, geoms = self._offending(np.asarray(q, dtype=float), with_geoms=True)
        return [Contact(self.body_name(b1), self.body_name(b2), float(d), self._geom_name(g1),
                        self._geom_name(g2))
                for (b1, b2), d, (g1, g2) in zip(bodies, dist, geoms, strict=True)]

    def _geom_name(self, geom_id: int) -> str:
        return mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_GEOM, int(geom_id)) or ""

    def is_valid(self, q: Sequence[float]) -> bool:
        """Collision-free (with padding) and within joint limits."""
        q = np.asarray(q, dtype=float)
        if not self.within_limits(q):
            return False
        bodies = self._offending(q)[0]
        return len(bodies) == 0

    def motion_valid(self, q0: Sequence[float], q1: Sequence[float], max_step: float) -> bool:
        """Whether the straight joint-space motion q0 -> q1 is valid at ``max_step`` spacing
        (radians of the largest joint change between checked states); endpoints included."""
        q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
        n = max(1, int(np.ceil(np.max(np.abs(q1 - q0)) / max_step)))
        return all(self.is_valid(q0 + (q1 - q0) * (i / n)) for i in range(n + 1))

    def path_valid(self, positions: np.ndarray, max_step: float) -> tuple[bool, int]:
        """Dense check of a polyline; returns (valid, index of the first bad segment or -1)."""
        positions = np.asarray(positions, dtype=float)
        if len(positions) == 1:
            return self.is_valid(positions[0]), (-1 if self.is_valid(positions[0]) else 0)
        for i in range(len(positions) - 1):
            if not self.motion_valid(positions[i], positions[i + 1], max_step):
                return False, i
        return True, -1

    def tool_pose(self, q: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and rotation matrix (3, 3) of the tool frame at ``q``."""
        self._forward(np.asarray(q, dtype=float))
        pos, mat = self._tool_pose()
        return pos.copy(), mat.copy()

    def body_pose(self, name: str, q: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """World pose of body ``name`` at ``q`` (attached objects follow the tool)."""
        self._forward(np.asarray(q, dtype=float))
        bid = self.body_id(name)
        return self.data.xpos[bid].copy(), self.data.xmat[bid].reshape(3, 3).copy()

    # ----------------------------------------------------------------- internals
    def _moved_bodies(self) -> set[int]:
        """Bodies whose pose depends on a planning joint (subtrees of their bodies)."""
        roots = {int(self.model.jnt_bodyid[j]) for j in self.joint_ids}
        moved = set()
        for b in range(self.model.nbody):
            a = b
            while a > 0:
                if a in roots:
                    moved.add(b)
                    break
                a = int(self.model.body_parentid[a])
        return moved

    def _update_parent_filter(self) -> None:
        """Let MuJoCo skip parent-child pairs (much faster: adjacent links always touch) only
        when every such pair is disabled anyway; otherwise check them and filter here."""
        m = self.model
        bodies = sorted({int(b) for b in m.geom_bodyid[self._collidable]})
        weld = m.body_weldid
        safe = True
        for i, b1 in enumerate(bodies):
            for b2 in bodies[i + 1:]:
                w1, w2 = int(weld[b1]), int(weld[b2])
                if w1 == 0 or w2 == 0 or w1 == w2:
                    continue
                p1, p2 = int(weld[m.body_parentid[w1]]), int(weld[m.body_parentid[w2]])
                if (w1 == p2 or w2 == p1) and not self._allowed[b1, b2]:
                    safe = False
        flag = int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
        if safe:
            m.opt.disableflags &= ~flag
        else:
            m.opt.disableflags |= flag

    def _apply_masks(self) -> None:
        moving = set(self._arm_bodies)
        if self._attached is not None:
            moving.add(self._attached[0])
        is_moving = np.array([int(b) in moving for b in self.model.geom_bodyid])
        col = self._collidable
        self.model.geom_contype[col & is_moving] = _MOVING_TYPE
        self.model.geom_conaffinity[col & is_moving] = _MOVING_AFFINITY
        self.model.geom_contype[col & ~is_moving] = _STATIC_TYPE
        self.model.geom_conaffinity[col & ~is_moving] = _STATIC_AFFINITY

    def _forward(self, q: np.ndarray) -> None:
        d = self.data
        d.qpos[:] = self.scene_qpos
        d.qpos[self.qpos_adr] = q
        mujoco.mj_kinematics(self.model, d)
        if self._attached is not None:
            bid, adr, rel_pos, rel_mat, _ = self._attached
            tool_pos, tool_mat = self._tool_pose()
            quat = np.empty(4)
            mujoco.mju_mat2Quat(quat, (tool_mat @ rel_mat).reshape(-1))
            d.qpos[adr:adr + 3] = tool_pos + tool_mat @ rel_pos
            d.qpos[adr + 3:adr + 7] = quat
            mujoco.mj_kinematics(self.model, d)

    def _tool_pose(self) -> tuple[np.ndarray, np.ndarray]:
        if self.tool_site >= 0:
            return self.data.site_xpos[self.tool_site], self.data.site_xmat[
                self.tool_site].reshape(3, 3)
        return self.data.xpos[self.tool_body], self.data.xmat[self.tool_body].reshape(3, 3)

    def _offending(self, q: np.ndarray, with_geoms: bool = False) -> tuple[np.ndarray, ...]:
        self.checks += 1
        self._forward(q)
        mujoco.mj_collision(self.model, self.data)
        n = self.data.ncon
        if n == 0:
            return np.zeros((0, 2), dtype=int), np.zeros(0), np.zeros((0, 2), dtype=int)
        contact = self.data.contact
        geoms = contact.geom[:n]
        bodies = self.model.geom_bodyid[geoms]
        dist = contact.dist[:n]
        bad = ~self._allowed[bodies[:, 0], bodies[:, 1]] & (dist < self.padding)
        if with_geoms:
            return bodies[bad], dist[bad], geoms[bad]
        return bodies[bad], dist[bad]


def _copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    import copy

    return copy.deepcopy(model)


def _frame_ids(model: mujoco.MjModel, name: str) -> tuple[int, int]:
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if site < 0 and body < 0:
        raise ConfigError("tool_frame", name, "a body or site of the MuJoCo model")
    return body, site
