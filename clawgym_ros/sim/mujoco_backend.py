"""The embedded MuJoCo simulator backend (default): one scene, seeded resets, lean stepping.

Timing: physics steps every ``scene.physics.timestep`` (2 ms); one :meth:`MujocoBackend.step`
is one *control step* of ``scene.physics.control_dt`` (20 ms = 10 physics steps, run in C with
``mj_step(nstep=...)``). Commands hold between control steps.

Control (action dict, keys from :mod:`clawgym_ros.constants`; missing keys keep the last
command):

* ``joint_target`` (7,) rad - arm position targets (clipped to the joint limits);
* ``joint_velocity`` (7,) rad/s - velocity feed-forward (zero when a target comes without it).
  Each arm joint has a position actuator (kp) and a velocity actuator (kv):
  tau = kp (q* - q) + kv (qd* - qd), clamped to the URDF effort; arm links are gravity
  compensated (as a real arm controller does);
* ``gripper`` (1,) m - gripper width target, 0 (closed) .. 0.08 (open), split over both fingers;
* ``base_twist`` (2,) - mobile base (linear m/s, angular rad/s), turned into wheel speeds.

Calibration: the backend runs at the active calibration's fitted values
(:mod:`clawgym_ros.sim.active_calibration`; ``--calibration ID`` of the commands), or at
:class:`MujocoConfig` ``calibration``'s: joint friction, damping, armature, arm servo gains and
object masses are set on the model before its defaults are recorded (resets and the dynamics
perturbation then work around them), and commands take effect the fitted latency later, rounded
to the physics step (a control step runs its first physics steps on the previous command). A
reset picks up a calibration activated since the model was built.

Rendering is offscreen (``MUJOCO_GL=egl`` unless set before MuJoCo is first imported); shadows
are off unless :class:`MujocoConfig` ``shadows`` is true.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.config import check_choice, check_int  # noqa: E402
from clawgym_ros.errors import ConfigError  # noqa: E402
from clawgym_ros.sim import scene_mjcf as MJ  # noqa: E402
from clawgym_ros.sim import scene_spec as S  # noqa: E402
from clawgym_ros.sim.backend import (  # noqa: E402
    CameraPoseSettings,
    ColourSettings,
    DynamicsSettings,
    LightingSettings,
    SimBackend,
)
from clawgym_ros.sim.geo import enu_to_geodetic  # noqa: E402

IMAGE_KINDS = ("rgb", "depth")


def image_key(camera: str, kind: str = "rgb") -> str:
    """Observation key of a camera image: ``<camera>_rgb`` (uint8 HxWx3) or ``<camera>_depth``
    (float32 HxW, metres)."""
    return f"{camera}_{kind}"


@dataclasses.dataclass(frozen=True)
class MujocoConfig:
    """Options of the MuJoCo backend."""

    scene: str = dataclasses.field(
        default=C.SCENE_TABLETOP, metadata={"help": "scene name (config/scenes/<name>.yaml)"})
    cameras: tuple[str, ...] = dataclasses.field(
        default=(), metadata={"help": "cameras rendered into observations (empty = state only)"})
    image_width: int = dataclasses.field(default=84, metadata={"help": "image width, [8, 640]"})
    image_height: int = dataclasses.field(default=84, metadata={"help": "image height, [8, 480]"})
    depth: bool = dataclasses.field(
        default=False, metadata={"help": "also render depth images of the cameras"})
    shadows: bool = dataclasses.field(default=False, metadata={"help": "render shadows"})
    calibration: Any = dataclasses.field(
        default=None, metadata={"help": "a SimCalibration to run at (None: the active one)"})

    def __post_init__(self) -> None:
        check_choice("mujoco.scene", self.scene, S.SCENE_NAMES)
        check_int("mujoco.image_width", self.image_width, 8, 640)
        check_int("mujoco.image_height", self.image_height, 8, 480)
        object.__setattr__(self, "cameras", tuple(self.cameras))


@dataclasses.dataclass(frozen=True)
class SceneIndex:
    """Ids and addresses of the compiled model's named parts (see docs/notes/sim_api.md)."""

    joint_names: tuple[str, ...]          # robot joints reported in joint states
    joint_qpos: np.ndarray                # qpos address of each robot joint
    joint_dof: np.ndarray                 # dof address of each robot joint
    arm_qpos: slice | np.ndarray          # the 7 arm joints (tabletop) or the 2 wheels (base)
    arm_dof: slice | np.ndarray
    finger_qpos: np.ndarray               # 2 finger joints (empty for the base)
    object_names: tuple[str, ...]
    object_bodies: np.ndarray
    object_qpos: slice                    # objects' free joints: n x 7 (x y z qw qx qy qz)
    object_dof: slice
    object_geoms: np.ndarray
    robot_bodies: np.ndarray
    robot_geoms: np.ndarray
    obstacle_geoms: np.ndarray            # fixed scene geometry incl. floor
    tool_site: int                        # -1 without an arm
    imu_site: int                         # -1 without a base
    gps_site: int
    base_body: int
    base_qpos: int                        # free joint qpos address of the base (-1 if fixed)
    base_dof: int
    cameras: tuple[str, ...]


