"""Gymnasium envs on the MuJoCo backend: clawgym/Tabletop-v0 and clawgym/MobileBase-v0.

The env is a thin layer: ``step`` applies the action dict, advances one control step of the
backend (``control_dt``, 10 physics steps) and returns the backend's observation dict. Bare
scene envs have reward 0 and never terminate; task envs (later issues) subclass
:class:`ClawEnv` and override :meth:`ClawEnv.task_reward` (and register under new ids in
:mod:`clawgym_ros.sim.registration`).

These classes are the Dict interface (what ``gym.make(ID, control_mode="dict")`` returns);
``gym.make(ID)`` puts them in the RL interface of :mod:`clawgym_ros.sim.modes` (flat Box
action, dense reward from :meth:`ClawEnv.dense_reward`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from clawgym_ros import constants as C
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.mujoco_backend import MujocoBackend, MujocoConfig, image_key


class ClawEnv(gym.Env):
    """A Gymnasium env over a :class:`MujocoBackend` scene.

    Args:
        scene: scene name.
        cameras: cameras whose images join the observation (``<camera>_rgb``; empty = state).
        image_width, image_height: observation image size.
        depth: also add ``<camera>_depth`` images.
        render_mode: None or ``"rgb_array"`` (the scene's first camera).
        render_width, render_height: size of :meth:`render` frames.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, scene: str = C.SCENE_TABLETOP, cameras: Sequence[str] = (),
                 image_width: int = 84, image_height: int = 84, depth: bool = False,
                 render_mode: str | None = None, render_width: int = 320,
                 render_height: int = 240) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r}; allowed: None, 'rgb_array'")
        self.backend = self._make_backend(MujocoConfig(
            scene=scene, cameras=tuple(cameras), image_width=image_width,
            image_height=image_height, depth=depth))
        self.render_mode = render_mode
        self.render_size = (render_width, render_height)
        self.render_camera = self.backend.scene.cameras[0].name
        self.metadata = {**self.metadata, "render_fps": int(round(1 / self.backend.control_dt))}
        self.observation_space = self._observation_space()
        self.action_space = self._action_space()

    def _make_backend(self, config: MujocoConfig) -> MujocoBackend:
        """The simulator backend (task envs override this to simulate template variants)."""
        return MujocoBackend(config)

    # ------------------------------------------------------------------ spaces
    def _observation_space(self) -> spaces.Dict:
        obs = self.backend.observation()
        items: dict[str, spaces.Space] = {}
        for key, value in obs.items():
            if value.dtype == np.uint8:
                items[key] = spaces.Box(0, 255, value.shape, np.uint8)
            else:
                items[key] = spaces.Box(-np.inf, np.inf, value.shape, value.dtype)
        return spaces.Dict(items)

    def _action_space(self) -> spaces.Dict:
        m = self.backend.model
        if self.backend.is_arm:
            lo, hi = m.actuator_ctrlrange[:7].T
            vlo, vhi = m.actuator_ctrlrange[7:14].T
            return spaces.Dict({
                C.ACT_JOINT_TARGET: spaces.Box(lo, hi, (7,), np.float64),
                C.ACT_JOINT_VEL: spaces.Box(vlo, vhi, (7,), np.float64),
                C.ACT_GRIPPER: spaces.Box(0.0, S.GRIPPER_MAX_WIDTH, (1,), np.float64),
            })
        return spaces.Dict({C.ACT_BASE_TWIST: spaces.Box(
            np.array([-1.0, -2.0]), np.array([1.0, 2.0]), (2,), np.float64)})

    # ------------------------------------------------------------------ Env API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset with randomness drawn only from the env's ``np_random``."""
        super().reset(seed=seed)
        self.backend.reset(seed if seed is not None else -1, rng=self.np_random)
        return self.backend.observation(), self._info()

    def step(self, action: dict[str, Any]
             ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply the action for one control step; returns (obs, reward, terminated,
        truncated, info)."""
        self.backend.step(action)
        obs = self.backend.observation()
        reward, terminated = self.task_reward(obs)
        return obs, reward, terminated, False, {}

    def task_reward(self, obs: dict[str, np.ndarray]) -> tuple[float, bool]:
        """(reward, terminated) of the task; the bare scene has none."""
        return 0.0, False

    def dense_reward(self) -> float:
        """The RL interface's dense reward after the last reset or step; a bare scene has no
        task, so 0.0 (task envs override it)."""
        return 0.0

    def render(self) -> np.ndarray | None:
        """An RGB frame of the scene camera (``render_mode="rgb_array"``), else None."""
        if self.render_mode != "rgb_array":
            return None
        w, h = self.render_size
        return self.backend.render(self.render_camera, w, h)

    def close(self) -> None:
        """Free the renderers."""
        self.backend.close()

    def _info(self) -> dict[str, Any]:
        return {"time": self.backend.time}

    @property
    def image_keys(self) -> list[str]:
        """Observation keys holding images."""
        return [image_key(c, k) for c in self.backend.config.cameras
                for k in (("rgb", "depth") if self.backend.config.depth else ("rgb",))]


class TabletopEnv(ClawEnv):
    """The tabletop scene: 7-DOF claw arm, table, three objects, two bins."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(scene=C.SCENE_TABLETOP, **kwargs)


class MobileBaseEnv(ClawEnv):
    """The outdoor scene: differential-drive base with IMU, GPS, odometry and a front camera."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(scene=C.SCENE_OUTDOOR, **kwargs)
