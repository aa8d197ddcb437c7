"""Control, observation and reward modes of the Gymnasium envs (ManiSkill's ``gym.make`` style).

``gym.make(ID)`` gives what RL libraries (Stable-Baselines3, skrl, CleanRL-style scripts)
accept without a wrapper of their own; ``gym.make(ID, control_mode=..., obs_mode=...,
reward_mode=...)`` selects the others. The env classes themselves keep the Dict interface that
the scripted experts, the evaluator and the ROS path use: constructing a class directly, or
``gym.make(ID, control_mode="dict")``, gives exactly that env (no wrapper).

Control modes (the action is ``Box(-1, 1, (n,), float32)`` except for ``dict``):

* ``pd_joint_delta`` (arms, default): 7 joint-position deltas, +-1 = +-:data:`JOINT_DELTA_MAX`
  rad from the measured joint positions per control step (20 ms), then the gripper width,
  -1 = closed .. +1 = open (0.08 m). Deltas bound how far one step can move the arm, so a
  random or early policy explores near where the arm is instead of commanding jumps across
  the workspace (what an absolute target from a random action does), and the same action
  means the same motion everywhere in the workspace.
* ``pd_joint_pos`` (arms): 7 absolute joint-position targets, -1..+1 over each joint's range,
  then the gripper width as above.
* ``base_twist`` (mobile base, default): linear velocity (+-1 m/s) and angular velocity
  (+-2 rad/s): the base is driven by a twist already (its wheels follow it), no other choice
  would make it easier.
* ``dict``: the action dict of :mod:`clawgym_ros.sim.mujoco_backend`.

The layout (``action_layout``, one name per element, and ``action_scale``) is in the env's
``metadata``. Actions outside [-1, 1] are clipped; ``info["action_clipped"]`` says whether
this step's was and ``info["clipped_steps"]`` how many steps of the episode were. A NaN (or
infinite) action raises :class:`~clawgym_ros.errors.ActionError` without stepping and ends
the episode (the next ``step`` must follow a ``reset``); an action of the wrong shape raises it
naming the expected shape and layout.

Observation modes: ``dict`` (default; SB3's ``MultiInputPolicy`` takes it) or ``state``, one
float32 vector of the state keys in :data:`~clawgym_ros.constants.OBS_STATE_KEYS` order then
the others alphabetically (``metadata["obs_layout"]``: key and size of each part); ``state``
refuses camera images.

Reward modes: ``shaped``: the weighted stage-wise terms the task declares
(:mod:`clawgym_ros.tasks.rewards`: progress as a potential difference, success, unintended
contact, excess contact force, timely recovery after a disturbance;
``reward_weights={term: weight}`` overrides the task's
defaults; ``info["reward_terms"]`` has the step's unweighted terms); ``dense`` (default with a
Box action): task progress in [0, 1],
``(k + 1 - tanh(d / scale)) / n`` with ``k`` of ``n`` stages reached and ``d`` the distance (m)
to the next stage that the task's tracker declares
(:meth:`~clawgym_ros.tasks.base.StageTracker.stage_distance`; ``scale`` 0.1 m for arm tasks,
5 m for gps_nav), 1.0 once every stage is reached; the bare scenes (Tabletop, MobileBase) have
no task and give 0.0. ``stages`` (default with ``dict``): the number of stages reached, as the
envs always gave. Same seed and actions, same rewards: the reward is a function of the true
state only.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from clawgym_ros import constants as C
from clawgym_ros.errors import ActionError, ConfigError
from clawgym_ros.sim import scene_spec as S

#: Largest joint-position delta (rad) of one control step in ``pd_joint_delta`` (2.5 rad/s at
#: 50 Hz, about the arm's URDF velocity limits of 2.2-2.6 rad/s).
JOINT_DELTA_MAX = 0.05
#: Twist limits of ``base_twist``: (linear m/s, angular rad/s) at +-1.
BASE_TWIST_MAX = (1.0, 2.0)


class EnvFactory:
    """Gymnasium entry point of one env id: builds the env class, then applies the modes.

    Args:
        entry_point: ``"module:Class"`` of the env (a :class:`~clawgym_ros.sim.envs.ClawEnv`).
    """

    def __init__(self, entry_point: str) -> None:
        self.entry_point = entry_point

    @property
    def env_class(self) -> type[gym.Env]:
        """The env class (imported on first use)."""
        module, name = self.entry_point.split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def metadata(self) -> dict[str, Any]:
        """The class's metadata (``gym.make`` checks ``render_mode`` against it)."""
        return self.env_class.metadata

    def __call__(self, control_mode: str | None = None, obs_mode: str = C.OBS_MODE_DICT,
                 reward_mode: str | None = None, reward_weights: Mapping[str, float] | None = None,
                 **kwargs: Any) -> gym.Env:
        """The env built with ``kwargs``, in the given modes (see the module docstring)."""
        check_modes(None, control_mode, obs_mode, reward_mode)
        return with_modes(self.env_class(**kwargs), control_mode, obs_mode, reward_mode,
                          reward_weights)

    def __repr__(self) -> str:
        return f"EnvFactory({self.entry_point!r})"


