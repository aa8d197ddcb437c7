"""Training configuration (no torch import, so the CLI and nodes can validate cheaply).

:class:`TrainConfig` is the one config of a behaviour-cloning run, LeRobot style: a flat
dataclass validated in ``__post_init__``; every bad value raises a ConfigError naming the field,
the value and what is allowed. :func:`load_group_weights` reads a ``--weights`` file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range, load_yaml
from clawgym_ros.errors import ConfigError
from clawgym_ros.training.registry import check_policy_name

#: Named parameter groups of every policy; any of them can be frozen.
PARAM_GROUPS: tuple[str, ...] = (C.PARAM_GROUP_ENCODER, C.PARAM_GROUP_TRUNK,
                                 C.PARAM_GROUP_HEAD)
#: Hardening noise models (see :mod:`clawgym_ros.training.hardening`).
HARDENING_SENSOR_NOISE = "sensor_noise"
HARDENING_FEATURE_STD = "feature_std"
HARDENING_NOISES: tuple[str, ...] = (HARDENING_SENSOR_NOISE, HARDENING_FEATURE_STD)
DEFAULT_HARDENING_INTENSITY = C.DEFAULT_HARDENING_INTENSITY
#: Observation keys perturbed by robustness hardening unless configured otherwise.
DEFAULT_HARDENING_KEYS: tuple[str, ...] = (C.OBS_JOINT_POS, C.OBS_JOINT_VEL, C.OBS_GRIPPER,
                                           C.OBS_OBJECT_POSES)

#: Observation keys left out of the policy's input unless configured otherwise: none. Joint
#: velocities once made the arm run away (a policy with absolute targets and single-step
#: actions amplified its own motion); with relative targets and action chunks they are what
#: tells a state in motion from the same state at rest (pick_place, 30 held-out episodes:
#: 0.43 without, 0.60 with; docs/results/2026-12-02-training-recipe-history.md).
DEFAULT_EXCLUDED_OBS_KEYS: tuple[str, ...] = ()

#: Derived features (see :data:`clawgym_ros.training.policies.FEATURES`; names repeated here
#: so that this module does not import torch).
FEATURE_NAMES: tuple[str, ...] = ("object_rel_tool", "goal_rel_tool", "goal_rel_object",
                                  "object_yaw", "object_rel_first")
#: The default set (checkpoint ids of runs that name no features depend on it): every
#: feature but ``object_rel_first``, which peg_insert's recipe adds (docs/results/
#: 2026-12-05-peg-insert-bc.md).
DEFAULT_FEATURES: tuple[str, ...] = ("object_rel_tool", "goal_rel_tool", "goal_rel_object",
                                     "object_yaw")

#: AdamW learning rate of the default recipe. pick_place, 295 cube/cylinder demonstrations,
#: 12,000 cosine steps, 60 held-out nominal episodes: 1e-3 15/60, 3e-3 48/60 (seed 1: 51/60),
#: 1e-2 51/60, 3e-2 0/60 (diverges); at 4,000 steps 3e-3 42/60, 1e-2 32/60
#: (docs/results/2026-12-02-training-recipe-history.md).
DEFAULT_LR = 3e-3
#: Samples per optimizer step of the default recipe.
DEFAULT_BATCH_SIZE = 256

#: Learning-rate schedules.
LR_CONSTANT = "constant"
LR_COSINE = "cosine"
LR_SCHEDULES: tuple[str, ...] = (LR_COSINE, LR_CONSTANT)


def _help(text: str) -> dict[str, str]:
    return {"help": text}


#: Most optimizer steps of one run (10^7 is days of training here; 10^30 was accepted).
MAX_STEPS = 10_000_000

@dataclasses.dataclass
class TrainConfig:
    """Behaviour-cloning run settings (validated on construction)."""

    steps: int = dataclasses.field(default=2000, metadata=_help("optimizer steps"))
    batch_size: int = dataclasses.field(default=DEFAULT_BATCH_SIZE,
                                        metadata=_help("samples per step"))
    lr: float = dataclasses.field(default=DEFAULT_LR, metadata=_help("AdamW learning rate"))
    lr_schedule: str = dataclasses.field(
        default=LR_COSINE, metadata=_help("cosine: lr decays to 0 over the run's steps; "
                                          "constant"))
    weight_decay: float = dataclasses.field(default=0.0, metadata=_help("AdamW weight decay"))
    seed: int = dataclasses.field(default=0, metadata=_help("seed of init, sampling, noise"))
    policy: str = dataclasses.field(
        default=C.POLICY_MLP,
        metadata=_help("policy type: mlp, cnn or a registered one (training/registry.py)"))
    policy_options: dict[str, Any] = dataclasses.field(
        default_factory=dict,
        metadata=_help("options of the policy type (its Options dataclass; mlp and cnn have "
                       "none)"))
    hidden: tuple[int, ...] = dataclasses.field(
        default=(256, 256, 256),
        metadata=_help("hidden widths: first = encoder (mlp), rest = trunk"))
    chunk: int = dataclasses.field(default=20, metadata=_help("actions predicted per step"))
    features: tuple[str, ...] = dataclasses.field(
        default=DEFAULT_FEATURES,
        metadata=_help("derived observation features (object/goal relative to the tool, "
                       "object yaw); those whose keys the data lacks are skipped"))
    action_mode: str = dataclasses.field(
        default=C.ACTION_MODE_DELTA,
        metadata=_help("delta: joint targets predicted relative to the joint positions; "
                       "absolute: as recorded"))
    exclude_obs_keys: tuple[str, ...] = dataclasses.field(
        default=DEFAULT_EXCLUDED_OBS_KEYS,
        metadata=_help("observation keys of the table the policy does not see"))
    action_shift: int = dataclasses.field(
        default=1, metadata=_help("target of table row t = action of row t + shift (datasets "
                                  "record the observation after each action: shift 1)"))
    std_floor: float = dataclasses.field(
        default=0.01, metadata=_help("lower bound of the normalization std of every feature"))
    group_weights: dict[str, float] = dataclasses.field(
        default_factory=dict, metadata=_help("loss weight per group (others: 1.0)"))
    frozen_groups: tuple[str, ...] = dataclasses.field(
        default=(), metadata=_help("parameter groups not trained: encoder, trunk, head"))
    hardening_share: float = dataclasses.field(
        default=0.0, metadata=_help("share of each batch with perturbed observations"))
    hardening_keys: tuple[str, ...] = dataclasses.field(
        default=DEFAULT_HARDENING_KEYS, metadata=_help("observation keys that get perturbed"))
    hardening_noise: str = dataclasses.field(
        default=HARDENING_SENSOR_NOISE,
        metadata=_help("hardening noise model: sensor_noise (the evaluation's sensor-noise "
                       "family in physical units) or feature_std (noise_std/bias_std)"))
    hardening_intensity: float = dataclasses.field(
        default=DEFAULT_HARDENING_INTENSITY,
        metadata=_help("sensor_noise model: rows draw an intensity in [0, this]"))
    hardening_horizon_s: float = dataclasses.field(
        default=10.0, metadata=_help("sensor_noise model: seconds the bias walks accumulate "
                                     "over (about one demonstration)"))
    noise_std: float = dataclasses.field(
        default=0.1, metadata=_help("feature_std model: per-feature gaussian noise, in units "
                                    "of the obs std"))
    bias_std: float = dataclasses.field(
        default=0.1, metadata=_help("feature_std model: per-key constant offset, in units of "
                                    "the obs std"))
    val_fraction: float = dataclasses.field(
        default=0.1, metadata=_help("share of episodes held out for validation"))
    val_samples: int = dataclasses.field(
        default=4096, metadata=_help("max validation rows evaluated"))
    val_interval: int = dataclasses.field(default=200, metadata=_help("steps between val"))
    patience: int = dataclasses.field(
        default=0, metadata=_help("val checks without improvement before stopping; 0 = off"))
    min_delta: float = dataclasses.field(
        default=0.0, metadata=_help("val loss decrease that counts as improvement"))
    log_interval: int = dataclasses.field(default=50, metadata=_help("steps between logs"))
    checkpoint_interval: int = dataclasses.field(
        default=1000, metadata=_help("steps between checkpoints"))
    grad_clip: float = dataclasses.field(default=0.0, metadata=_help("max grad norm; 0 = off"))
    num_threads: int = dataclasses.field(default=1, metadata=_help("torch intra-op threads"))
    resident_budget_mb: float = dataclasses.field(
        default=64.0, metadata=_help("table pages kept mapped before release (RSS bound)"))

    def __post_init__(self) -> None:
        check_int("steps", self.steps, 1, MAX_STEPS)
        check_int("batch_size", self.batch_size, 1, 1 << 20)
        check_range("lr", self.lr, 0.0, 10.0, low_open=True)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        check_range("weight_decay", self.weight_decay, 0.0, 1.0)
        check_int("seed", self.seed, 0, (1 << 63) - 1)
        check_policy_name(self.policy)
        if not isinstance(self.policy_options, Mapping) \
                or not all(isinstance(k, str) for k in self.policy_options):
            raise ConfigError("policy_options", self.policy_options,
                              "a mapping of option name to value (the policy type's Options)")
        self.policy_options = dict(self.policy_options)
        self.hidden = tuple(self.hidden)
        if not self.hidden:
            raise ConfigError("hidden", self.hidden, "at least one width")
        for i, width in enumerate(self.hidden):
            check_int(f"hidden[{i}]", width, 1, 65536)
        check_int("chunk", self.chunk, 1, 256)
        check_choice("action_mode", self.action_mode, C.ACTION_MODES)
        self.features = tuple(self.features)
        for i, name in enumerate(self.features):
            check_choice(f"features[{i}]", name, FEATURE_NAMES)
        self.exclude_obs_keys = tuple(self.exclude_obs_keys)
        for i, key in enumerate(self.exclude_obs_keys):
            if not isinstance(key, str) or not key:
                raise ConfigError(f"exclude_obs_keys[{i}]", key, "an observation key")
        check_int("action_shift", self.action_shift, 0, 16)
        check_range("std_floor", self.std_floor, 0.0, 100.0)
        self.group_weights = validate_group_weights(self.group_weights)
        self.frozen_groups = validate_frozen_groups(self.frozen_groups)
        check_range("hardening_share", self.hardening_share, 0.0, 1.0)
        self.hardening_keys = tuple(self.hardening_keys)
        check_choice("hardening_noise", self.hardening_noise, HARDENING_NOISES)
        check_range("hardening_intensity", self.hardening_intensity, 0.0, 1.0)
        check_range("hardening_horizon_s", self.hardening_horizon_s, 0.0, 3600.0)
        check_range("noise_std", self.noise_std, 0.0, 100.0)
        check_range("bias_std", self.bias_std, 0.0, 100.0)
        check_range("val_fraction", self.val_fraction, 0.0, 0.9)
        check_int("val_samples", self.val_samples, 1)
        check_int("val_interval", self.val_interval, 1)
        check_int("patience", self.patience, 0)
        check_range("min_delta", self.min_delta, 0.0)
        check_int("log_interval", self.log_interval, 1)
        check_int("checkpoint_interval", self.checkpoint_interval, 1)
        check_range("grad_clip", self.grad_clip, 0.0)
        check_int("num_threads", self.num_threads, 1, 256)
        check_range("resident_budget_mb", self.resident_budget_mb, 1.0)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict (tuples as lists); ``policy_options`` only when set (the JSON
        of a run without them is what it was before they existed: it is part of checkpoint
        ids)."""
        data = json.loads(json.dumps(dataclasses.asdict(self)))
        if not data["policy_options"]:
            del data["policy_options"]
        return data