def _as_slice(idx: Sequence[int]) -> slice | np.ndarray:
    idx = list(idx)
    if idx and idx == list(range(idx[0], idx[0] + len(idx))):
        return slice(int(idx[0]), int(idx[0]) + len(idx))
    return np.asarray(idx, dtype=int)


def index_model(model: Any, scene: S.SceneSpec) -> SceneIndex:
    """Resolve the names of a model built by :func:`clawgym_ros.sim.scene_mjcf.build_spec`."""
    def jid(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)

    def bid(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)

    def sid(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)

    if scene.robot.is_arm:
        main, fingers = C.ARM_JOINTS, C.GRIPPER_JOINTS
    else:
        main, fingers = C.BASE_WHEEL_JOINTS, ()
    names = (*main, *fingers)
    qpos = np.array([model.jnt_qposadr[jid(n)] for n in names], dtype=int)
    dof = np.array([model.jnt_dofadr[jid(n)] for n in names], dtype=int)
    obj_names = tuple(o.name for o in scene.objects)
    obj_bodies = np.array([bid(n) for n in obj_names], dtype=int)
    obj_q = [int(model.jnt_qposadr[jid(f"{n}_joint")]) for n in obj_names]
    obj_d = [int(model.jnt_dofadr[jid(f"{n}_joint")]) for n in obj_names]
    if obj_q and obj_q != list(range(obj_q[0], obj_q[0] + 7 * len(obj_q), 7)):
        raise ConfigError("scene.objects", obj_names, "objects with consecutive free joints")
    obj_qslice = slice(obj_q[0], obj_q[0] + 7 * len(obj_q)) if obj_q else slice(0, 0)
    obj_dslice = slice(obj_d[0], obj_d[0] + 6 * len(obj_d)) if obj_d else slice(0, 0)
    base = bid(C.FRAME_BASE)
    robot_bodies = [b for b in range(1, model.nbody)
                    if model.body_rootid[b] == base or b == base]
    geom_body = model.geom_bodyid
    obj_set = set(obj_bodies.tolist())
    robot_set = set(robot_bodies)
    base_joint = jid("base_freejoint")
    cams = tuple(model.camera(i).name for i in range(model.ncam))
    return SceneIndex(
        joint_names=names, joint_qpos=qpos, joint_dof=dof,
        arm_qpos=_as_slice(qpos[:len(main)]), arm_dof=_as_slice(dof[:len(main)]),
        finger_qpos=qpos[len(main):],
        object_names=obj_names, object_bodies=obj_bodies, object_qpos=obj_qslice,
        object_dof=obj_dslice,
        object_geoms=np.array([g for g in range(model.ngeom) if geom_body[g] in obj_set], int),
        robot_bodies=np.array(robot_bodies, dtype=int),
        robot_geoms=np.array([g for g in range(model.ngeom) if geom_body[g] in robot_set], int),
        obstacle_geoms=np.array([g for g in range(model.ngeom) if geom_body[g] == 0], int),
        tool_site=sid(C.FRAME_TOOL), imu_site=sid(C.FRAME_IMU), gps_site=sid(C.FRAME_GPS),
        base_body=base,
        base_qpos=int(model.jnt_qposadr[base_joint]) if base_joint >= 0 else -1,
        base_dof=int(model.jnt_dofadr[base_joint]) if base_joint >= 0 else -1,
        cameras=cams,
    )