def check_modes(is_arm: bool | None, control_mode: str | None, obs_mode: str,
                reward_mode: str | None) -> None:
    """Refuse unknown modes by name (``is_arm`` None: any robot's control modes).

    Raises:
        ConfigError: a mode is not one of the allowed ones.
    """
    allowed = (C.ARM_CONTROL_MODES if is_arm else C.BASE_CONTROL_MODES) if is_arm is not None \
        else tuple(dict.fromkeys(C.ARM_CONTROL_MODES + C.BASE_CONTROL_MODES))
    if control_mode is not None and control_mode not in allowed:
        raise ConfigError("control_mode", control_mode, ", ".join(allowed))
    if obs_mode not in C.OBS_MODES:
        raise ConfigError("obs_mode", obs_mode, ", ".join(C.OBS_MODES))
    if reward_mode is not None and reward_mode not in C.REWARD_MODES:
        raise ConfigError("reward_mode", reward_mode, ", ".join(C.REWARD_MODES))


def with_modes(env: gym.Env, control_mode: str | None = None,
               obs_mode: str = C.OBS_MODE_DICT, reward_mode: str | None = None,
               reward_weights: Mapping[str, float] | None = None) -> gym.Env:
    """``env`` (a ClawEnv with the Dict interface) in the given modes.

    Args:
        env: the env, unwrapped.
        control_mode: None = the robot's default (``pd_joint_delta`` for arms,
            ``base_twist`` for the base).
        obs_mode: ``dict`` or ``state``.
        reward_mode: None = ``stages`` with ``control_mode="dict"``, else ``dense``.
        reward_weights: with ``reward_mode="shaped"``: term -> weight overriding the task's
            declared defaults.

    Returns:
        ``env`` itself for the Dict interface in full (dict actions, dict observations,
        stage-count reward), else a :class:`ModeWrapper` around it.
    """
    is_arm = bool(env.unwrapped.backend.is_arm)
    check_modes(is_arm, control_mode, obs_mode, reward_mode)
    control = control_mode or (C.CONTROL_JOINT_DELTA if is_arm else C.CONTROL_BASE_TWIST)
    reward = reward_mode or (C.REWARD_STAGES if control == C.CONTROL_DICT else C.REWARD_DENSE)
    if reward_weights and reward != C.REWARD_SHAPED:
        raise ConfigError("reward_weights", dict(reward_weights),
                          "only with reward_mode='shaped'")
    if (control, obs_mode, reward) == (C.CONTROL_DICT, C.OBS_MODE_DICT, C.REWARD_STAGES):
        return env
    return ModeWrapper(env, control, obs_mode, reward, reward_weights)


