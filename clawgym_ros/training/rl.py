"""RL fine-tuning of a behaviour-cloning checkpoint with PPO (Stable-Baselines3) on the task
envs, in one of two modes (:attr:`FinetuneConfig.mode`), committed as a content-addressed
checkpoint whose lineage reaches the BC parent.

``direct`` (default): PPO's actor IS the BC network (see :class:`DirectEnv`), committed as a
checkpoint of the BC policy's own type with the fine-tuned weights. ``residual``: a correction
added to the frozen BC policy's action at every control step (residual RL), committed as a
:mod:`residual <clawgym_ros.training.residual>` checkpoint; the path for state policy types
direct mode cannot take over (tested with ``mlp`` only; neither mode takes a policy that reads
camera images). Direct is the default because it is the mode the
measurements support: its recipe (:data:`MODE_DEFAULTS`) beat its BC start in every seed on
pick_place, residual never did, and it runs ~3x the control steps/s (one PPO decision per
action chunk instead of per control step; docs/results/2026-12-05-rl-throughput.md).

Residual mode in detail. The RL observation is the residual network's input (the BC policy's
normalized observation and its own normalized prediction of the step's action); the RL action
is the correction in [-1, 1] per action element, scaled by ``residual_scale_*``. PPO's actor is
an MLP of :attr:`FinetuneConfig.hidden` with tanh, exactly the residual network of the
committed checkpoint (the SB3 actor's weights are copied into it), so evaluation, the loop and
policy_node run the fine-tuned policy through the same checkpoint path as any BC policy.

Reward: the stage-wise terms the task declares (:mod:`clawgym_ros.tasks.rewards`: progress as
a potential difference, success, unintended contact, excess contact force), with the task's
default weights unless :attr:`FinetuneConfig.reward_weights` overrides some; each term's
episode sum is in the step info under ``reward_terms`` and in the TensorBoard curves.

Direct mode in detail: the RL observation is the BC policy's normalized network input, the RL
action is its normalized action chunk (``chunk x act_dim`` values); one PPO step executes the
chunk's ``chunk`` control steps (reward summed), as the BC policy executes its chunks.
PPO's actor is an SB3 MLP with the BC network's widths and ReLU, its weights copied from the
BC network (mean action = the BC prediction), with a value network of its own; the
exploration noise's log-std starts at :attr:`FinetuneConfig.log_std_init` in normalized
action units. The settings counted in control steps (``steps``, ``n_steps``, ``batch_size``)
and per control step (``gamma``, ``gae_lambda``) are converted to chunks: ``ceil(x / chunk)``,
``gamma ** chunk``, ``gae_lambda ** chunk``. Only a policy whose network is state in, chunk
out (type ``mlp``) can be taken over; ``hidden`` and ``residual_scale_*`` are not used. A
policy relative to its previous command (``relative_base: command``) is fine-tuned in this
mode only (residual mode refuses it: its corrections are rebased on the observation).

Episodes are the task env's own (a training template drawn per reset from the env's seeded
RNG), ``max_episode_steps`` long at most. Same seed and worker count, same checkpoint id: SB3
seeds torch, numpy and every env (``seed + i``), torch runs single-threaded with deterministic
algorithms, and nothing measured in wall time enters the committed content. An interrupted run
(kill -9) leaves no artifact; rerunning the command trains again from the start and commits the
same id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ActionError, CheckpointError, ClawgymError, ConfigError
from clawgym_ros.tasks.rewards import StageReward

#: Algorithms of RL fine-tuning (Stable-Baselines3).
ALGORITHMS: tuple[str, ...] = ("ppo",)
#: What PPO trains: a correction over the frozen BC policy, or the BC network itself.
MODE_RESIDUAL = "residual"
MODE_DIRECT = "direct"
MODES: tuple[str, ...] = (MODE_RESIDUAL, MODE_DIRECT)
#: The mode of a run that names none (see the module docstring for why).
DEFAULT_MODE = MODE_DIRECT
#: Default log-std of the exploration noise per mode (docs/results/2026-12-05-rl-direct.md:
#: direct at -3 made its noisy training episodes succeed 0.07-0.14, at -4 0.31-0.39).
LOG_STD_INIT: dict[str, float] = {MODE_RESIDUAL: -3.0, MODE_DIRECT: -4.0}
#: Defaults of the settings that depend on the mode (a field left at None takes its mode's).
#: direct: the recipe that beat its BC start in every seed measured (critic passes before
#: each update, 20,480-step rollouts, 2,048-step minibatches, lr 3e-6: pick_place 0.77 ->
#: 0.81, 5 seeds, docs/results/2026-12-06-rl-critic-fit.md); residual: the settings of its
#: measurements (it never beat its BC start: docs/notes/rl_finetune.md).
MODE_DEFAULTS: dict[str, dict[str, Any]] = {
    MODE_RESIDUAL: {"lr": 3e-5, "n_steps": 2048, "batch_size": 256, "value_epochs": 0,
                    "critic_warmup": 0, "log_std_init": LOG_STD_INIT[MODE_RESIDUAL]},
    MODE_DIRECT: {"lr": 3e-6, "n_steps": 20480, "batch_size": 2048, "value_epochs": 10,
                  "critic_warmup": 2, "log_std_init": LOG_STD_INIT[MODE_DIRECT]},
}
#: Exploration noise of direct mode (:attr:`FinetuneConfig.exploration`): independent per
#: element of the action chunk, or one draw per action element shared by the chunk's steps.
EXPLORATION_STEP = "step"
EXPLORATION_CHUNK = "chunk"
EXPLORATIONS: tuple[str, ...] = (EXPLORATION_STEP, EXPLORATION_CHUNK)
#: Bound of direct mode's normalized actions (standard deviations of the demonstrations'
#: actions; far outside anything a BC policy predicts).
DIRECT_ACTION_BOUND = 100.0


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """One RL fine-tuning run (validated on construction; ConfigError names the field).

    The PPO defaults are conservative (small exploration noise, small learning rate, updates
    stopped at a KL of 0.02): the BC policies here fail from joint-target offsets of a few
    milliradians (docs/notes/rl_finetune.md), so larger exploration or steps undo what the BC
    policy does right before PPO can learn. Direct mode's defaults add a critic fitted before
    each update and long rollouts (:data:`MODE_DEFAULTS`).
    """

    base_checkpoint: str
    steps: int
    seed: int
    task: str = C.TASK_PICK_PLACE
    workers: int = 1
    algorithm: str = "ppo"
    #: ``direct``: PPO's actor is the BC network, fine-tuned; ``residual``: PPO learns a
    #: correction over the frozen BC policy (see the module docstring). Settings left at None
    #: take the mode's default (:data:`MODE_DEFAULTS`).
    mode: str = DEFAULT_MODE
    #: largest correction of a joint target (rad), of the gripper width (m), of a joint
    #: velocity feed-forward (rad/s; 0 = the BC policy's own) and of a base twist element
    residual_scale_joint: float = 0.05
    residual_scale_gripper: float = 0.02
    residual_scale_velocity: float = 0.0
    residual_scale_twist: float = 0.2
    hidden: tuple[int, ...] = (64, 64)
    max_episode_steps: int = 800
    #: control steps per rollout and worker (SB3's ``n_steps``: with W workers an update
    #: sees W x n_steps steps; a run of fewer than W x n_steps x (critic_warmup + 1) steps
    #: uses shorter rollouts so that its actor is updated once); ``batch_size``: control
    #: steps per minibatch
    n_steps: int | None = None
    batch_size: int | None = None
    n_epochs: int = 10
    lr: float | None = None
    gamma: float = 0.995
    gae_lambda: float = 0.95
    clip_range: float = 0.1
    #: stop an update's epochs early once the policy moved this far (KL); 0 = never
    target_kl: float = 0.02
    #: log of the exploration noise's initial standard deviation, in correction units
    #: (residual) or normalized action units (direct); None = the mode's default,
    #: :data:`LOG_STD_INIT` (direct's -4 is about residual's noise in radians at the joints)
    log_std_init: float | None = None
    #: term -> weight overriding the task's declared default (clawgym_ros.tasks.rewards)
    reward_weights: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: the calibration the fine-tuning envs run at (SimCalibration.to_dict(); {} = none, and
    #: then not part of the checkpoint's config, so uncalibrated ids are as before)
    calibration: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: direct mode: behaviour-cloning minibatch steps of the actor on the BC parent's own
    #: demonstrations after every PPO update (0 = none; a regularizer that keeps the actor
    #: near the demonstrations, see :class:`DemoRegularizer`)
    bc_steps: int = 0
    #: rows per behaviour-cloning minibatch (``bc_steps`` > 0)
    bc_batch_size: int = 256
    #: learning rate of the behaviour-cloning steps (Adam, ``bc_steps`` > 0)
    bc_lr: float = 1e-4
    #: critic-only passes over each rollout before PPO's update (0 = none), with an Adam
    #: optimizer of their own at ``value_lr``: PPO's KL early stop ends the critic's training
    #: together with the actor's (in direct mode after one minibatch), see :class:`CriticFit`
    value_epochs: int | None = None
    #: learning rate of the critic-only passes (``value_epochs`` > 0)
    value_lr: float = 1e-3
    #: the first this many PPO updates train the critic only (the actor stays where it
    #: started until the critic has seen this many rollouts; needs ``value_epochs`` > 0)
    critic_warmup: int | None = None
    #: direct mode's exploration noise: ``step`` = an independent Gaussian per element of the
    #: action chunk (SB3's); ``chunk`` = one Gaussian offset per action element held over the
    #: chunk's steps (``act_dim`` noise dimensions instead of ``chunk x act_dim``), see
    #: :func:`chunk_shared_policy`
    exploration: str = EXPLORATION_STEP

    def __post_init__(self) -> None:
        if not isinstance(self.base_checkpoint, str) or not self.base_checkpoint:
            raise ConfigError("from", self.base_checkpoint, "a checkpoint id")
        check_int("steps", self.steps, 1, 100_000_000)
        check_int("seed", self.seed, 0, 2**31 - 1)
        check_int("workers", self.workers, 1, 64)
        check_choice("algorithm", self.algorithm, ALGORITHMS)
        check_choice("mode", self.mode, MODES)
        for name, value in MODE_DEFAULTS[self.mode].items():
            if getattr(self, name) is None:
                # no critic passes asked for (value_epochs=0): no warm-up by default either
                off = name == "critic_warmup" and not self.value_epochs
                object.__setattr__(self, name, 0 if off else value)
        check_range("residual_scale_joint", self.residual_scale_joint, 0.0, 1.0)
        check_range("residual_scale_gripper", self.residual_scale_gripper, 0.0, 0.08)
        check_range("residual_scale_velocity", self.residual_scale_velocity, 0.0, 5.0)
        check_range("residual_scale_twist", self.residual_scale_twist, 0.0, 2.0)
        object.__setattr__(self, "hidden", tuple(self.hidden))
        if not self.hidden:
            raise ConfigError("hidden", self.hidden, "at least one width")
        for i, width in enumerate(self.hidden):
            check_int(f"hidden[{i}]", width, 1, 4096)
        check_int("max_episode_steps", self.max_episode_steps, 1, 100_000)
        check_int("n_steps", self.n_steps, 2, 1_000_000)
        check_int("batch_size", self.batch_size, 2, 1_000_000)
        check_int("n_epochs", self.n_epochs, 1, 1000)
        check_range("lr", self.lr, 1e-8, 1.0)
        check_range("gamma", self.gamma, 0.0, 1.0)
        check_range("gae_lambda", self.gae_lambda, 0.0, 1.0)
        check_range("clip_range", self.clip_range, 1e-4, 1.0)
        check_range("target_kl", self.target_kl, 0.0, 10.0)
        check_range("log_std_init", self.log_std_init, -10.0, 2.0)
        if not isinstance(self.reward_weights, Mapping):
            raise ConfigError("reward_weights", self.reward_weights, "a mapping term -> weight")
        object.__setattr__(self, "reward_weights", dict(self.reward_weights))
        object.__setattr__(self, "calibration", dict(self.calibration))
        check_int("bc_steps", self.bc_steps, 0, 10_000)
        check_int("bc_batch_size", self.bc_batch_size, 1, 1_000_000)
        check_range("bc_lr", self.bc_lr, 1e-8, 1.0)
        check_int("value_epochs", self.value_epochs, 0, 1000)
        check_range("value_lr", self.value_lr, 1e-8, 1.0)
        check_int("critic_warmup", self.critic_warmup, 0, 1_000_000)
        if self.critic_warmup and not self.value_epochs:
            raise ConfigError("critic_warmup", self.critic_warmup, "0 unless value_epochs > 0 "
                              "(the warm-up updates train the critic with those passes only)")
        check_choice("exploration", self.exploration, EXPLORATIONS)
        if self.exploration != EXPLORATION_STEP and self.mode != MODE_DIRECT:
            raise ConfigError("exploration", self.exploration, f"{EXPLORATION_STEP!r} unless "
                              f"mode is {MODE_DIRECT} (residual corrections are per step)")
        if self.bc_steps and self.mode != MODE_DIRECT:
            raise ConfigError("bc_steps", self.bc_steps, f"0 unless mode is {MODE_DIRECT} (the "
                              "behaviour-cloning steps train the BC network PPO fine-tunes)")

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hidden"] = list(self.hidden)
        data["reward_weights"] = dict(sorted(self.reward_weights.items()))
        if not self.calibration:
            del data["calibration"]
        if self.mode == MODE_RESIDUAL:     # ids of residual runs as before modes existed
            del data["mode"]
        if not self.bc_steps:              # off: ids of runs as before the regularizer
            for key in ("bc_steps", "bc_batch_size", "bc_lr"):
                del data[key]
        if not self.value_epochs:          # off: ids of runs as before the critic passes
            for key in ("value_epochs", "value_lr", "critic_warmup"):
                del data[key]
        if self.exploration == EXPLORATION_STEP:   # the default: ids as before the option
            del data["exploration"]
        return data

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """Fields settable with ``--rl-option`` (all but the run's identity)."""
        return tuple(f.name for f in dataclasses.fields(cls)
                     if f.name not in ("base_checkpoint", "steps", "seed", "task", "workers",
                                       "calibration"))


@dataclasses.dataclass
class FinetuneResult:
    checkpoint_id: str
    timesteps: int
    episodes: int
    train_success_rate: float
    steps_per_s: float
    work_dir: Path
    log_dir: Path | None
    #: CPU seconds of this process during ``learn`` (with 1 worker: the env's too; with
    #: more, the env workers' CPU is not in it)
    learn_cpu_s: float = 0.0


# --------------------------------------------------------------------------- the envs
class _FinetuneEnv(gym.Env):
    """What both learners' envs share: the task env (calibrated, perturbed), the BC
    checkpoint checked against its layout, and the stage-wise reward."""

    metadata = {"render_modes": []}

    def _open(self, run_dir: str | Path, cfg: FinetuneConfig,
              perturb: Callable[[gym.Env], gym.Env] | None) -> Any:
        """Set up the task env; returns the loaded BC checkpoint."""
        import torch

        from clawgym_ros.artifacts import ArtifactStore
        from clawgym_ros.tasks.registry import get_task
        from clawgym_ros.training.checkpoint import load_checkpoint

        torch.set_num_threads(1)
        from clawgym_ros.sim.active_calibration import activate

        activate(cfg.calibration or None)      # this env's process simulates at it
        self.cfg = cfg
        store = ArtifactStore(run_dir)
        env_id = get_task(cfg.task).env_id
        inner = gym.make(env_id, control_mode=C.CONTROL_DICT,
                         max_episode_steps=cfg.max_episode_steps)
        self.env = perturb(inner) if perturb is not None else inner
        self.task_env = inner.unwrapped
        obs_spec = {k: int(np.prod(s.shape)) for k, s in inner.observation_space.spaces.items()
                    if s.dtype != np.uint8}
        act_spec = {k: int(np.prod(s.shape)) for k, s in inner.action_space.spaces.items()}
        ckpt = load_checkpoint(store, cfg.base_checkpoint)
        for what, needed, offered in (("observation", ckpt.obs_spec, obs_spec),
                                      ("action", ckpt.action_spec, act_spec)):
            if any(offered.get(k) != w for k, w in needed.items()):
                raise CheckpointError(
                    f"checkpoint {ckpt.artifact.id[:12]} does not fit task {cfg.task}: its "
                    f"{what} layout is {_describe(needed)}; the task's env has "
                    f"{_describe(offered)}")
        self.obs_spec, self.action_spec = ckpt.obs_spec, ckpt.action_spec
        self.base_id = ckpt.artifact.id
        self.reward = StageReward(self.task_env, cfg.reward_weights)
        return ckpt

    def _check(self, action: np.ndarray, what: str) -> np.ndarray:
        a = np.asarray(action, dtype=np.float32).reshape(-1)
        if a.shape != self.action_space.shape or not np.all(np.isfinite(a)):
            raise ActionError(f"{what} must be {self.action_space.shape[0]} finite values, got "
                              f"{a.tolist()}")
        return a

    def _info(self, task_info: Mapping[str, Any], terminated: bool) -> dict[str, Any]:
        """What the learner reads of a step's info: the reward terms' episode sums and
        whether the episode succeeded (SB3's success buffer). Not the task env's whole info:
        SB3 deep-copies every step's info (and pickles it between processes), which cost
        more than the residual's own arithmetic."""
        return {C.INFO_REWARD_TERMS: dict(self.reward.totals),
                "is_success": bool(task_info.get("success", terminated))}

    def close(self) -> None:
        self.env.close()


class ResidualEnv(_FinetuneEnv):
    """A task env as the residual learner sees it (see the module docstring).

    Args:
        run_dir: run directory holding the BC checkpoint.
        cfg: the fine-tuning config (base checkpoint, task, reward weights, scales).
        perturb: optional callable wrapping the task env (domain randomization).
    """

    def __init__(self, run_dir: str | Path, cfg: FinetuneConfig,
                 perturb: Callable[[gym.Env], gym.Env] | None = None) -> None:
        ckpt = self._open(run_dir, cfg, perturb)
        self.policy = residual_from_checkpoint(ckpt, cfg)
        width = self.policy.encoder[0].in_features
        self.observation_space = spaces.Box(-np.inf, np.inf, (width,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (ckpt.spec.act_dim,), np.float32)
        self._base: Any = None

    def _advance(self, obs: Mapping[str, Any]) -> np.ndarray:
        from clawgym_ros.training.policies import flatten_obs

        x, self._base = self.policy.residual_input_numpy(flatten_obs(obs, self.obs_spec))
        return x

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options=options)
        self.policy.reset_state()
        self.reward.reset()
        return self._advance(obs), info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        from clawgym_ros.training.policies import unflatten_action

        a = self._check(action, "residual action (values in [-1, 1])")
        command = self.policy.combine_numpy(self._base, a)
        obs, _, terminated, truncated, info = self.env.step(
            unflatten_action(command.astype(np.float64), self.action_spec))
        reward, _ = self.reward.step(info)
        return (self._advance(obs), float(reward), bool(terminated), bool(truncated),
                self._info(info, terminated))


class DirectEnv(_FinetuneEnv):
    """A task env as PPO sees it when its actor is the BC network (mode ``direct``).

    Observation: the BC policy's normalized network input. Action: its normalized action
    chunk, flat (``chunk * act_dim``); a step executes the chunk's control steps (fewer when
    the episode ends inside it) and returns their summed reward; ``info["control_steps"]``
    says how many ran. The BC network's own prediction as the action reproduces the BC
    policy step for step. A policy whose joint targets are relative to its previous command
    (``relative_base: command``) is rebased on the last control step's action the env sent
    (the observation for an episode's first chunk), as :class:`TorchPolicy` does.

    Args: as :class:`ResidualEnv`.
    """

    def __init__(self, run_dir: str | Path, cfg: FinetuneConfig,
                 perturb: Callable[[gym.Env], gym.Env] | None = None) -> None:
        ckpt = self._open(run_dir, cfg, perturb)
        self.policy = direct_from_checkpoint(ckpt)
        spec = self.policy.spec
        self.chunk, self.act_dim = spec.chunk, spec.act_dim
        self.observation_space = spaces.Box(-np.inf, np.inf, (spec.input_dim,), np.float32)
        # SB3 wants finite bounds (it clips to them); a normalized action is a few units.
        self.action_space = spaces.Box(-DIRECT_ACTION_BOUND, DIRECT_ACTION_BOUND,
                                       (spec.chunk * spec.act_dim,), np.float32)
        self._raw: Any = None
        self._last: np.ndarray | None = None    # the last action sent (command base)
        self._obs_mean, self._obs_std = (self.policy.obs_mean.numpy().copy(),
                                         self.policy.obs_std.numpy().copy())

    def _observe(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The BC policy's normalize_obs, in numpy (bit for bit: Featurizer.numpy, the same
        arithmetic; cheaper than torch on one row)."""
        import torch

        from clawgym_ros.training.policies import flatten_obs

        state = flatten_obs(obs, self.obs_spec).reshape(1, -1)
        self._raw = torch.from_numpy(state)
        return (self.policy.featurizer.numpy(state)[0] - self._obs_mean) / self._obs_std

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options=options)
        self.reward.reset()
        self._last = None
        return self._observe(obs), info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        import torch

        from clawgym_ros.training.policies import command_tensor, unflatten_action

        a = self._check(action, "normalized action chunk")
        with torch.inference_mode():    # what PolicyModel.act does after the network
            chunk = self.policy.from_relative(self.policy.unnormalize_action(
                torch.from_numpy(a).view(1, self.chunk, self.act_dim)),
                self.policy.relative_base(self._raw, command_tensor(self._last)))[0]
        total, ran = 0.0, 0
        terminated = truncated = False
        info: dict[str, Any] = {}
        for row in chunk.numpy().astype(np.float64):
            self._last = row
            obs, _, terminated, truncated, info = self.env.step(
                unflatten_action(row, self.action_spec))
            reward, _ = self.reward.step(info)
            total += float(reward)
            ran += 1
            if terminated or truncated:
                break
        info = self._info(info, terminated)
        info["control_steps"] = ran
        return self._observe(obs), total, bool(terminated), bool(truncated), info


def _describe(spec: Mapping[str, int]) -> str:
    return ", ".join(f"{k}:{w}" for k, w in spec.items())


def _refuse_residual(ckpt: Any) -> None:
    from clawgym_ros.training.residual import POLICY_RESIDUAL

    if ckpt.spec.type == POLICY_RESIDUAL:
        raise ConfigError("from", ckpt.artifact.id[:12], "a behaviour-cloning checkpoint (this "
                          "one is already RL fine-tuned; fine-tune its BC parent "
                          f"{ckpt.meta.get('init_checkpoint', '?')[:12]})")


def direct_from_checkpoint(ckpt: Any) -> Any:
    """The BC network of ``ckpt`` (weights and normalization loaded, eval mode) for direct
    fine-tuning.

    Raises:
        ConfigError: a residual checkpoint, or a policy type whose network PPO's actor cannot
            take over (anything but ``mlp``: e.g. ``cnn`` reads images, ``task_mlp`` a task
            one-hot).
    """
    from clawgym_ros.training.policies import MLPPolicy

    _refuse_residual(ckpt)
    spec = ckpt.spec
    if spec.type != C.POLICY_MLP or spec.image_shape is not None:
        # residual mode takes other state policies (its env feeds no camera images)
        other = ("" if spec.image_shape is not None
                 else f": fine-tune it with --rl-option mode={MODE_RESIDUAL}")
        raise ConfigError("mode", MODE_DIRECT, f"a base checkpoint of policy type "
                          f"{C.POLICY_MLP} (state in, action chunk out: the network PPO's actor "
                          f"takes over); checkpoint {ckpt.artifact.id[:12]} is a {spec.type} "
                          f"policy{other}")
    model = ckpt.build_model()
    if type(model) is not MLPPolicy:
        raise ConfigError("mode", MODE_DIRECT, f"a base checkpoint of the built-in "
                          f"{C.POLICY_MLP} policy; checkpoint {ckpt.artifact.id[:12]}'s type "
                          f"{spec.type} is {type(model).__name__}")
    return model


def mlp_linears(model: Any) -> list[Any]:
    """The Linear layers of an ``mlp`` policy, input first: encoder, trunk, head (the layout
    of an SB3 actor's ``mlp_extractor.policy_net`` with ReLU plus its ``action_net``)."""
    from torch import nn

    return [m for m in (*model.encoder, *model.trunk, model.head) if isinstance(m, nn.Linear)]


def residual_from_checkpoint(ckpt: Any, cfg: FinetuneConfig) -> Any:
    """A residual policy over the BC checkpoint ``ckpt`` (zero-initialized output layer)."""
    import torch

    from clawgym_ros.training.policies import build_policy
    from clawgym_ros.training.residual import residual_spec

    _refuse_residual(ckpt)
    base_spec = ckpt.spec
    per_key = {C.ACT_JOINT_TARGET: cfg.residual_scale_joint,
               C.ACT_GRIPPER: cfg.residual_scale_gripper,
               C.ACT_JOINT_VEL: cfg.residual_scale_velocity,
               C.ACT_BASE_TWIST: cfg.residual_scale_twist}
    unknown = [k for k in ckpt.action_spec if k not in per_key]
    if unknown:
        raise ConfigError("action_spec", unknown, "action keys with a residual scale: "
                          + ", ".join(per_key))
    scale = [per_key[k] for k, w in ckpt.action_spec.items() for _ in range(w)]
    spec = residual_spec(base_spec, scale, cfg.hidden)
    policy = build_policy(spec, seed=cfg.seed)
    policy.base.load_state_dict(ckpt.weights, strict=True)
    with torch.no_grad():
        policy.head.weight.zero_()
        policy.head.bias.zero_()
    return policy.eval()


class DemoRegularizer:
    """Behaviour-cloning steps of direct mode's PPO actor on the BC parent's demonstrations
    (:attr:`FinetuneConfig.bc_steps` after every PPO update): PPO may move the actor where
    the rewards lead, these steps pull it back toward what the demonstrations do (the idea of
    DAPG-style augmented policy gradients, as an alternating phase, since SB3's PPO has no
    hook for an extra loss term).

    The minibatches are the BC trainer's (:class:`~clawgym_ros.training.data.TableSampler`
    over the parent's datasets, with its observation columns, chunk, action shift and
    relative base); the loss is its mean squared error in normalized action units, on the
    actor's mean action; rows are drawn with a generator seeded from the run's seed.

    Args:
        store: the run's artifact store.
        base: the loaded BC parent (``mlp``).
        cfg: the run (``bc_steps``, ``bc_batch_size``, ``bc_lr``, ``seed``).

    Raises:
        ConfigError: the parent names no datasets (e.g. trained from a table built in memory).
    """

    def __init__(self, store: Any, base: Any, cfg: FinetuneConfig) -> None:
        import torch

        from clawgym_ros.training.bc import policy_sampler, select_obs
        from clawgym_ros.training.config import TrainConfig
        from clawgym_ros.training.data import open_training_table

        dataset_ids = list(base.meta.get("dataset_ids") or [])
        if not dataset_ids:
            raise ConfigError("bc_steps", cfg.bc_steps, "0 for a checkpoint that names no "
                              f"datasets (checkpoint {base.artifact.id[:12]})")
        train = TrainConfig(**{k: v for k, v in base.meta.get("train_config", {}).items()
                               if k in ("exclude_obs_keys", "action_shift",
                                        "resident_budget_mb")})
        table = open_training_table(store, dataset_ids)
        _, cols = select_obs(table.obs_spec, train.exclude_obs_keys)
        self.policy = direct_from_checkpoint(base)
        self.sampler = policy_sampler(table, self.policy.spec, cols, train, val_fraction=0.0,
                                      seed=cfg.seed, batch_size=cfg.bc_batch_size)
        self.generator = torch.Generator().manual_seed(cfg.seed + 7919)
        self.cfg = cfg
        self.optim: Any = None
        self.actor: Any = None

    def attach(self, sb3_policy: Any) -> None:
        """Train the actor of ``sb3_policy`` (its policy net and action net)."""
        import torch

        self.actor = sb3_policy
        params = [*sb3_policy.mlp_extractor.policy_net.parameters(),
                  *sb3_policy.action_net.parameters()]
        self.optim = torch.optim.Adam(params, lr=self.cfg.bc_lr)

    def step(self) -> float:
        """``bc_steps`` minibatch steps; the mean loss."""
        from clawgym_ros.training.bc import _to_tensors

        total = 0.0
        actor = self.actor
        for _ in range(self.cfg.bc_steps):
            batch = self.sampler.sample(self.cfg.bc_batch_size, self.generator)
            obs, target, _, _ = _to_tensors(batch, self.policy)
            mean = actor.action_net(actor.mlp_extractor.forward_actor(obs))
            loss = (mean - target.reshape(len(target), -1)).pow(2).mean()
            self.optim.zero_grad(set_to_none=True)
            loss.backward()
            self.optim.step()
            total += float(loss.detach())
        return total / max(1, self.cfg.bc_steps)


class CriticFit:
    """Critic-only passes over a PPO rollout before the PPO update
    (:attr:`FinetuneConfig.value_epochs`).

    SB3's PPO trains actor and critic with one loss and stops both at the first minibatch
    whose KL exceeds ``1.5 * target_kl``; with the small exploration noise of fine-tuning
    (direct mode) that is after the first minibatch, so the critic gets one Adam step per
    rollout and never predicts the returns (explained variance ~0), and the advantages PPO
    follows are returns minus a constant. Here, per epoch: the rollout's TD(lambda) returns
    and advantages are recomputed with the current critic (SB3's own
    ``compute_returns_and_advantage``), then one pass of shuffled minibatches (PPO's
    ``batch_size``) regresses the critic on them with its own Adam optimizer at ``value_lr``;
    after the last pass the advantages are recomputed once more, so PPO's update follows the
    fitted critic. Rows are shuffled by a generator seeded from the run's seed. (The first
    recomputation repeats the rollout-end one with the same critic but a batched forward;
    its values may differ from the rollout's in the last bit, and the committed ids of runs
    with these passes depend on it.)

    Truncated episodes keep SB3's bootstrap of the time-out (added to the last reward at
    rollout time with the critic of that moment).

    Args:
        cfg: the run (``value_epochs``, ``value_lr``, ``seed``).
    """

    def __init__(self, cfg: FinetuneConfig) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng([cfg.seed, 0xC217])
        self.optim: Any = None

    def attach(self, sb3_policy: Any) -> None:
        """Train the critic of ``sb3_policy`` (its value net and value head)."""
        import torch

        self.policy = sb3_policy
        params = [*sb3_policy.mlp_extractor.value_net.parameters(),
                  *sb3_policy.value_net.parameters()]
        self.params = params
        self.optim = torch.optim.Adam(params, lr=self.cfg.value_lr)

    def _values(self, obs: np.ndarray) -> Any:
        import torch

        with torch.no_grad():
            return self.policy.predict_values(torch.from_numpy(obs)).flatten()

    def _advantages(self, model: Any) -> None:
        buf = model.rollout_buffer
        shape = buf.values.shape
        buf.values = self._values(buf.observations.reshape(-1, buf.observations.shape[-1])
                                  ).numpy().reshape(shape)
        last = self._values(np.asarray(model._last_obs, dtype=np.float32))
        buf.compute_returns_and_advantage(last_values=last, dones=model._last_episode_starts)

    def fit(self, model: Any) -> dict[str, float]:
        """Fit the critic on ``model``'s filled rollout buffer and recompute its advantages;
        the critic's explained variance of the rollout's returns before and after."""
        import torch
        from stable_baselines3.common.utils import explained_variance

        buf = model.rollout_buffer
        before = float(explained_variance(buf.values.flatten(), buf.returns.flatten()))
        obs = buf.observations.reshape(-1, buf.observations.shape[-1])
        batch = max(2, model.batch_size)
        loss = torch.zeros(())
        for _ in range(self.cfg.value_epochs):
            self._advantages(model)
            returns = torch.from_numpy(buf.returns.reshape(-1).astype(np.float32))
            order = self.rng.permutation(len(obs))
            for start in range(0, len(order), batch):
                rows = order[start:start + batch]
                pred = self.policy.predict_values(torch.from_numpy(obs[rows])).flatten()
                loss = (pred - returns[rows]).pow(2).mean()
                self.optim.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, model.max_grad_norm)
                self.optim.step()
        self._advantages(model)
        after = float(explained_variance(buf.values.flatten(), buf.returns.flatten()))
        return {"explained_variance_before": before, "explained_variance_after": after,
                "value_loss": float(loss.detach())}


def chunk_shared_policy(chunk: int) -> Any:
    """SB3's ``MlpPolicy`` (:class:`ActorCriticPolicy`) whose exploration noise is one draw per
    action element held over the chunk's ``chunk`` steps (:attr:`FinetuneConfig.exploration`
    ``chunk``).

    Its distribution over a flat, step-major action chunk (``chunk x act_dim``): a sample is
    ``mean + repeat(std * eps)`` with ``eps ~ N(0, I)`` of ``act_dim`` elements and a log-std of
    ``act_dim`` elements; the log-probability of an action chunk ``a`` is the density of its
    deviation from the mean averaged over the chunk's steps, ``mean_steps(a - mean)`` (for a
    chunk this distribution drew, exactly its noise). PPO's ratio and gradient thus see
    ``act_dim`` noise dimensions instead of ``chunk x act_dim``; the mean, the network's whole
    chunk, is what is trained (through its average over the steps).
    """
    import torch
    from stable_baselines3.common.distributions import DiagGaussianDistribution
    from stable_baselines3.common.policies import ActorCriticPolicy
    from torch import nn

    class ChunkSharedGaussian(DiagGaussianDistribution):
        def __init__(self, action_dim: int) -> None:
            super().__init__(action_dim)
            self.act_dim = action_dim // chunk   # DirectEnv's actions: chunk x act_dim

        def proba_distribution_net(self, latent_dim: int, log_std_init: float = 0.0
                                   ) -> tuple[nn.Module, nn.Parameter]:
            log_std = nn.Parameter(torch.ones(self.act_dim) * log_std_init, requires_grad=True)
            return nn.Linear(latent_dim, self.action_dim), log_std

        def proba_distribution(self, mean_actions: Any, log_std: Any) -> ChunkSharedGaussian:
            self.mean = mean_actions
            self.distribution = torch.distributions.Normal(torch.zeros_like(log_std),
                                                           log_std.exp())
            return self

        def log_prob(self, actions: Any) -> Any:
            noise = (actions - self.mean).view(-1, chunk, self.act_dim).mean(dim=1)
            return self.distribution.log_prob(noise).sum(dim=-1)

        def entropy(self) -> Any:
            return self.distribution.entropy().sum().expand(self.mean.shape[0])

        def sample(self) -> Any:
            noise = self.distribution.rsample((self.mean.shape[0],))
            return self.mean + noise.repeat(1, chunk)

        def mode(self) -> Any:
            return self.mean

    class ChunkSharedPolicy(ActorCriticPolicy):
        def _build(self, lr_schedule: Any) -> None:
            self.action_dist = ChunkSharedGaussian(int(np.prod(self.action_space.shape)))
            super()._build(lr_schedule)

    return ChunkSharedPolicy


def _ppo_class(sb3: Any, critic: CriticFit | None, warmup: int) -> Any:
    """SB3's PPO, or PPO whose every update starts with :class:`CriticFit` and whose first
    ``warmup`` updates train the critic only."""
    if critic is None:
        return sb3.PPO

    class CriticFirstPPO(sb3.PPO):
        updates = 0

        def train(self) -> None:
            for name, value in critic.fit(self).items():
                self.logger.record(f"critic/{name}", value)
            self.updates += 1
            if self.updates > warmup:
                super().train()

    return CriticFirstPPO


# --------------------------------------------------------------------------- the run
def work_key(cfg: FinetuneConfig, base_id: str) -> str:
    """Name of the run's work folder: a hash of everything that determines its weights."""
    data = {"config": {**cfg.to_json(), "base_checkpoint": base_id}, "kind": f"rl-{cfg.mode}"}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class FinetuneCancelledError(ClawgymError):
    """RL fine-tuning stopped on request before its last step; nothing was committed."""


def finetune(run_dir: str | Path, cfg: FinetuneConfig, *, progress_bar: bool = False,
             tensorboard: bool = True,
             on_progress: Callable[[int, int, float], None] | None = None,
             should_stop: Callable[[], bool] | None = None) -> FinetuneResult:
    """Fine-tune ``cfg.base_checkpoint`` with PPO (``cfg.mode``: residual or direct) and
    commit the checkpoint.

    Args:
        on_progress: called after every rollout with (simulated control steps so far, total,
            success rate of the episodes finished so far).
        should_stop: polled at every environment step; True stops the run without
            committing anything (:class:`FinetuneCancelledError`).

    Raises:
        FinetuneCancelledError: ``should_stop`` said so.
        ArtifactError, CheckpointError: unknown base, or one whose layout does not fit the task.
        ConfigError: a bad setting (named), or direct mode on a policy type whose network
            cannot be taken over.
    """
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
    from torch import nn

    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.sim.active_calibration import active
    from clawgym_ros.training import checkpoint as ckpt
    from clawgym_ros.training.bc import set_deterministic_algorithms
    from clawgym_ros.training.policies import relative_to_command

    calibration = active()
    if calibration is not None and not cfg.calibration:   # e.g. a loop's calibration key
        cfg = dataclasses.replace(cfg, calibration=calibration.to_dict())

    store = ArtifactStore(run_dir)
    base = ckpt.load_checkpoint(store, cfg.base_checkpoint)
    direct = cfg.mode == MODE_DIRECT
    if relative_to_command(base.spec) and not direct:
        raise CheckpointError(
            f"checkpoint {base.artifact.id[:12]} predicts joint targets relative to its previous "
            "command (policy option relative_base: command); residual RL supports policies "
            "relative to the observation only: fine-tune it with --rl-option mode=direct")
    cfg = dataclasses.replace(cfg, base_checkpoint=base.artifact.id)
    env_cls = DirectEnv if direct else ResidualEnv
    if direct:
        direct_from_checkpoint(base)           # the policy type, before any env is built
    probe = env_cls(run_dir, cfg)              # checks the layout here, not in a worker
    # PPO counts its own steps: one per control step (residual), one per chunk (direct).
    chunk = probe.chunk if direct else 1
    probe.close()
    # the demonstrations, before any worker starts (a parent without datasets fails here)
    regularizer = DemoRegularizer(store, base, cfg) if cfg.bc_steps else None
    key = work_key(cfg, base.artifact.id)
    work_dir = store.run_dir / C.DIR_TRAIN_WORK / key
    log_dir = store.run_dir / C.DIR_LOGS / C.DIR_TENSORBOARD / key if tensorboard else None

    def make() -> gym.Env:
        return env_cls(run_dir, cfg)

    vec_cls = DummyVecEnv if cfg.workers == 1 else SubprocVecEnv
    kwargs = {} if cfg.workers == 1 else {"start_method": "forkserver"}
    os.environ.setdefault("MUJOCO_GL", "egl")
    venv = vec_cls([make] * cfg.workers, **kwargs)
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    # torch has no public getter of the distributions' default argument checks
    validate = torch.distributions.Distribution._validate_args
    episodes: list[bool] = []
    simulated = [0]                             # control steps run (direct: chunks x steps)

    def actor_trained(model: Any) -> bool:
        """Has PPO updated the actor yet (not only the critic, while it warms up)?"""
        return model.num_timesteps > 0 and getattr(model, "updates", 1) > cfg.critic_warmup

    class _Episodes(BaseCallback):
        def _on_rollout_start(self) -> None:
            # after each PPO update (SB3 trains between two rollouts)
            if regularizer is not None and actor_trained(self.model):
                self.logger.record("bc/loss", regularizer.step())

        def _on_rollout_end(self) -> None:
            if on_progress is not None:
                on_progress(simulated[0], cfg.steps,
                            float(np.mean(episodes)) if episodes else 0.0)

        def _on_step(self) -> bool:
            if should_stop is not None and should_stop():
                raise FinetuneCancelledError(
                    f"RL fine-tuning stopped at step {simulated[0]} of {cfg.steps}; "
                    "nothing committed")
            for done, info in zip(self.locals["dones"], self.locals["infos"]):
                simulated[0] += int(info.get("control_steps", 1))
                if done:
                    episodes.append(bool(info.get("is_success")))
                    for term, value in info.get(C.INFO_REWARD_TERMS, {}).items():
                        self.logger.record_mean(f"reward_terms/{term}", value)
            return True

    try:
        torch.set_num_threads(1)
        set_deterministic_algorithms(True)
        # SB3 builds a Normal per rollout step and minibatch; checking its arguments (finite
        # mean, positive std, samples in support) cost ~10% of a residual step and changes
        # no value: the actions and log-probabilities are the same with it off.
        torch.distributions.Distribution.set_default_validate_args(False)
        if direct:   # the BC network's widths and activation; its weights copied below
            arch = {"net_arch": {"pi": list(base.spec.hidden), "vf": [64, 64]},
                    "activation_fn": nn.ReLU}
        else:
            arch = {"net_arch": {"pi": list(cfg.hidden), "vf": [64, 64]},
                    "activation_fn": nn.Tanh}
        critic = CriticFit(cfg) if cfg.value_epochs else None
        policy_cls = (chunk_shared_policy(chunk) if cfg.exploration == EXPLORATION_CHUNK
                      else "MlpPolicy")
        # A run shorter than its critic warm-up plus one rollout gets shorter rollouts, so
        # that it updates the actor once (and SB3, which collects whole rollouts, does not run
        # W x n_steps steps for a smaller budget).
        rollout = min(cfg.n_steps, -(-cfg.steps // (cfg.workers * (cfg.critic_warmup + 1))))
        with warnings.catch_warnings():
            # Minibatches are control steps converted to decisions (ceil), so a rollout is
            # rarely a whole number of them and each epoch ends with a shorter one (e.g. the
            # default direct run: 19 of 103 decisions and one of 91). Intended, and part of
            # the measured recipe: SB3's advice to change the size is not taken.
            warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
            model = _ppo_class(sb3, critic, cfg.critic_warmup)(
                policy_cls, venv, n_steps=max(2, -(-rollout // chunk)),
                batch_size=max(2, -(-cfg.batch_size // chunk)),
                n_epochs=cfg.n_epochs, learning_rate=cfg.lr, gamma=cfg.gamma ** chunk,
                gae_lambda=cfg.gae_lambda ** chunk, clip_range=cfg.clip_range,
                target_kl=cfg.target_kl or None, seed=cfg.seed, device="cpu",
                policy_kwargs={**arch, "log_std_init": cfg.log_std_init})
        actor = [m for m in model.policy.mlp_extractor.policy_net if isinstance(m, nn.Linear)]
        actor.append(model.policy.action_net)
        with torch.no_grad():
            if direct:     # start exactly at the BC policy (mean action = its prediction)
                for mine, theirs in zip(actor, mlp_linears(direct_from_checkpoint(base)),
                                        strict=True):
                    mine.weight.copy_(theirs.weight)
                    mine.bias.copy_(theirs.bias)
            else:          # start exactly at the BC policy (mean correction 0)
                model.policy.action_net.weight.zero_()
                model.policy.action_net.bias.zero_()
        if regularizer is not None:
            regularizer.attach(model.policy)
        if critic is not None:
            critic.attach(model.policy)
        # SB3 otherwise makes an empty SB3-<date> folder in /tmp for every run.
        model.set_logger(configure(str(log_dir), ["tensorboard"]) if log_dir
                         else silent_logger())
        start, cpu = time.perf_counter(), time.process_time()
        model.learn(total_timesteps=-(-cfg.steps // chunk), callback=_Episodes(),
                    progress_bar=progress_bar)
        if regularizer is not None and actor_trained(model):   # after the last update too
            regularizer.step()
        elapsed, learn_cpu = time.perf_counter() - start, time.process_time() - cpu
        if direct:
            policy = direct_from_checkpoint(base)
            with torch.no_grad():
                for mine, trained in zip(mlp_linears(policy), actor, strict=True):
                    mine.weight.copy_(trained.weight)
                    mine.bias.copy_(trained.bias)
        else:
            policy = residual_from_checkpoint(base, cfg)
            policy.load_residual([(m.weight.detach(), m.bias.detach()) for m in actor])
        timesteps = simulated[0] if direct else int(model.num_timesteps)
    finally:
        venv.close()
        torch.set_num_threads(threads)
        set_deterministic_algorithms(deterministic)
        torch.distributions.Distribution.set_default_validate_args(validate)

    meta = {
        "format": ckpt.CHECKPOINT_FORMAT, "train_config": cfg.to_json(),
        "policy_spec": policy.spec.to_json(), "obs_spec": ckpt.spec_pairs(base.obs_spec),
        "action_spec": ckpt.spec_pairs(base.action_spec), "group_names": [],
        "group_weights": {}, "frozen_groups": [], "dataset_ids": [],
        "stats": base.meta.get("stats", {}) if direct else {},
        "init_checkpoint": base.artifact.id, "finetune": "rl",
    }
    ckpt.write_step(work_dir, timesteps, policy=policy, meta=meta, state_tensors={},
                    state_json={})
    success = float(np.mean(episodes)) if episodes else 0.0
    content = {"step": timesteps, "steps": cfg.steps, "episodes": len(episodes),
               "train_success_rate": success, "base_checkpoint": base.artifact.id,
               "work_key": key, "finetune": "rl", "algorithm": cfg.algorithm}
    if direct:
        content["mode"] = cfg.mode
        content["ppo_steps"] = int(model.num_timesteps)
    steps_per_s = timesteps / max(elapsed, 1e-9)
    artifact = ckpt.commit_checkpoint(
        store, work_dir, timesteps, summary_content=content,
        config={**cfg.to_json(), "finetune": "rl"}, seed=cfg.seed, parents=[base.artifact.id],
        summary={"step": timesteps, "episodes": len(episodes), "train_success_rate": success,
                 "steps_per_s": round(steps_per_s, 1), "policy": policy.spec.type,
                 "finetune": "rl"})
    return FinetuneResult(checkpoint_id=artifact.id, timesteps=timesteps,
                          episodes=len(episodes), train_success_rate=success,
                          steps_per_s=steps_per_s, work_dir=work_dir, log_dir=log_dir,
                          learn_cpu_s=learn_cpu)


def silent_logger() -> Any:
    """An SB3 logger that writes nothing (SB3's default makes an SB3-<date> folder in /tmp
    for every ``learn``)."""
    from stable_baselines3.common.logger import Logger

    return Logger(folder=None, output_formats=[])