def validate_group_weights(
    weights: Mapping[str, Any], allowed: Iterable[str] | None = None, source: str | None = None,
) -> dict[str, float]:
    """Check a group -> loss weight mapping.

    Args:
        weights: group name -> weight (>= 0).
        allowed: the groups that exist (e.g. a table's group names); None = not checked.
        source: file the mapping came from, for messages.

    Returns:
        A new dict with float weights.

    Raises:
        ConfigError: naming the field ``group_weights.<group>``, the value and what is allowed.
    """
    if not isinstance(weights, Mapping):
        raise ConfigError("group_weights", weights, "a mapping of group name to weight", source)
    allowed = None if allowed is None else list(allowed)
    out = {}
    for group, weight in weights.items():
        field = f"group_weights.{group}"
        if not isinstance(group, str) or not group:
            raise ConfigError("group_weights", group, "non-empty group names", source)
        if allowed is not None and group not in allowed:
            raise ConfigError(field, weight, "a group of the dataset: " + ", ".join(allowed),
                              source)
        out[group] = float(check_range(field, weight, 0.0, 1e6, source=source))
    return out


def validate_frozen_groups(groups: Iterable[str], source: str | None = None) -> tuple[str, ...]:
    """Check parameter group names to freeze (unique, known).

    Raises:
        ConfigError: for an unknown group name.
    """
    if isinstance(groups, str):
        groups = [groups]
    out = []
    for i, group in enumerate(groups):
        check_choice(f"frozen_groups[{i}]", group, PARAM_GROUPS, source)
        if group not in out:
            out.append(group)
    return tuple(out)


def load_group_weights(path: str | Path) -> dict[str, float]:
    """Read a YAML/JSON file mapping group -> weight (the ``--weights`` file).

    Raises:
        ConfigError: unreadable file, not a mapping, a non-numeric or negative weight.
    """
    data = load_yaml(path)  # JSON is YAML
    if not isinstance(data, Mapping):
        raise ConfigError("group_weights", data, "a mapping of group name to weight", str(path))
    return validate_group_weights(data, source=str(path))