class ModeWrapper(gym.Wrapper):
    """A ClawEnv in non-default modes (see the module docstring); made by :func:`with_modes`.

    Args:
        env: the env (Dict interface), unwrapped.
        control_mode, obs_mode, reward_mode: resolved modes.
    """

    def __init__(self, env: gym.Env, control_mode: str, obs_mode: str, reward_mode: str,
                 reward_weights: Mapping[str, float] | None = None) -> None:
        super().__init__(env)
        self._shaped = None
        if reward_mode == C.REWARD_SHAPED and hasattr(env.unwrapped, "tracker"):
            from clawgym_ros.tasks.rewards import StageReward

            self._shaped = StageReward(env.unwrapped, reward_weights)
        backend = env.unwrapped.backend
        self.control_mode, self.obs_mode, self.reward_mode = control_mode, obs_mode, reward_mode
        self._arm = bool(backend.is_arm)
        m = backend.model
        joints: list[str] = []
        if self._arm:
            self._lo, self._hi = (np.array(v, dtype=np.float64) for v in
                                  m.actuator_ctrlrange[:7].T)
            joints = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(j))
                      for j in m.actuator_trnid[:7, 0]]
        self._layout: list[str] = []
        scale: dict[str, Any] = {}
        if control_mode == C.CONTROL_JOINT_DELTA:
            self._layout = [f"{j}_delta" for j in joints] + [C.ACT_GRIPPER]
            scale = {"joint_delta_rad": JOINT_DELTA_MAX, "gripper_m": [0.0, S.GRIPPER_MAX_WIDTH]}
        elif control_mode == C.CONTROL_JOINT_POS:
            self._layout = [f"{j}_target" for j in joints] + [C.ACT_GRIPPER]
            scale = {"joint_target_rad": [self._lo.tolist(), self._hi.tolist()],
                     "gripper_m": [0.0, S.GRIPPER_MAX_WIDTH]}
        elif control_mode == C.CONTROL_BASE_TWIST:
            self._layout = ["linear_velocity", "angular_velocity"]
            scale = {"linear_m_s": BASE_TWIST_MAX[0], "angular_rad_s": BASE_TWIST_MAX[1]}
        if self._layout:
            self.action_space = spaces.Box(-1.0, 1.0, (len(self._layout),), np.float32)
        self._obs_layout: list[tuple[str, int]] = []
        if obs_mode == C.OBS_MODE_STATE:
            inner = env.observation_space
            images = [k for k, s in inner.spaces.items() if s.dtype == np.uint8]
            if images:
                raise ConfigError("obs_mode", obs_mode,
                                  f"'dict' with camera images ({', '.join(images)}); 'state' "
                                  "only without cameras")
            keys = [k for k in C.OBS_STATE_KEYS if k in inner.spaces]
            keys += sorted(k for k in inner.spaces if k not in keys)
            self._obs_layout = [(k, int(np.prod(inner.spaces[k].shape))) for k in keys]
            n = sum(size for _, size in self._obs_layout)
            self.observation_space = spaces.Box(-np.inf, np.inf, (n,), np.float32)
        self.metadata = {**env.metadata, "control_mode": control_mode,
                         "action_layout": list(self._layout), "action_scale": scale,
                         "obs_mode": obs_mode,
                         "obs_layout": [list(kv) for kv in self._obs_layout],
                         "reward_mode": reward_mode}
        self._q = np.zeros(7)
        self._clipped = 0
        self._broken = False

    # ------------------------------------------------------------------ Env API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; the episode's clip count starts at 0."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._clipped, self._broken = 0, False
        if self._shaped is not None:
            self._shaped.reset()
        self._remember(obs)
        return self._observation(obs), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Map the action to the env's command dict, step, and present the result.

        Raises:
            ActionError: wrong shape, NaN or infinite values, or a step after such an error
                without a reset.
        """
        clipped = False
        if self._layout:
            action, clipped = self._check(action)
            self._clipped += int(clipped)
            action = self._command(action)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._remember(obs)
        if self.reward_mode == C.REWARD_DENSE:
            reward = float(self.env.unwrapped.dense_reward())
        elif self.reward_mode == C.REWARD_SHAPED:
            reward = 0.0
            if self._shaped is not None:
                reward, info[C.INFO_REWARD_TERMS] = self._shaped.step(info)
        info[C.INFO_ACTION_CLIPPED] = clipped
        info[C.INFO_CLIPPED_STEPS] = self._clipped
        return self._observation(obs), float(reward), terminated, truncated, info

    # ------------------------------------------------------------------ helpers
    def _expected(self) -> str:
        return (f"expected shape ({len(self._layout)},) in [-1, 1] for control_mode="
                f"{self.control_mode!r}: [{', '.join(self._layout)}]")

    def _check(self, action: Any) -> tuple[np.ndarray, bool]:
        if self._broken:
            raise ActionError("the episode ended with a non-finite action; call reset() "
                              "before step()")
        if isinstance(action, Mapping):
            raise ActionError(f"action is a dict ({', '.join(map(str, action))}); the action "
                              "dict needs gym.make(..., control_mode='dict'); "
                              f"{self._expected()}")
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ActionError(f"action is not numeric ({type(action).__name__}: {exc}); "
                              f"{self._expected()}") from None
        if a.shape != (len(self._layout),):
            raise ActionError(f"action has shape {a.shape}; {self._expected()}")
        bad = ~np.isfinite(a)
        if bad.any():
            self._broken = True
            names = [self._layout[i] for i in np.flatnonzero(bad)]
            raise ActionError(f"action is not finite at {', '.join(names)} "
                              f"({a.tolist()}); the episode is over (no step was taken): "
                              "call reset()")
        clipped = bool(np.any(np.abs(a) > 1.0))
        return (np.clip(a, -1.0, 1.0) if clipped else a), clipped

    def _command(self, a: np.ndarray) -> dict[str, np.ndarray]:
        if self.control_mode == C.CONTROL_BASE_TWIST:
            return {C.ACT_BASE_TWIST: a[:2] * np.asarray(BASE_TWIST_MAX)}
        if self.control_mode == C.CONTROL_JOINT_DELTA:
            target = np.clip(self._q + a[:7] * JOINT_DELTA_MAX, self._lo, self._hi)
        else:
            target = self._lo + (a[:7] + 1.0) * 0.5 * (self._hi - self._lo)
        return {C.ACT_JOINT_TARGET: target,
                C.ACT_GRIPPER: np.array([(a[7] + 1.0) * 0.5 * S.GRIPPER_MAX_WIDTH])}

    def _remember(self, obs: dict[str, np.ndarray]) -> None:
        if self._arm:
            self._q = np.array(obs[C.OBS_JOINT_POS], dtype=np.float64)

    def _observation(self, obs: dict[str, np.ndarray]) -> Any:
        if self.obs_mode == C.OBS_MODE_DICT:
            return obs
        return np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(-1)
                               for k, _ in self._obs_layout])
