"""Inverse kinematics for tool poses with mink (differential IK on the MuJoCo model).

Seeds and restarts: the caller's seed first, then the given extra seeds (e.g. SRDF named
states), then seeded random configurations; each is iterated until the position and
orientation errors are within tolerance. Solutions can be filtered (collision-free) by the
caller's ``accept`` function.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.planning.types import Pose
from clawgym_ros.sim.world import name_index


@dataclasses.dataclass(frozen=True)
class IkConfig:
    """IK settings (kinematics.yaml supplies tolerances and attempts)."""

    position_tolerance: float = dataclasses.field(
        default=0.001, metadata={"help": "metres, (0, 0.1]"})
    orientation_tolerance: float = dataclasses.field(
        default=0.01, metadata={"help": "radians, (0, 1]"})
    attempts: int = dataclasses.field(default=10, metadata={"help": "seeds tried, [1, 1000]"})
    iterations: int = dataclasses.field(
        default=150, metadata={"help": "solver steps per seed, [1, 10000]"})
    timeout: float = dataclasses.field(
        default=0.5, metadata={"help": "seconds, (0, 60]; ignored when deterministic"})
    deterministic: bool = dataclasses.field(
        default=True, metadata={"help": "stop after `attempts` seeds only, never on the wall "
                                        "clock, so a result does not depend on machine load"})
    damping: float = dataclasses.field(default=1e-3, metadata={"help": "QP damping, [0, 1]"})

    def __post_init__(self) -> None:
        check_range("ik.position_tolerance", self.position_tolerance, 0.0, 0.1, low_open=True)
        check_range("ik.orientation_tolerance", self.orientation_tolerance, 0.0, 1.0,
                    low_open=True)
        check_int("ik.attempts", self.attempts, 1, 1000)
        check_int("ik.iterations", self.iterations, 1, 10000)
        check_range("ik.timeout", self.timeout, 0.0, 60.0, low_open=True)
        check_range("ik.damping", self.damping, 0.0, 1.0)


@dataclasses.dataclass
class IkResult:
    """An IK outcome: ``q`` (planning joints) when ``success``."""

    success: bool
    q: np.ndarray | None = None
    position_error: float = float("inf")
    orientation_error: float = float("inf")
    attempts: int = 0
    rejected: int = 0  # converged solutions refused by ``accept`` (e.g. in collision)


class IkSolver:
    """IK for the tool frame of ``model`` over the planning joints.

    Args:
        model: the MuJoCo model (a private copy is made).
        joint_names: planning joints.
        tool_frame: body or site name of the tool frame.
        config: tolerances and budgets.
        seed: random restart generator seed.
    """

    def __init__(
        self,
        model: Any,
        joint_names: Sequence[str] = C.ARM_JOINTS,
        tool_frame: str = C.FRAME_TOOL,
        config: IkConfig | None = None,
        seed: int = 0,
    ) -> None:
        import copy

        import mink

        self._mink = mink
        self.model = copy.deepcopy(model)
        self.config = config or IkConfig()
        self.rng = np.random.default_rng(seed)
        self.configuration = mink.Configuration(self.model)
        jids = []
        for name in joint_names:
            jid = name_index(self.model, "joint", name)
            if jid < 0:
                raise ConfigError("joint_names", name, "joints of the MuJoCo model")
            jids.append(jid)
        self.qpos_adr = self.model.jnt_qposadr[jids]
        self.dof_adr = self.model.jnt_dofadr[jids]
        self.lower = self.model.jnt_range[jids, 0].copy()
        self.upper = self.model.jnt_range[jids, 1].copy()
        if name_index(self.model, "site", tool_frame) >= 0:
            frame_type = "site"
        elif name_index(self.model, "body", tool_frame) >= 0:
            frame_type = "body"
        else:
            raise ConfigError("tool_frame", tool_frame, "a body or site of the MuJoCo model")
        self.task = mink.FrameTask(tool_frame, frame_type, position_cost=1.0,
                                   orientation_cost=0.5, lm_damping=1e-3)
        self.frame = (tool_frame, frame_type)
        self.limits = [mink.ConfigurationLimit(self.model)]
        self.scene_qpos = self.model.qpos0.copy()
        self._mask = np.zeros(self.model.nv, dtype=bool)
        self._mask[self.dof_adr] = True

    def set_scene_qpos(self, qpos: np.ndarray) -> None:
        """Values of the non-planning joints (objects, gripper) used during IK."""
        self.scene_qpos = np.asarray(qpos, dtype=float).copy()

    def solve(
        self,
        target: Pose,
        seed: Sequence[float] | None = None,
        extra_seeds: Sequence[Sequence[float]] = (),
        accept: Callable[[np.ndarray], bool] | None = None,
        iterations: int | None = None,
        attempts: int | None = None,
    ) -> IkResult:
        """Joint values placing the tool at ``target``.

        Args:
            target: tool pose in the world frame.
            seed: first initial guess (e.g. the start state).
            extra_seeds: further initial guesses before random restarts.
            accept: filter for converged solutions (return False to keep searching).
            iterations: solver steps per seed (default from config).
            attempts: number of seeds (default from config).

        Returns:
            An :class:`IkResult`; never raises for unreachable targets.
        """
        mink = self._mink
        cfg = self.config
        iterations = iterations or cfg.iterations
        attempts = attempts or cfg.attempts
        self.task.set_target(mink.SE3.from_rotation_and_translation(
            mink.SO3(np.asarray(target.orientation)), np.asarray(target.position)))
        seeds: list[np.ndarray] = []
        if seed is not None:
            seeds.append(np.asarray(seed, dtype=float))
        seeds += [np.asarray(s, dtype=float) for s in extra_seeds]
        # A wall-clock deadline would make the answer depend on machine load; deterministic
        # solving is bounded by the number of attempts alone.
        deadline = float("inf") if cfg.deterministic else time.monotonic() + cfg.timeout
        best = IkResult(success=False)
        tried = 0
        while tried < attempts and time.monotonic() < deadline:
            q0 = (seeds[tried] if tried < len(seeds)
                  else self.rng.uniform(self.lower, self.upper))
            tried += 1
            q, pos_err, rot_err = self._descend(q0, iterations)
            if pos_err <= cfg.position_tolerance and rot_err <= cfg.orientation_tolerance:
                if accept is None or accept(q):
                    return IkResult(True, q, pos_err, rot_err, tried, best.rejected)
                best.rejected += 1
            elif pos_err + rot_err < best.position_error + best.orientation_error:
                best.position_error, best.orientation_error = pos_err, rot_err
        best.attempts = tried
        return best

    def _descend(self, q0: np.ndarray, iterations: int) -> tuple[np.ndarray, float, float]:
        mink = self._mink
        qfull = self.scene_qpos.copy()
        qfull[self.qpos_adr] = np.clip(q0, self.lower, self.upper)
        conf = self.configuration
        conf.update(qfull)
        dt = 1.0
        pos_err = rot_err = float("inf")
        for _ in range(iterations):
            err = self.task.compute_error(conf)
            pos_err, rot_err = float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:]))
            if (pos_err <= 0.25 * self.config.position_tolerance
                    and rot_err <= 0.25 * self.config.orientation_tolerance):
                break
            try:
                vel = mink.solve_ik(conf, [self.task], dt, "daqp", damping=self.config.damping,
                                    limits=self.limits)
            except mink.MinkError:
                break
            vel[~self._mask] = 0.0
            conf.integrate_inplace(vel, dt)
        err = self.task.compute_error(conf)
        pos_err, rot_err = float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:]))
        return conf.q[self.qpos_adr].copy(), pos_err, rot_err
