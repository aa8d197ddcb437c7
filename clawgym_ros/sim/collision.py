"""Collision checking of arm configurations in a MuJoCo model (mj_kinematics + mj_collision).

The checker owns a private copy of the model and its own MjData, so planning never disturbs a
running simulation. Only pairs that the arm can change are checked: geoms of bodies moved by the
planning joints (and an attached object) against everything else and each other; pairs of two
static geoms (the robot base on the table, an object resting on the table) are masked out with
contype/conaffinity bits, so MuJoCo does not even generate them. The SRDF's disabled pairs
(and an attached object's touch links) form an allowed-collision matrix, as in MoveIt; it is
compiled into the contype/conaffinity bits too (one bit per moving body, one per group of
static bodies that the same moving bodies may touch), so MuJoCo generates contacts only for
pairs that count. Parent-child filtering stays on when every parent-child pair is disabled.

Fast path: a check writes only the planning joints into a reused ``MjData`` (the rest of its
qpos holds the scene), compares limits with plain floats and answers from ``ncon`` when MuJoCo
finds no contact; no arrays are allocated per check.

Dense paths (:meth:`CollisionChecker.path_valid`, :meth:`CollisionChecker.motion_valid`) give
the same answer as checking every interpolated state, with fewer MuJoCo queries: a clearance
probe at a state (distances of the pairs within ``padding + PROBE_MARGIN``, see
:class:`_Clearance`) certifies the states whose point displacement bound (sum over joints of
reach x joint change, an upper bound for a serial chain of hinges) stays below the clearance;
a state not certified is checked exactly. A state is only ever declared invalid by the exact
check.
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
#: Tolerance of the joint-limit test of a state (rad).
LIMIT_TOL = 1e-9
#: Clearance probes measure the pairs closer than padding + this (m) by a cheap bound; all
#: others count as this far.
PROBE_MARGIN = 0.12
#: A probe certifies states whose point displacement bound is below this share of its clearance.
CERTIFY_SHARE = 0.9
#: A probe goes this share of its predecessor's span of certified states ahead of the first
#: state not yet known valid (measured on 30 bench paths: 0 -> 127 probes a path, 0.4 -> 88,
#: 0.5 -> 97, 0.65 -> 133).
AHEAD = 0.4
#: Clearances below this (m) certify nothing: the state is checked exactly instead. Also taken
#: off every probed distance (MuJoCo's convex distances are iterative).
MIN_CLEARANCE = 1e-3
#: Convex-collision iterations and tolerance of clearance probes (mj_geomDistance) for pairs
#: with a curved shape. With the model's defaults (35, 1e-6), mj_collision with a 5 cm margin
#: reported a cylinder pair touching at -2e-6 m as 0.27 mm apart (6.7 mm with 20 cm): GJK
#: stops early near contact. mj_geomDistance with the defaults was within 0.2 um of these
#: settings on 1,807 pairs near contacts; they are kept as a safety margin.
PROBE_CCD = (1000, 1e-10)
#: Motions with fewer interpolated states than this are checked state by state.
MIN_CERTIFIED_STATES = 8


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
        n = len(ids)
        adr = [int(a) for a in self.qpos_adr]
        # A slice when the planning joints are consecutive in qpos (no index array per check).
        self._arm: slice | np.ndarray = (slice(adr[0], adr[0] + n)
                                         if adr == list(range(adr[0], adr[0] + n))
                                         else self.qpos_adr.copy())
        self._lo_tol = self.lower - LIMIT_TOL
        self._hi_tol = self.upper + LIMIT_TOL
        self._limits = tuple(zip(self._lo_tol.tolist(), self._hi_tol.tolist(), strict=True))
        self._qpos = self.data.qpos
        self._quat = np.empty(4)
        self._ccd = (self.model.opt.ccd_iterations, self.model.opt.ccd_tolerance)
        self._collidable_ids = np.flatnonzero(self._collidable)
        self._moving = np.zeros(self.model.nbody, dtype=bool)
        self._acm_bits = False
        self._chain = self._serial_chain()
        self._clearance: _Clearance | None = None
        self._joint_index = np.arange(n)
        self._apply_masks()
        self._update_parent_filter()
        self._qpos[:] = self.scene_qpos
        #: Exact state checks (MuJoCo collision queries at the padding) since construction.
        self.checks = 0
        #: Clearance probes of dense path checks since construction.
        self.probes = 0

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
            self._apply_masks()
            self._update_parent_filter()
            self._clearance = None          # probes pre-select by the allowed matrix too

    def set_padding(self, padding: float) -> None:
        """Change the safety distance (m) used by later checks."""
        self.padding = float(padding)
        self._set_margin(self.padding)

    def set_scene_qpos(self, qpos: np.ndarray) -> None:
        """Take the non-planning joints (objects, gripper) from a full simulator qpos."""
        qpos = np.asarray(qpos, dtype=float)
        if qpos.shape != (self.model.nq,):
            raise ConfigError("scene_qpos", qpos.shape, f"shape ({self.model.nq},)")
        self.scene_qpos = qpos.copy()
        self._scene_changed()

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
        self._scene_changed()

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
        self._scene_changed()

    @property
    def attached_body(self) -> str | None:
        """Name of the attached object, if any."""
        return None if self._attached is None else self.body_name(self._attached[0])

    # ----------------------------------------------------------------- queries
    def within_limits(self, q: Sequence[float], tol: float = LIMIT_TOL) -> bool:
        """Whether ``q`` lies inside the joint limits."""
        if isinstance(q, np.ndarray) and q.ndim == 1:
            q = q.tolist()                  # floats compare faster than numpy scalars
        if tol == LIMIT_TOL and isinstance(q, (list, tuple)) and len(q) == len(self._limits):
            for v, (lo, hi) in zip(q, self._limits):
                if not lo <= v <= hi:
                    return False
            return True
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
        """Collision-free (with padding) and within joint limits.

        Args:
            q: planning-joint values (any sequence of numbers; not copied).
        """
        if not self.within_limits(q):
            return False
        self.checks += 1
        self._forward(q)
        return self._collision_free()

    def motion_valid(self, q0: Sequence[float], q1: Sequence[float], max_step: float,
                     certified: bool = True) -> bool:
        """Whether the straight joint-space motion q0 -> q1 is valid at ``max_step`` spacing
        (radians of the largest joint change between checked states); endpoints included.

        Args:
            certified: skip states that a clearance probe proves valid (same answer);
                False checks every state.
        """
        q0, q1 = np.asarray(q0, dtype=float), np.asarray(q1, dtype=float)
        return self._first_bad_segment(np.stack([q0, q1]), max_step, certified) < 0

    def path_valid(self, positions: np.ndarray, max_step: float,
                   certified: bool = True) -> tuple[bool, int]:
        """Dense check of a polyline; returns (valid, index of the first bad segment or -1).

        Every segment is checked at ``max_step`` spacing as by :meth:`motion_valid`.

        Args:
            certified: skip states that a clearance probe proves valid (same answer);
                False checks every state.
        """
        positions = np.asarray(positions, dtype=float)
        if len(positions) == 1:
            return self.is_valid(positions[0]), (-1 if self.is_valid(positions[0]) else 0)
        bad = self._first_bad_segment(positions, max_step, certified)
        return bad < 0, bad

    def states_valid(self, states: np.ndarray) -> bool:
        """Whether every row of ``states`` is valid (the answer of :meth:`is_valid` on each),
        certified by clearance probes when there are many."""
        states = np.asarray(states, dtype=float)
        if len(states) < MIN_CERTIFIED_STATES or not self._chain:
            return all(self.is_valid(q) for q in states)
        if np.any((states < self._lo_tol) | (states > self._hi_tol)):
            return False
        self._probe_mode(True)
        try:
            return self._certified_walk(states) < 0
        finally:
            self._probe_mode(False)

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
        """contype/conaffinity bits: the allowed-collision matrix when it fits in 31 classes
        (one per moving body, one per group of static bodies with the same allowed moving
        bodies); otherwise just moving-vs-anything, the matrix then filters contacts."""
        moving = set(self._arm_bodies)
        if self._attached is not None:
            moving.add(self._attached[0])
        self._moving[:] = False
        self._moving[sorted(moving)] = True
        col = self._collidable
        geom_body = self.model.geom_bodyid
        is_moving = self._moving[geom_body]
        moving_sorted = sorted(moving)
        classes: dict[tuple, int] = {}
        geom_class = {}
        for g in self._collidable_ids:
            b = int(geom_body[g])
            key = (("m", b) if b in moving
                   else ("s", tuple(bool(self._allowed[b, o]) for o in moving_sorted)))
            geom_class[int(g)] = classes.setdefault(key, len(classes))
        if len(classes) > 31:
            self._acm_bits = False
            self.model.geom_contype[col & is_moving] = _MOVING_TYPE
            self.model.geom_conaffinity[col & is_moving] = _MOVING_AFFINITY
            self.model.geom_contype[col & ~is_moving] = _STATIC_TYPE
            self.model.geom_conaffinity[col & ~is_moving] = _STATIC_AFFINITY
            return
        # A representative body per class decides the class pairs.
        rep = {}
        for g, c in geom_class.items():
            rep.setdefault(c, int(geom_body[g]))
        affinity = [0] * len(classes)
        for c1, b1 in rep.items():
            for c2, b2 in rep.items():
                if c1 == c2 and self._moving[b1]:
                    continue                    # one body: MuJoCo never collides it with itself
                if (self._moving[b1] or self._moving[b2]) and not self._allowed[b1, b2]:
                    affinity[c1] |= 1 << c2
        for g, c in geom_class.items():
            self.model.geom_contype[g] = 1 << c
            self.model.geom_conaffinity[g] = affinity[c]
        self._acm_bits = True

    def _scene_changed(self) -> None:
        """The scene part of the reused qpos (and the reach bounds) follow a new scene."""
        self._qpos[:] = self.scene_qpos
        self._clearance = None

    def _set_margin(self, margin: float) -> None:
        self.model.geom_margin[self._collidable_ids] = margin

    def _probe_mode(self, on: bool) -> None:
        """Convex-collision precision of clearance probes (on) or of exact checks."""
        opt = self.model.opt
        if on:
            self._ccd = (opt.ccd_iterations, opt.ccd_tolerance)
            opt.ccd_iterations, opt.ccd_tolerance = PROBE_CCD
        else:
            opt.ccd_iterations, opt.ccd_tolerance = self._ccd

    def _forward(self, q: Sequence[float]) -> None:
        """Kinematics at ``q``; the qpos outside the planning joints holds the scene (set by
        :meth:`_scene_changed`), except an attached object's, written here."""
        d = self.data
        self._qpos[self._arm] = q
        mujoco.mj_kinematics(self.model, d)
        if self._attached is not None:
            bid, adr, rel_pos, rel_mat, _ = self._attached
            tool_pos, tool_mat = self._tool_pose()
            quat = self._quat
            mujoco.mju_mat2Quat(quat, (tool_mat @ rel_mat).reshape(-1))
            d.qpos[adr:adr + 3] = tool_pos + tool_mat @ rel_pos
            d.qpos[adr + 3:adr + 7] = quat
            mujoco.mj_kinematics(self.model, d)

    def _tool_pose(self) -> tuple[np.ndarray, np.ndarray]:
        if self.tool_site >= 0:
            return self.data.site_xpos[self.tool_site], self.data.site_xmat[
                self.tool_site].reshape(3, 3)
        return self.data.xpos[self.tool_body], self.data.xmat[self.tool_body].reshape(3, 3)

    def _collision_free(self) -> bool:
        """No offending contact at the kinematics just computed (margin = padding)."""
        mujoco.mj_collision(self.model, self.data)
        n = self.data.ncon
        if n == 0:
            return True
        contact = self.data.contact
        dist = contact.dist[:n]
        if self._acm_bits:      # every generated pair counts
            return not bool(np.any(dist < self.padding))
        bodies = self.model.geom_bodyid[contact.geom[:n]]
        return not bool(np.any(~self._allowed[bodies[:, 0], bodies[:, 1]]
                               & (dist < self.padding)))

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

    # ----------------------------------------------------------------- certified dense checks
    def _serial_chain(self) -> bool:
        """Whether the planning joints are hinges, each below the previous one (what the
        displacement bound of the clearance certificate assumes)."""
        m = self.model
        hinge = mujoco.mjtJoint.mjJNT_HINGE
        if any(int(m.jnt_type[j]) != hinge for j in self.joint_ids):
            return False
        for prev, jid in zip(self.joint_ids[:-1], self.joint_ids[1:], strict=True):
            b, root = int(m.jnt_bodyid[jid]), int(m.jnt_bodyid[prev])
            while b not in (root, 0):
                b = int(m.body_parentid[b])
            if b != root:
                return False
        return True

    def _last_joint(self, body: int) -> int:
        """Index (in planning order) of the last planning joint moving ``body``; -1 if none."""
        m = self.model
        joint_bodies = [int(m.jnt_bodyid[j]) for j in self.joint_ids]
        b = body
        while b > 0:
            if b in joint_bodies:
                return len(joint_bodies) - 1 - joint_bodies[::-1].index(b)
            b = int(m.body_parentid[b])
        return -1

    def _tool_parent(self) -> int:
        """The body carrying the tool frame (what an attached object is welded to)."""
        if self.tool_site >= 0:
            return int(self.model.site_bodyid[self.tool_site])
        return int(self.tool_body)

    def _probe_geometry(self) -> _Clearance:
        """The scene's :class:`_Clearance`, built at the first probe after a scene change.

        Reach rows: R (ngeom, J) with |dx| <= R[g] . |dq| for every point of geom g under a
        joint change dq (zero rows for static geoms), and the index of the last planning joint
        moving each geom (-1 when static). Uses the kinematics just computed: anchor-to-anchor
        and anchor-to-geom distances are fixed for the scene (attached object, gripper)."""
        if self._clearance is not None:
            return self._clearance
        m, d = self.model, self.data
        anchors = d.xanchor[self.joint_ids]
        seg = np.linalg.norm(np.diff(anchors, axis=0), axis=1)
        along = np.concatenate([[0.0], np.cumsum(seg)])      # chain length from joint 0
        reach = np.zeros((m.ngeom, len(self.joint_ids)))
        last = np.full(m.ngeom, -1)
        for g in self._collidable_ids:
            b = int(m.geom_bodyid[g])
            if not self._moving[b]:
                continue
            attached = self._attached is not None and b == self._attached[0]
            k = self._last_joint(self._tool_parent() if attached else b)
            if k < 0:
                continue
            tail = float(np.linalg.norm(d.geom_xpos[g] - anchors[k])) + float(m.geom_rbound[g])
            reach[g, :k + 1] = along[k] - along[:k + 1] + tail
            last[g] = k
        reach = reach * (1.0 + 1e-6) + 1e-9 * (last >= 0)[:, None]
        self._clearance = _Clearance(self, reach, last)
        return self._clearance

    def _probe(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Clearance certificate of state ``q`` (see :class:`_Clearance`)."""
        self.probes += 1
        self._forward(q)
        return self._probe_geometry().certificate(self.model, self.data, self.padding,
                                                  self._ccd)

    def _first_bad_segment(self, positions: np.ndarray, max_step: float,
                           certified: bool) -> int:
        """Index of the first segment of the polyline with an invalid interpolated state at
        ``max_step`` spacing (the states of :meth:`motion_valid`), or -1."""
        q0, q1 = positions[:-1], positions[1:]
        steps = q1 - q0
        counts = np.maximum(1, np.ceil(np.max(np.abs(steps), axis=1) / max_step).astype(int))
        total = int(counts.sum()) + len(counts)
        if not certified or total < MIN_CERTIFIED_STATES or not self._chain:
            for i, n in enumerate(counts.tolist()):
                a, d = q0[i], steps[i]
                if not all(self.is_valid(a + d * (k / n)) for k in range(n + 1)):
                    return i
            return -1
        # Every interpolated state (k / n as in motion_valid; shared ends kept twice).
        seg = np.repeat(np.arange(len(counts)), counts + 1)
        first = np.concatenate([[0], np.cumsum(counts + 1)[:-1]])
        frac = (np.arange(total) - first[seg]) / counts[seg]
        states = q0[seg] + steps[seg] * frac[:, None]
        outside = np.flatnonzero(np.any((states < self._lo_tol) | (states > self._hi_tol),
                                        axis=1))
        end = total if outside.size == 0 else int(first[seg[outside[0]]])
        self._probe_mode(True)
        try:
            bad = self._certified_walk(states[:end])
        finally:
            self._probe_mode(False)
        if bad >= 0:
            return int(seg[bad])
        return -1 if outside.size == 0 else int(seg[outside[0]])

    def _certified_walk(self, states: np.ndarray, chunk: int = 64) -> int:
        """Index of the first invalid state of ``states`` (all within limits), or -1.

        States before ``k`` are known valid. A probe goes AHEAD x its predecessor's span ahead
        of ``k`` (a certificate holds in every direction) and counts only when it also covers
        the states back to ``k``; otherwise the next probe goes to ``k`` itself. A state
        is declared invalid only by the exact check, at ``k``."""
        k, total, ahead = 0, len(states), 0
        while k < total:
            j = min(k + ahead, total - 1)
            q = states[j]
            rows, gaps = self._probe(q)
            limit = CERTIFY_SHARE * gaps
            if j > k and (gaps.min() <= 0.0 or np.any(
                    np.abs(states[k:j] - q) @ rows.T >= limit)):
                ahead = 0                       # too far ahead: probe at the frontier
                continue
            if gaps.min() <= 0.0:
                self._probe_mode(False)
                try:
                    ok = self.is_valid(q)
                finally:
                    self._probe_mode(True)
                if not ok:
                    return k
                k += 1
                continue
            start = k
            k = j + 1
            while k < total:
                moved = np.abs(states[k:k + chunk] - q) @ rows.T
                beyond = np.flatnonzero(np.any(moved >= limit, axis=1))
                if beyond.size:
                    k += int(beyond[0])
                    break
                k += chunk
            ahead = int((min(k, total) - start) * AHEAD)
        return -1


class _Clearance:
    """What a clearance probe needs for one scene (fixed static geometry and attachment).

    The pairs that count (one moving geom, not allowed, not welded together) are pre-selected
    per probe by a cheap lower bound of their distance, for all pairs at once: the distance
    from the moving geom's centre to a static box (planes count as deep boxes below them), or
    to the other geom's centre (any other static geom, and pairs of moving geoms: a point is a
    box of size 0), minus the bounding radii. Pairs farther than padding + PROBE_MARGIN by that
    bound are covered by one certificate row per moving geom (gap PROBE_MARGIN); the others
    are measured with mj_geomDistance and get a row each. Not mj_collision with a wide margin:
    measured, it misses separated pairs inside the margin (a box pair 1.3 mm apart, a cylinder
    and a box 2.5 mm apart: no contact with 5-10 cm margins). Every measured distance loses
    MIN_CLEARANCE.

    A row bounds how fast a pair may close: a static pair by the moving geom's displacement
    (its reach row), a pair of two moving geoms only by the joints between them.
    """

    #: A plane is the box of this half depth below it, this wide.
    _PLANE_DEPTH, _PLANE_WIDTH = 1e3, 1e6

    def __init__(self, checker: CollisionChecker, reach: np.ndarray, last: np.ndarray) -> None:
        m, d = checker.model, checker.data
        weld = m.body_weldid
        geoms = [int(g) for g in checker._collidable_ids]
        body = {g: int(m.geom_bodyid[g]) for g in geoms}
        kind = {g: int(m.geom_type[g]) for g in geoms}
        box, plane = int(mujoco.mjtGeom.mjGEOM_BOX), int(mujoco.mjtGeom.mjGEOM_PLANE)
        moving = [g for g in geoms if checker._moving[body[g]] and last[g] >= 0]
        static = [g for g in geoms if not checker._moving[body[g]]]
        targets = static + moving
        frames, offsets, halves, radii = [], [], [], []
        for g in static:
            rot, centre = d.geom_xmat[g].reshape(3, 3), d.geom_xpos[g].copy()
            if kind[g] == plane:
                centre = centre - self._PLANE_DEPTH * rot[:, 2]
                half = np.array([self._PLANE_WIDTH, self._PLANE_WIDTH, self._PLANE_DEPTH])
            elif kind[g] == box:
                half = m.geom_size[g].copy()
            else:
                rot, half = np.eye(3), np.zeros(3)
            frames.append(rot)
            offsets.append(centre @ rot)
            halves.append(half)
            radii.append(0.0 if kind[g] in (box, plane) else float(m.geom_rbound[g]))
        frames += [np.eye(3)] * len(moving)           # moving targets: points at their centres
        halves += [np.zeros(3)] * len(moving)
        radii += [float(m.geom_rbound[g]) for g in moving]
        self.moving = np.array(moving, dtype=int)
        self.n_static = len(static)
        self.rot = np.hstack(frames)                                    # (3, 3T)
        self.static_off = np.concatenate(offsets) if offsets else np.zeros(0)
        self.half = np.concatenate(halves)
        self.reach_radius = m.geom_rbound[self.moving][:, None] + np.array(radii)[None, :]
        self.rows = reach[self.moving]
        self.base_gap = np.full(len(moving), PROBE_MARGIN - MIN_CLEARANCE)
        # Per (moving geom i, target j): counts, certificate row, geoms, curved shapes.
        mask = np.zeros((len(moving), len(targets)), dtype=bool)
        rows = np.repeat(self.rows[:, None, :], len(targets), axis=1)
        index = checker._joint_index
        for i, g in enumerate(moving):
            for j, t in enumerate(targets):
                b1, b2 = body[g], body[t]
                if j >= self.n_static and j - self.n_static <= i:
                    continue                    # each moving pair once, never a geom with itself
                mask[i, j] = weld[b1] != weld[b2] and not checker._allowed[b1, b2]
                if mask[i, j] and j >= self.n_static:
                    k1, k2 = int(last[g]), int(last[t])
                    rows[i, j] = reach[g if k1 >= k2 else t] * (index > min(k1, k2))
        self.mask, self.pair_rows = mask, rows
        self.first = np.repeat(np.array(targets, dtype=int)[None, :], len(moving), axis=0)
        self.second = np.repeat(self.moving[:, None], len(targets), axis=1)
        polytope = {box, plane, int(mujoco.mjtGeom.mjGEOM_SPHERE)}
        curved_target = np.array([kind[g] not in polytope for g in targets])
        curved_moving = np.array([kind[g] not in polytope for g in moving])
        self.curved = curved_target[None, :] | curved_moving[:, None]
        self._limit: tuple[float, np.ndarray] = (np.nan, np.zeros(0))

    def certificate(self, m: mujoco.MjModel, d: mujoco.MjData, padding: float,
                    plain_ccd: tuple[int, float]) -> tuple[np.ndarray, np.ndarray]:
        """Rows W (P, J) and gaps (P,): a state q' is collision-free when W |q' - q| < gaps
        row by row (before the safety share), q being the state of ``d``'s kinematics. The
        model's convex-collision settings must be PROBE_CCD; ``plain_ccd`` (the model's own)
        serves pairs without curved shapes."""
        reach_to = padding + PROBE_MARGIN
        if self._limit[0] != reach_to:
            self._limit = (reach_to, (self.reach_radius + reach_to) ** 2)
        centres = d.geom_xpos[self.moving]
        offset = np.concatenate([self.static_off, centres.ravel()])
        outside = np.maximum(np.abs(centres @ self.rot - offset) - self.half, 0.0)
        bound = (outside * outside).reshape(len(centres), -1, 3).sum(axis=2)
        ii, jj = np.nonzero((bound < self._limit[1]) & self.mask)
        if ii.size == 0:
            return self.rows, self.base_gap
        first, second = self.first[ii, jj].tolist(), self.second[ii, jj].tolist()
        curved = self.curved[ii, jj]
        distance = mujoco.mj_geomDistance
        dist = np.empty(len(first))
        for k in np.flatnonzero(curved).tolist():       # GJK stops early near contact
            dist[k] = distance(m, d, first[k], second[k], reach_to, None)
        plain = np.flatnonzero(~curved).tolist()
        if plain:                                       # polytopes converge exactly
            opt = m.opt
            precise = opt.ccd_iterations, opt.ccd_tolerance
            opt.ccd_iterations, opt.ccd_tolerance = plain_ccd
            try:
                for k in plain:
                    dist[k] = distance(m, d, first[k], second[k], reach_to, None)
            finally:
                opt.ccd_iterations, opt.ccd_tolerance = precise
        return (np.vstack([self.rows, self.pair_rows[ii, jj]]),
                np.concatenate([self.base_gap, dist - (padding + MIN_CLEARANCE)]))


def _copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    import copy

    return copy.deepcopy(model)


def _frame_ids(model: mujoco.MjModel, name: str) -> tuple[int, int]:
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if site < 0 and body < 0:
        raise ConfigError("tool_frame", name, "a body or site of the MuJoCo model")
    return body, site