def quat_yaw(q: Sequence[float]) -> float:
    """Yaw (rad) of a (w, x, y, z) quaternion."""
    w, x, y, z = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _colour_groups(m: Any, index: SceneIndex) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Geoms recoloured together: each free object's, and the fixed shapes' (world-body geoms
    but planes) by their default colour in order of first appearance (a repaint: the parts of
    a bin stay one colour)."""
    objects = [np.flatnonzero(m.geom_bodyid == b) for b in index.object_bodies]
    statics: dict[tuple[float, ...], list[int]] = {}
    for g in index.obstacle_geoms:
        if m.geom_type[g] != mujoco.mjtGeom.mjGEOM_PLANE:
            statics.setdefault(tuple(m.geom_rgba[g].tolist()), []).append(int(g))
    return objects, [np.array(v) for v in statics.values()]


class MujocoBackend(SimBackend):
    """MuJoCo simulation of one scene (see the module docstring for timing and control).

    Args:
        config: backend options (scene, observation cameras, image size, shadows).

    Attributes:
        scene: the :class:`~clawgym_ros.sim.scene_spec.SceneSpec`.
        model, data: the compiled ``mujoco.MjModel`` / ``mujoco.MjData`` (share, don't copy).
        index: :class:`SceneIndex` of named parts.
    """

    name = "mujoco"

    def __init__(self, config: MujocoConfig | None = None) -> None:
        self.config = config or MujocoConfig()
        self._renderers: dict[tuple[int, int], Any] = {}
        self._build(self.config.scene)

    # ------------------------------------------------------------------ construction
    def _build(self, scene_name: str) -> None:
        self.close()
        self.scene, self.model = self._load(scene_name)
        self.data = mujoco.MjData(self.model)
        self.index = index_model(self.model, self.scene)
        self._model_params: Any = None         # the compiled (uncalibrated) arm parameters
        self._calibration: Any = None
        self._calibration_delay = 0            # physics steps
        self._set_calibration(self._wanted_calibration())
        for cam in self.config.cameras:
            if cam not in self.index.cameras:
                raise ConfigError("mujoco.cameras", cam, "one of " + ", ".join(self.index.cameras))
        m = self.model
        if self.config.shadows:
            m.light_castshadow[:] = 1
        self.is_arm = self.scene.robot.is_arm
        self.substeps = self.scene.physics.substeps
        self.control_dt = self.scene.physics.control_dt
        self._defaults = {
            "body_mass": m.body_mass.copy(), "body_inertia": m.body_inertia.copy(),
            "geom_friction": m.geom_friction.copy(), "dof_damping": m.dof_damping.copy(),
            "actuator_gainprm": m.actuator_gainprm.copy(),
            "actuator_biasprm": m.actuator_biasprm.copy(),
            "light_diffuse": m.light_diffuse.copy(), "light_ambient": m.light_ambient.copy(),
            "light_specular": m.light_specular.copy(), "light_pos": m.light_pos.copy(),
            "light_dir": m.light_dir.copy(),
            "cam_pos": m.cam_pos.copy(), "cam_quat": m.cam_quat.copy(),
            "geom_rgba": m.geom_rgba.copy(),
            "headlight": (m.vis.headlight.ambient.copy(), m.vis.headlight.diffuse.copy(),
                          m.vis.headlight.specular.copy()),
        }
        self._lighting: dict[str, LightingSettings] = {}
        self._dynamics: dict[str, DynamicsSettings] = {}
        self._camera_pose: dict[str, CameraPoseSettings] = {}
        self._colours: ColourSettings | None = None
        self._colour_groups = _colour_groups(m, self.index)
        self._latency_steps = 0                 # control steps (dynamics perturbation)
        self._cmd = np.zeros(m.nu)
        self._pending: collections.deque[np.ndarray] = collections.deque()
        self._seed: int | None = None
        # Views into MjData/MjModel buffers (stable for the data's life): attribute access on
        # mujoco objects builds a new array each time, which dominates a lean env step.
        d = self.data
        self._qpos, self._qvel, self._ctrl = d.qpos, d.qvel, d.ctrl
        self._site_xpos, self._site_xmat, self._sensordata = d.site_xpos, d.site_xmat, \
            d.sensordata
        self._ctrl_lo = m.actuator_ctrlrange[:, 0].copy()
        self._ctrl_hi = m.actuator_ctrlrange[:, 1].copy()
        # the arm's slices of the command and its limits, and the finger qpos addresses
        self._cmd_q, self._cmd_dq = self._cmd[:7], self._cmd[7:14]
        self._q_lo, self._q_hi = self._ctrl_lo[:7], self._ctrl_hi[:7]
        self._fingers = tuple(int(a) for a in self.index.finger_qpos)
        self.reset(0)

    def _wanted_calibration(self) -> Any:
        if self.config.calibration is not None:
            return self.config.calibration
        from clawgym_ros.sim.active_calibration import active

        return active()

    def _set_calibration(self, cal: Any) -> None:
        """Set the model to calibration ``cal`` (None: as compiled) and record the result as
        the defaults that resets and perturbations restore."""
        from clawgym_ros.sim.active_calibration import split_values

        if cal is None and self._calibration is None:
            return
        m = self.model
        if self.scene.robot.is_arm:
            if self._model_params is None:
                from clawgym_ros.sim.calibrated import ModelParams

                self._model_params = ModelParams(m)
            if cal is None:
                for key, arr in self._model_params.defaults.items():
                    getattr(m, key)[:] = arr
            else:
                self._model_params.apply(m, split_values(cal.values)[0])
        self._calibration = cal
        # (a calibration is of the arm: a mobile base keeps its own timing)
        self._calibration_delay = (0 if cal is None or not self.scene.robot.is_arm else
                                   int(round(cal.latency_s / float(m.opt.timestep))))
        dft = getattr(self, "_defaults", None)
        if dft is not None:
            for key in ("body_mass", "body_inertia", "dof_damping", "actuator_gainprm",
                        "actuator_biasprm"):
                dft[key] = getattr(m, key).copy()

    @property
    def calibration(self) -> Any:
        """The :class:`~clawgym_ros.sim.active_calibration.SimCalibration` the model runs at, or
        None."""
        return self._calibration

    def _load(self, scene_name: str) -> tuple[S.SceneSpec, Any]:
        """The scene spec and its compiled model (task backends override this to build
        template variants of a scene, e.g. other objects or a hole block)."""
        scene = S.load_scene(scene_name)
        return scene, MJ.build_model(scene)

    # ------------------------------------------------------------------ SimBackend
    def reset(self, seed: int, scenario: str | None = None,
              rng: np.random.Generator | None = None) -> None:
        """Restore defaults, then reset the world with randomized poses.

        Args:
            seed: seeds a private generator when ``rng`` is not given (recorded either way).
            scenario: a scene name to switch to (rebuilds the model); None keeps the scene.
            rng: the generator to draw from (the Gymnasium env passes its ``np_random``).
        """
        if scenario is not None and scenario != self.scene.name:
            self._build(scenario)
        cal = self._wanted_calibration()
        if getattr(cal, "id", None) != getattr(self._calibration, "id", None):
            self._set_calibration(cal)
        self.restore_defaults()
        rng = rng if rng is not None else np.random.default_rng(seed)
        self._seed = seed
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        idx = self.index
        if self.is_arm:
            home = np.asarray(self.scene.robot.home)
            d.qpos[idx.arm_qpos] = home
            d.qpos[idx.finger_qpos] = self.scene.robot.gripper_home / 2
            self._cmd[:7] = home
            self._cmd[7:14] = 0.0
            self._cmd[14:16] = self.scene.robot.gripper_home / 2
        else:
            pos, yaw = S.sample_robot_pose(self.scene, rng)
            d.qpos[idx.base_qpos:idx.base_qpos + 3] = pos
            d.qpos[idx.base_qpos + 3:idx.base_qpos + 7] = S.rpy_to_quat((0.0, 0.0, yaw))
            self._cmd[:] = 0.0
        poses = S.sample_object_poses(self.scene, rng)
        q = d.qpos[idx.object_qpos].reshape(-1, 7) if idx.object_names else None
        for i, name in enumerate(idx.object_names):
            pos, yaw = poses[name]
            q[i, :3] = pos
            q[i, 3:] = S.rpy_to_quat((*self.scene.objects[i].rpy[:2], yaw))
        if q is not None:
            d.qpos[idx.object_qpos] = q.ravel()
        d.ctrl[:] = self._cmd
        self._pending.clear()
        mujoco.mj_forward(m, d)

    def _named_ids(self, objtype: Any, count: int, name: str, field: str) -> list[int]:
        """Ids of the model's ``objtype`` objects a setting names: every one (``name`` empty)
        or the one called ``name``.

        Raises:
            ConfigError: no such name (``field`` and the names there are).
        """
        if not name:
            return list(range(count))
        oid = mujoco.mj_name2id(self.model, objtype, name)
        if oid < 0:
            names = [mujoco.mj_id2name(self.model, objtype, i) for i in range(count)]
            raise ConfigError(field, name, "one of " + ", ".join(names))
        return [oid]

    def set_lighting(self, settings: LightingSettings) -> None:
        """Scale light colours relative to the defaults; move/turn lights (next image)."""
        m, dft = self.model, self._defaults
        ids = self._named_ids(mujoco.mjtObj.mjOBJ_LIGHT, m.nlight, settings.light_name,
                              "lighting.light_name")
        for i in ids:
            m.light_diffuse[i] = dft["light_diffuse"][i] * settings.diffuse_scale
            m.light_ambient[i] = dft["light_ambient"][i] * settings.ambient_scale
            m.light_specular[i] = dft["light_specular"][i] * settings.specular_scale
            m.light_dir[i] = (dft["light_dir"][i] if settings.direction is None else
                              np.asarray(settings.direction) / np.linalg.norm(settings.direction))
            m.light_pos[i] = (dft["light_pos"][i] if settings.position is None
                              else settings.position)
        amb, dif, spec = dft["headlight"]
        m.vis.headlight.ambient[:] = amb * settings.headlight_scale
        m.vis.headlight.diffuse[:] = dif * settings.headlight_scale
        m.vis.headlight.specular[:] = spec * settings.headlight_scale
        # light_xpos / light_xdir are derived in kinematics: refresh them for the next image
        mujoco.mj_kinematics(m, self.data)
        mujoco.mj_camlight(m, self.data)
        self._lighting[settings.light_name] = settings

    def set_camera_pose(self, settings: CameraPoseSettings) -> None:
        """Move cameras from their default mount pose by ``settings`` (offset and rotation in
        the camera's own frame; the next image). Physics is untouched.

        Raises:
            ConfigError: unknown camera name.
        """
        m, dft = self.model, self._defaults
        ids = self._named_ids(mujoco.mjtObj.mjOBJ_CAMERA, m.ncam, settings.camera_name,
                              "camera_pose.camera_name")
        rotvec = np.asarray(settings.rotation, dtype=float)
        angle = float(np.linalg.norm(rotvec))
        delta = np.array([1.0, 0.0, 0.0, 0.0])
        if angle > 0.0:
            mujoco.mju_axisAngle2Quat(delta, rotvec / angle, angle)
        offset = np.asarray(settings.offset, dtype=float)
        for i in ids:
            quat0 = dft["cam_quat"][i]
            moved = np.empty(3)
            mujoco.mju_rotVecQuat(moved, offset, quat0)
            m.cam_pos[i] = dft["cam_pos"][i] + moved
            quat = np.empty(4)
            mujoco.mju_mulQuat(quat, quat0, delta)
            m.cam_quat[i] = quat
        # cam_xpos / cam_xmat are derived in kinematics: refresh them for the next image
        mujoco.mj_kinematics(m, self.data)
        mujoco.mj_camlight(m, self.data)
        self._camera_pose[settings.camera_name] = settings

    def set_colours(self, settings: ColourSettings) -> None:
        """Blend the free objects' and fixed shapes' colours from their defaults toward
        ``settings``' (the next image; alpha and physics untouched)."""
        m, dft = self.model, self._defaults
        objects, statics = self._colour_groups
        for groups, blends in ((objects, settings.objects), (statics, settings.statics)):
            for geoms, blend in zip(groups, blends, strict=False):
                r, g, b, w = blend
                m.geom_rgba[geoms, :3] = (1.0 - w) * dft["geom_rgba"][geoms, :3] + w * np.array(
                    [r, g, b])
        self._colours = settings

    def set_dynamics(self, settings: DynamicsSettings) -> None:
        """Set mass/friction/damping/gains of a target to default x scale; set latency.

        Raises:
            ConfigError: unknown target name.
        """
        m, dft = self.model, self._defaults
        bodies, joints_dof, acts = self._dynamics_targets(settings.target)
        for b in bodies:
            m.body_mass[b] = dft["body_mass"][b] * settings.mass_scale
            m.body_inertia[b] = dft["body_inertia"][b] * settings.mass_scale
            geoms = np.flatnonzero(m.geom_bodyid == b)
            m.geom_friction[geoms, 0] = dft["geom_friction"][geoms, 0] * settings.friction_scale
        for dof in joints_dof:
            m.dof_damping[dof] = dft["dof_damping"][dof] * settings.damping_scale
        for a in acts:
            # kp and kv scale together: gain and both bias terms (position and velocity)
            m.actuator_gainprm[a, 0] = dft["actuator_gainprm"][a, 0] * settings.actuator_gain_scale
            m.actuator_biasprm[a, 1:3] = (dft["actuator_biasprm"][a, 1:3]
                                          * settings.actuator_gain_scale)
        self._latency_steps = int(round(settings.command_latency / self.control_dt))
        self._dynamics[settings.target] = settings

    def _dynamics_targets(self, target: str) -> tuple[list[int], list[int], list[int]]:
        m, idx = self.model, self.index
        if not target:
            dofs = [int(d) for d in idx.joint_dof]
            return list(idx.object_bodies.tolist()), dofs, list(range(m.nu))
        bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, target)
        if bid > 0:
            return [bid], [], []
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, target)
        if jid >= 0:
            acts = [a for a in range(m.nu) if m.actuator_trnid[a, 0] == jid]
            return [], [int(m.jnt_dofadr[jid])], acts
        aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, target)
        if aid >= 0:
            return [], [], [aid]
        groups = {C.ARM_GROUP: C.ARM_JOINTS, C.GRIPPER_GROUP: C.GRIPPER_JOINTS}
        if target in groups and self.is_arm:
            jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in groups[target]]
            acts = [a for a in range(m.nu) if m.actuator_trnid[a, 0] in jids]
            return [], [int(m.jnt_dofadr[j]) for j in jids], acts
        raise ConfigError("dynamics.target", target,
                          "empty, 'arm', 'gripper', or a body, joint or actuator name")

    def restore_defaults(self) -> None:
        """Undo every lighting, dynamics, camera pose and colour change (reset calls this)."""
        m, dft = self.model, self._defaults
        for key in ("body_mass", "body_inertia", "geom_friction", "dof_damping",
                    "actuator_gainprm", "actuator_biasprm", "light_diffuse", "light_ambient",
                    "light_specular", "light_pos", "light_dir", "cam_pos", "cam_quat",
                    "geom_rgba"):
            getattr(m, key)[:] = dft[key]
        amb, dif, spec = dft["headlight"]
        m.vis.headlight.ambient[:] = amb
        m.vis.headlight.diffuse[:] = dif
        m.vis.headlight.specular[:] = spec
        if self._lighting or self._camera_pose:
            mujoco.mj_kinematics(m, self.data)   # refresh light_xpos / light_xdir, cam_x*
            mujoco.mj_camlight(m, self.data)
        self._latency_steps = 0
        self._pending.clear()
        self._lighting.clear()
        self._dynamics.clear()
        self._camera_pose.clear()
        self._colours = None

    @property
    def time(self) -> float:
        """Simulation time in seconds."""
        return float(self.data.time)

    def describe(self) -> dict[str, Any]:
        """Active runtime knobs (for episode records)."""
        out = {"backend": self.name, "scene": self.scene.name, "seed": self._seed,
               "lighting": [dataclasses.asdict(s) for s in self._lighting.values()],
               "dynamics": [dataclasses.asdict(s) for s in self._dynamics.values()]}
        if self._camera_pose:       # only when set: records of other episodes as before
            out["camera_pose"] = [dataclasses.asdict(s) for s in self._camera_pose.values()]
        if self._colours is not None:
            out["colour"] = dataclasses.asdict(self._colours)
        if self._calibration is not None:
            out["calibration"] = self._calibration.id
        return out

    # ------------------------------------------------------------------ state snapshots
    def get_state(self) -> np.ndarray:
        """The restorable physics state (``mjSTATE_INTEGRATION``: time, positions,
        velocities, actuator activations, controls, applied forces, warm start) as float64."""
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        out = np.empty(mujoco.mj_stateSize(self.model, spec))
        mujoco.mj_getState(self.model, self.data, out, spec)
        return out

    def set_state(self, state: np.ndarray) -> None:
        """Restore a :meth:`get_state` snapshot of this model and recompute derived
        quantities (``mj_forward``).

        Raises:
            ConfigError: the snapshot's size does not fit this model.
        """
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        size = mujoco.mj_stateSize(self.model, spec)
        arr = np.asarray(state, dtype=np.float64)
        if arr.shape != (size,) or not np.isfinite(arr).all():
            raise ConfigError("state", f"{arr.shape} values",
                              f"{size} finite values (mjSTATE_INTEGRATION of scene "
                              f"{self.scene.name})")
        mujoco.mj_setState(self.model, self.data, arr, spec)
        mujoco.mj_forward(self.model, self.data)

    def state_signature(self) -> str:
        """A short digest of the model's structure (sizes and body/joint/actuator names):
        a snapshot restores only into a model with the same signature."""
        import hashlib

        m = self.model
        parts = [str(v) for v in (m.nq, m.nv, m.na, m.nu, m.nbody, m.njnt, m.ngeom)]
        for kind, count in ((mujoco.mjtObj.mjOBJ_BODY, m.nbody),
                            (mujoco.mjtObj.mjOBJ_JOINT, m.njnt),
                            (mujoco.mjtObj.mjOBJ_ACTUATOR, m.nu)):
            parts += [mujoco.mj_id2name(m, kind, i) or "" for i in range(count)]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ control
    def apply_action(self, action: Mapping[str, Any]) -> None:
        """Set the commands of an action dict (see the module docstring); missing keys keep
        the previous command. Takes effect at the next :meth:`step` (after any latency)."""
        cmd = self._cmd
        if self.is_arm:
            if C.ACT_JOINT_TARGET in action:
                q = self._cmd_q
                np.minimum(action[C.ACT_JOINT_TARGET], self._q_hi, out=q)
                np.maximum(q, self._q_lo, out=q)
                if C.ACT_JOINT_VEL not in action:
                    self._cmd_dq[:] = 0.0
            if C.ACT_JOINT_VEL in action:
                self._cmd_dq[:] = action[C.ACT_JOINT_VEL]
            if C.ACT_GRIPPER in action:
                g = action[C.ACT_GRIPPER]
                width = float(g[0] if type(g) is np.ndarray and g.ndim == 1
                              else np.asarray(g).reshape(-1)[0])
                cmd[14] = cmd[15] = min(max(width, 0.0), S.GRIPPER_MAX_WIDTH) / 2
        elif C.ACT_BASE_TWIST in action:
            v, w = (float(x) for x in np.asarray(action[C.ACT_BASE_TWIST]).reshape(-1)[:2])
            half = S.WHEEL_SEPARATION / 2
            cmd[0] = (v - w * half) / S.WHEEL_RADIUS
            cmd[1] = (v + w * half) / S.WHEEL_RADIUS

    def step(self, action: Mapping[str, Any] | None = None, control_steps: int = 1) -> None:
        """Advance ``control_steps`` control steps (each ``substeps`` physics steps).

        Args:
            action: commands to apply first (optional).
            control_steps: how many control periods to advance with these commands.
        """
        if action is not None:
            self.apply_action(action)
        m, d, ctrl = self.model, self.data, self._ctrl
        delay = self._calibration_delay + self._latency_steps * self.substeps
        for _ in range(control_steps):
            if delay:
                # commands take effect `delay` physics steps after their control step: the
                # first `rem` physics steps still run on the command before
                whole, rem = divmod(delay, self.substeps)
                pending = self._pending
                pending.append(self._cmd.copy())
                while len(pending) > whole + 2:
                    pending.popleft()
                if rem:
                    if len(pending) > whole + 1:
                        ctrl[:] = pending[-2 - whole]
                    mujoco.mj_step(m, d, nstep=rem)
                if len(pending) > whole:
                    ctrl[:] = pending[-1 - whole]
                mujoco.mj_step(m, d, nstep=self.substeps - rem)
            else:
                ctrl[:] = self._cmd
                mujoco.mj_step(m, d, nstep=self.substeps)
        # mj_step leaves positions-derived quantities (site/body poses) one physics substep
        # behind qpos; refresh them so tool_pose (and GPS, cameras) match the joint state,
        # exactly as forward kinematics of the reported joints gives (the ROS path). Dynamics
        # are unaffected: the next mj_step recomputes everything from qpos/qvel.
        mujoco.mj_kinematics(m, d)

    # ------------------------------------------------------------------ observations
    def observation(self, cameras: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """State observations (float64 copies) plus images of ``cameras``.

        Tabletop: joint_pos (7,), joint_vel (7,), gripper_width (1,), object_poses (n, 7),
        tool_pose (7,). Mobile base: joint_pos (2,), joint_vel (2,) (wheels), imu (10,),
        gps (3,), odom (6,). Poses are (x, y, z, qw, qx, qy, qz) in the world frame.
        Images: ``image_key(camera, 'rgb'|'depth')``.
        """
        idx, qpos = self.index, self._qpos
        obs = {C.OBS_JOINT_POS: qpos[idx.arm_qpos].copy(),
               C.OBS_JOINT_VEL: self._qvel[idx.arm_dof].copy()}
        if self.is_arm:
            f0, f1 = self._fingers          # as ndarray.sum of the two: 0.0 + a + b
            obs[C.OBS_GRIPPER] = np.array([0.0 + qpos[f0] + qpos[f1]])
            obs[C.OBS_OBJECT_POSES] = qpos[idx.object_qpos].reshape(-1, 7).copy()
            obs[C.OBS_TOOL_POSE] = self.tool_pose()
        else:
            obs[C.OBS_IMU] = self._sensordata[:10].copy()
            obs[C.OBS_GPS] = self.gps()
            obs[C.OBS_ODOM] = self.odometry()
        cams = self.config.cameras if cameras is None else cameras
        for cam in cams:
            obs[image_key(cam, "rgb")] = self.render(cam)
            if self.config.depth:
                obs[image_key(cam, "depth")] = self.render(cam, depth=True)
        return obs

    def tool_pose(self) -> np.ndarray:
        """(x, y, z, qw, qx, qy, qz) of the tool0 site in the world frame."""
        sid = self.index.tool_site
        out = np.empty(7)
        out[:3] = self._site_xpos[sid]
        mujoco.mju_mat2Quat(out[3:], self._site_xmat[sid])
        return out

    def gps(self) -> np.ndarray:
        """(latitude deg, longitude deg, altitude m) of the GPS antenna (mobile base)."""
        origin = self.scene.gps_origin
        if origin is None:
            raise ConfigError("scene.gps_origin", None, "a GPS origin for GPS observations")
        enu = self.data.site_xpos[self.index.gps_site]
        return np.array(enu_to_geodetic(enu, (origin.latitude, origin.longitude,
                                              origin.altitude)))

    def odometry(self) -> np.ndarray:
        """(x, y, yaw, vx, vy, wz) of base_link: world-frame pose, world-frame linear velocity
        and yaw rate (ground truth; the odom frame coincides with the world frame at reset)."""
        d, qa, da = self.data, self.index.base_qpos, self.index.base_dof
        q = d.qpos[qa:qa + 7]
        return np.array([q[0], q[1], quat_yaw(q[3:7]), d.qvel[da], d.qvel[da + 1],
                         d.qvel[da + 5]])

    def joint_state(self) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
        """(names, positions, velocities, efforts) of every robot joint (arm + fingers, or
        wheels), for joint_states messages."""
        d, idx = self.data, self.index
        return (idx.joint_names, d.qpos[idx.joint_qpos].copy(), d.qvel[idx.joint_dof].copy(),
                d.qfrc_actuator[idx.joint_dof].copy())

    def object_poses(self) -> dict[str, np.ndarray]:
        """name -> (x, y, z, qw, qx, qy, qz) of every free object."""
        q = self.data.qpos[self.index.object_qpos].reshape(-1, 7)
        return {n: q[i].copy() for i, n in enumerate(self.index.object_names)}

    # ------------------------------------------------------------------ rendering
    def render(self, camera: str, width: int | None = None, height: int | None = None,
               depth: bool = False) -> np.ndarray:
        """Render a named camera: uint8 (H, W, 3) RGB, or float32 (H, W) depth in metres."""
        w = width or self.config.image_width
        h = height or self.config.image_height
        renderer = self._renderers.get((h, w))
        if renderer is None:
            gl = self.model.vis.global_
            gl.offwidth, gl.offheight = max(gl.offwidth, w), max(gl.offheight, h)
            renderer = self._renderers[(h, w)] = mujoco.Renderer(self.model, h, w)
        renderer.update_scene(self.data, camera=camera)
        if depth:
            renderer.enable_depth_rendering()
            try:
                return renderer.render().astype(np.float32)
            finally:
                renderer.disable_depth_rendering()
        return renderer.render()

    def camera_intrinsics(self, camera: str, width: int, height: int) -> np.ndarray:
        """3x3 pinhole matrix K of a camera at a resolution (for camera_info)."""
        cid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cid < 0:
            raise ConfigError("camera", camera, "one of " + ", ".join(self.index.cameras))
        fy = 0.5 * height / math.tan(math.radians(self.model.cam_fovy[cid]) / 2)
        return np.array([[fy, 0.0, (width - 1) / 2], [0.0, fy, (height - 1) / 2],
                         [0.0, 0.0, 1.0]])

    def close(self) -> None:
        """Free the renderers (GL contexts)."""
        for renderer in getattr(self, "_renderers", {}).values():
            renderer.close()
        self._renderers = {}
