"""Behaviour cloning: a step function (:func:`update_step`) and a loop (:func:`train`).

The loop knows no architecture: it builds the policy type named by ``TrainConfig.policy``
through the registry and calls the :class:`~clawgym_ros.training.policies.PolicyModel`
contract. The loss of a sample is the policy's (mean squared error of its normalized action
chunk for the built-in types); the batch loss is the weighted mean over samples, each weighted
by its group's weight (group = task x template x perturbation family; groups not listed weigh
1). Raising a group's weight therefore raises its share of every gradient without changing the
loss scale.

Determinism: given the seed and the table, the weights after training are bitwise identical on
CPU (seeded init, a private generator for sampling and one for hardening noise, deterministic
algorithms, a fixed thread count). An interrupted run resumes from its newest step folder with
optimizer, generator and loop state and reaches the same weights as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore
from clawgym_ros.dataset.table import TrainingTable
from clawgym_ros.errors import ConfigError
from clawgym_ros.training import checkpoint as ckpt
from clawgym_ros.training.config import (
    HARDENING_SENSOR_NOISE,
    LR_CONSTANT,
    TrainConfig,
    validate_group_weights,
)
from clawgym_ros.training.data import Batch, TableSampler
from clawgym_ros.training.hardening import (
    hardening_layout,
    perturb_observations,
    perturb_sensor_noise,
    sensor_noise_std,
)
from clawgym_ros.training.policies import (
    BATCH_DEPENDENT_FEATURES,
    FEATURES,
    Featurizer,
    PolicyModel,
    PolicySpec,
    TensorBatch,
    build_policy,
    command_base,
    floor_stats,
    freeze,
    relative_to_command,
    to_relative,
)

#: Train-config fields that do not change the trained weights (left out of the work key).
_KEY_EXCLUDED = ("steps", "log_interval", "checkpoint_interval")
_VAL_CHUNK = 4096
#: Most rows of the minibatches prepared at once (see :class:`_Window`).
_WINDOW_ROWS = 8192
#: A whole window is featurized at once only when a batch's values per transcendental op
#: (``atan2``/``sin``/``cos`` of the object yaw) are a multiple of this and a window's stay
#: below torch's parallel grain (32,768): then no value falls in a SIMD loop's scalar tail
#: (vector width x unroll <= 64 floats) or a thread's chunk edge, and each equals the value
#: of the per-batch op bit for bit. Otherwise each batch of the window is featurized alone.
_SIMD_BLOCK = 64
_GRAIN = 32768
_COUNT_ROWS = 1 << 20
_STATS_ROWS = 1 << 16


@dataclasses.dataclass
class Progress:
    """What the loop reports at log and validation steps (feeds Train action feedback)."""

    step: int
    total_steps: int
    loss: float
    val_loss: float
    group_losses: dict[str, float]


@dataclasses.dataclass
class TrainResult:
    """Outcome of :func:`train`."""

    checkpoint_id: str | None
    artifact: Artifact | None
    step: int
    train_loss: float
    val_loss: float
    group_losses: dict[str, float]
    stopped_early: bool
    cancelled: bool
    resumed_from: int
    samples_per_s: float
    work_dir: Path
    log_dir: Path | None
    #: process CPU seconds per sample over the span ``samples_per_s`` is timed on
    cpu_s_per_sample: float = math.nan


def update_step(
    policy: PolicyModel,
    batch: TensorBatch,
    optim: torch.optim.Optimizer,
    *,
    group_weights: torch.Tensor | None = None,
    grad_clip: float = 0.0,
    compute_grad_norm: bool = False,
    sample_weights: torch.Tensor | None = None,
    group_stats: bool = True,
) -> dict[str, Any]:
    """One optimizer step of group-weighted behaviour cloning.

    Args:
        policy: the network (trainable parameters are those with ``requires_grad``).
        batch: normalized observations, targets, groups (and images).
        optim: optimizer over the trainable parameters.
        group_weights: float (num_groups,) loss weight of each group (None: all 1).
        grad_clip: clip the gradient norm to this value (0 = no clipping).
        compute_grad_norm: also return the gradient norm when not clipping.
        sample_weights: ``group_weights[batch.group]`` when the caller has it already.
        group_stats: also return the per-group sums (the loop computes them for many steps
            at once from ``per_sample``).

    Returns:
        Detached tensors: ``loss`` (weighted), ``per_sample`` (B,), ``group_loss_sum`` and
        ``group_count`` (num_groups,) for per-group means (with ``group_stats``),
        ``grad_norm`` (NaN when not computed), and ``policy_metrics``, the metrics of the
        policy's loss (a dict, often empty).
    """
    if group_weights is None:
        group_weights = torch.ones(int(batch.group.max()) + 1)
    if not policy.training:  # train() visits every submodule: ~20 us a step
        policy.train()
    per_sample, policy_metrics = policy.loss(batch)
    weights = group_weights[batch.group] if sample_weights is None else sample_weights
    loss = (weights * per_sample).sum() / weights.sum().clamp_min(1e-12)
    optim.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = _NAN
    if grad_clip > 0 or compute_grad_norm:
        params = [p for group in optim.param_groups for p in group["params"]
                  if p.grad is not None]
        if grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip).detach()
        else:
            grad_norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(p.grad) for p in params])).detach()
    optim.step()
    detached = per_sample.detach()
    out = {"loss": loss.detach(), "per_sample": detached, "grad_norm": grad_norm,
           "policy_metrics": {k: v.detach() for k, v in policy_metrics.items()}}
    if group_stats:
        num_groups = group_weights.shape[0]
        out["group_loss_sum"] = torch.zeros(num_groups).index_add_(0, batch.group, detached)
        out["group_count"] = torch.bincount(batch.group, minlength=num_groups).to(
            torch.float32)
    return out


#: The gradient norm of a step that does not compute it (read only at log steps).
_NAN = torch.tensor(float("nan"))


def set_deterministic_algorithms(mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)`` for eager code, without its import cost.

    Since torch 2.13 that call imports ``torch._inductor.config`` to set the flag compiled
    code reads: ~1 s of every training process on the 2-core machine (measured; the
    optimizer's first step imports dynamo either way). Nothing here compiles, so unless
    inductor is loaded already, the eager kernels' flag is set directly; the public call is
    the fallback where torch lacks the private one.
    """
    if "torch._inductor.config" in sys.modules or not hasattr(
            torch._C, "_set_deterministic_algorithms"):
        torch.use_deterministic_algorithms(mode)
    else:
        torch._C._set_deterministic_algorithms(mode)


@contextlib.contextmanager
def deterministic(num_threads: int) -> Iterator[None]:
    """Fixed thread count and deterministic torch algorithms for the duration."""
    previous = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(num_threads)
    set_deterministic_algorithms(True)
    try:
        yield
    finally:
        set_deterministic_algorithms(previous)


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Learning rate of optimizer step ``step`` (1-based): constant, or a cosine from ``lr``
    at step 1 towards 0 after ``cfg.steps`` (a function of the step only, so a resumed run
    follows the same schedule)."""
    if cfg.lr_schedule == LR_CONSTANT:
        return cfg.lr
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * (step - 1) / max(cfg.steps, 1)))


def work_key(cfg: TrainConfig, dataset_ids: Sequence[str], table: TrainingTable,
             init_checkpoint: str | None) -> str:
    """Name of a run's work folder: a hash of everything that determines its weights."""
    # A cosine schedule depends on the run's length: then a longer run is a different run.
    excluded = _KEY_EXCLUDED if cfg.lr_schedule == LR_CONSTANT else \
        tuple(k for k in _KEY_EXCLUDED if k != "steps")
    config = {k: v for k, v in cfg.to_json().items() if k not in excluded}
    data = {"config": config, "datasets": list(dataset_ids), "init": init_checkpoint,
            "rows": len(table), "obs_spec": ckpt.spec_pairs(table.obs_spec),
            "action_spec": ckpt.spec_pairs(table.action_spec),
            "groups": list(table.group_names), "format": ckpt.CHECKPOINT_FORMAT}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def select_obs(table_spec: Mapping[str, int], exclude: Sequence[str]
               ) -> tuple[dict[str, int], np.ndarray]:
    """The observation keys a policy sees (the table's, minus ``exclude``) and their columns.

    Raises:
        ConfigError: when every key would be excluded.
    """
    spec, cols, at = {}, [], 0
    for key, width in table_spec.items():
        if key not in exclude:
            spec[key] = width
            cols.extend(range(at, at + width))
        at += width
    if not spec:
        raise ConfigError("exclude_obs_keys", list(exclude),
                          "leaving at least one of " + ", ".join(table_spec))
    return spec, np.asarray(cols, dtype=np.int64)


def relative_parts(mode: str, obs_spec: Mapping[str, int], action_spec: Mapping[str, int]
                   ) -> tuple[tuple[int, int, int], ...]:
    """``(action column, observation column, width)`` of the action parts a ``delta`` policy
    predicts relative to the observation: joint targets relative to joint positions (when both
    keys exist with the same width); nothing in ``absolute`` mode."""
    if mode != C.ACTION_MODE_DELTA:
        return ()
    pairs = ((C.ACT_JOINT_TARGET, C.OBS_JOINT_POS),)
    a_at = dict(zip(action_spec, np.cumsum([0, *action_spec.values()])[:-1].tolist()))
    o_at = dict(zip(obs_spec, np.cumsum([0, *obs_spec.values()])[:-1].tolist()))
    return tuple((int(a_at[a]), int(o_at[o]), int(action_spec[a])) for a, o in pairs
                 if a in action_spec and o in obs_spec and action_spec[a] == obs_spec[o])


def _relative_action_stats(table: TrainingTable, obs_cols: np.ndarray, spec: PolicySpec,
                           shift: int, std_floor: float, stats: Mapping[str, np.ndarray]
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of the network's action targets when parts are relative: pooled over the
    chunk offsets (rows near episode ends are few and not treated specially)."""
    total = torch.zeros(spec.act_dim, dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    count = 0
    rows = len(table)
    to_command = relative_to_command(spec)
    for lo in range(0, rows, _STATS_ROWS):
        hi = min(rows, lo + _STATS_ROWS)
        obs = torch.from_numpy(np.asarray(table.obs[lo:hi])[:, obs_cols])
        if to_command:
            at = np.minimum(np.arange(lo, hi) + shift - 1, rows - 1)
            obs = command_base(spec.relative, obs,
                               torch.from_numpy(np.asarray(table.action)[at]))
        for offset in range(spec.chunk):
            at = np.minimum(np.arange(lo, hi) + shift + offset, rows - 1)
            action = torch.from_numpy(np.asarray(table.action)[at])[:, None, :]
            rel = to_relative(spec.relative, action, obs)[:, 0].double()
            total += rel.sum(0)
            total_sq += rel.pow(2).sum(0)
            count += hi - lo
    mean = total / count
    std = (total_sq / count - mean.pow(2)).clamp_min(0.0).sqrt()
    return (mean.float().numpy(),
            np.maximum(std.float().numpy(), np.float32(std_floor)))


def input_stats(table: TrainingTable, obs_cols: np.ndarray, spec: PolicySpec,
                std_floor: float, shift: int = 0) -> dict[str, np.ndarray]:
    """Normalization stats of the network input: the table's stats of the observation columns
    the policy sees, then those of the derived features (one chunked pass over the table),
    every std at least ``std_floor``; for relative action parts the stats of the relative
    targets."""
    stats = floor_stats(table.stats, std_floor)
    stats["obs_mean"] = stats["obs_mean"][obs_cols]
    stats["obs_std"] = stats["obs_std"][obs_cols]
    if spec.relative:
        stats["action_mean"], stats["action_std"] = _relative_action_stats(
            table, obs_cols, spec, shift, std_floor, stats)
    if not spec.features:
        return stats
    featurizer = Featurizer(spec.features, spec.obs_layout)
    dim = len(obs_cols)
    total = torch.zeros(spec.input_dim - dim, dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    for lo in range(0, len(table), _STATS_ROWS):
        raw = np.asarray(table.obs[lo:lo + _STATS_ROWS])[:, obs_cols]
        with torch.no_grad():
            derived = featurizer(torch.from_numpy(raw))[:, dim:].double()
        total += derived.sum(0)
        total_sq += derived.pow(2).sum(0)
    mean = total / len(table)
    std = (total_sq / len(table) - mean.pow(2)).clamp_min(0.0).sqrt()
    stats["obs_mean"] = np.concatenate([stats["obs_mean"], mean.float().numpy()])
    stats["obs_std"] = np.concatenate([stats["obs_std"],
                                       np.maximum(std.float().numpy(), np.float32(std_floor))])
    return stats


def policy_sampler(table: TrainingTable, spec: PolicySpec, obs_cols: np.ndarray,
                   cfg: TrainConfig, *, val_fraction: float, seed: int, batch_size: int
                   ) -> TableSampler:
    """The minibatches a policy of ``spec`` trains on: its chunk, the observation columns it
    sees (:func:`select_obs`), ``cfg``'s action shift and resident budget, and the previous
    command when its targets are relative to it (the trainer's, and RL's demonstration
    regularizer's, batches)."""
    return TableSampler(table, val_fraction=val_fraction, chunk=spec.chunk, seed=seed,
                        resident_budget_mb=cfg.resident_budget_mb, batch_size=batch_size,
                        shift=cfg.action_shift,
                        obs_columns=None if len(obs_cols) == table.obs.shape[1] else obs_cols,
                        command=relative_to_command(spec))


def group_counts(table: TrainingTable) -> np.ndarray:
    """Rows per group, counted in chunks (the group column is never loaded whole)."""
    counts = np.zeros(len(table.group_names), dtype=np.int64)
    for lo in range(0, len(table), _COUNT_ROWS):
        chunk = np.asarray(table.group[lo:lo + _COUNT_ROWS])
        counts += np.bincount(chunk, minlength=len(counts))[:len(counts)]
    return counts


def _to_tensors(batch: Batch, policy: PolicyModel) -> tuple[torch.Tensor, torch.Tensor,
                                                         torch.Tensor, torch.Tensor | None]:
    with torch.no_grad():
        raw = torch.from_numpy(batch.obs)
        obs = policy.normalize_obs(raw)
        base = raw if batch.command is None else \
            policy.relative_base(raw, torch.from_numpy(batch.command))
        target = policy.normalize_action(policy.to_relative(torch.from_numpy(batch.action), base))
    image = None if batch.image is None else torch.from_numpy(batch.image)
    return obs, target, torch.from_numpy(batch.group), image


@dataclasses.dataclass
class _Window:
    """Minibatches of the next ``count`` steps, drawn, gathered, hardened and converted to
    normalized tensors at once (the per-op cost of the small ops paid once per window instead
    of once per step); step ``k`` of the window reads rows ``k * B .. (k + 1) * B``. The
    generator states after each step's draws are kept so that a step folder written in the
    middle of a window records what a step-by-step loop would have."""

    count: int
    #: per step: normalized observations, targets, groups, sample weights (views)
    steps: list[tuple[torch.Tensor, ...]]
    sample_states: list[torch.Tensor]
    noise_states: list[torch.Tensor] | None
    used: int = 0


def make_hardener(policy: PolicyModel, obs_spec: Mapping[str, int], cfg: TrainConfig
                  ) -> Callable[[np.ndarray, torch.Generator], np.ndarray] | None:
    """``harden(obs, generator)``: raw observations with the batch's hardening share of rows
    (the first ones; rows come shuffled) perturbed by ``cfg.hardening_noise`` (see
    :mod:`clawgym_ros.training.hardening`); derived features are computed afterwards from the
    perturbed values. None when nothing is hardened."""
    n_hard = int(round(cfg.hardening_share * cfg.batch_size))
    if n_hard == 0:
        return None
    if cfg.hardening_noise == HARDENING_SENSOR_NOISE:
        std = sensor_noise_std(obs_spec, cfg.hardening_keys, cfg.hardening_horizon_s)

        def physical(obs: np.ndarray, generator: torch.Generator) -> np.ndarray:
            with torch.no_grad():
                return perturb_sensor_noise(torch.from_numpy(obs), n_hard, std,
                                            cfg.hardening_intensity, generator).numpy()
        return physical
    layout = hardening_layout(obs_spec, cfg.hardening_keys)

    def scaled(obs: np.ndarray, generator: torch.Generator) -> np.ndarray:
        dim = obs.shape[1]
        mean, std = policy.obs_mean[:dim], policy.obs_std[:dim]
        with torch.no_grad():
            obs_n = (torch.from_numpy(obs) - mean) / std
            obs_n = perturb_observations(obs_n, n_hard, layout, cfg.noise_std, cfg.bias_std,
                                         generator)
            return (obs_n * std + mean).numpy()
    return scaled


def evaluate(policy: PolicyModel, val: TensorBatch, group_weights: torch.Tensor
             ) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Weighted validation loss (the policy's own loss, in eval mode) plus per-group loss sums
    and counts."""
    num_groups = group_weights.shape[0]
    sums = torch.zeros(num_groups, dtype=torch.float64)
    counts = torch.zeros(num_groups, dtype=torch.float64)
    policy.eval()
    with torch.no_grad():
        for lo in range(0, val.obs.shape[0], _VAL_CHUNK):
            sl = slice(lo, lo + _VAL_CHUNK)
            image = None if val.image is None else val.image[sl]
            per, _ = policy.loss(TensorBatch(val.obs[sl], val.target[sl], val.group[sl], image))
            sums.index_add_(0, val.group[sl], per.double())
            counts += torch.bincount(val.group[sl], minlength=num_groups).double()
    w = group_weights.double()
    loss = float((w * sums).sum() / (w * counts).sum().clamp_min(1e-12))
    return loss, sums, counts


def _group_means(names: Sequence[str], sums: torch.Tensor, counts: torch.Tensor
                 ) -> dict[str, float]:
    return {name: float(sums[i] / counts[i]) for i, name in enumerate(names) if counts[i] > 0}


class _LoopState:
    """Scalars and accumulators of the loop that a resume must restore."""

    def __init__(self, num_groups: int):
        self.step = 0
        self.best_val = math.inf
        self.bad_evals = 0
        self.stopped_early = False
        self.last_val = math.nan
        self.last_val_groups: dict[str, float] = {}
        self.history: list[dict[str, Any]] = []
        self.reset_window(num_groups)

    def reset_window(self, num_groups: int) -> None:
        self.win_loss = torch.zeros((), dtype=torch.float64)
        self.win_steps = 0
        self.win_sums = torch.zeros(num_groups, dtype=torch.float64)
        self.win_counts = torch.zeros(num_groups, dtype=torch.float64)

    def add_steps(self, steps: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
                  ) -> None:
        """Add steps' (weighted loss, per-sample losses, groups) to the window sums: bit for
        bit what adding each step's float32 loss and per-group sums (its samples in order)
        to the float64 sums, one step after the other, gives (``scatter_add_`` and
        ``cumsum`` accumulate in order; counts are whole numbers)."""
        losses, per, groups = (torch.stack(part) for part in zip(*steps))
        sums = torch.zeros(len(steps), self.win_sums.shape[0]).scatter_add_(1, groups, per)
        self.win_loss = torch.cat([self.win_loss.view(1), losses.double()]).cumsum(0)[-1]
        self.win_sums = torch.cat([self.win_sums.view(1, -1), sums.double()]).cumsum(0)[-1]
        self.win_loss, self.win_sums = self.win_loss.clone(), self.win_sums.clone()
        self.win_counts = self.win_counts + torch.bincount(
            groups.reshape(-1), minlength=self.win_counts.shape[0]).double()

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "best_val": _json_float(self.best_val),
                "bad_evals": self.bad_evals, "stopped_early": self.stopped_early,
                "last_val": _json_float(self.last_val), "last_val_groups": self.last_val_groups,
                "win_steps": self.win_steps, "history": self.history}

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"loop.win_loss": self.win_loss, "loop.win_sums": self.win_sums,
                "loop.win_counts": self.win_counts}

    def load(self, data: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> None:
        self.step = int(data["step"])
        self.best_val = _from_json_float(data["best_val"])
        self.bad_evals = int(data["bad_evals"])
        self.stopped_early = bool(data["stopped_early"])
        self.last_val = _from_json_float(data["last_val"])
        self.last_val_groups = dict(data["last_val_groups"])
        self.win_steps = int(data["win_steps"])
        self.history = list(data["history"])
        self.win_loss = tensors["loop.win_loss"].clone()
        self.win_sums = tensors["loop.win_sums"].clone()
        self.win_counts = tensors["loop.win_counts"].clone()


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _from_json_float(value: float | str) -> float:
    return float(value)


def train(
    table: TrainingTable,
    cfg: TrainConfig,
    store: ArtifactStore,
    *,
    dataset_ids: Sequence[str] | None = None,
    init_checkpoint: str | None = None,
    resume: bool = True,
    should_stop: Callable[[int], bool] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    tensorboard: bool = True,
) -> TrainResult:
    """Train a policy on ``table`` and publish it as a checkpoint artifact in ``store``.

    Args:
        table: the training table (memory-mapped; streamed, never loaded whole).
        cfg: run settings.
        store: artifact store of the run directory (checkpoints, work folders, logs).
        dataset_ids: dataset artifacts the table came from (checkpoint parents); default:
            the table's own ``dataset_ids``.
        init_checkpoint: warm start from this checkpoint's weights (its policy spec is used).
        resume: continue from the newest step folder of an earlier run with the same settings.
        should_stop: called with the number of completed steps before each step; True stops
            the run as cancelled (a checkpoint of the current step is kept in the work folder,
            nothing is published).
        on_progress: called at log and validation steps.
        tensorboard: write TensorBoard scalars under ``<run>/logs/tensorboard/<work key>``.

    Returns:
        A :class:`TrainResult` (``checkpoint_id`` is None when cancelled).

    Raises:
        ConfigError: group weights naming unknown groups, all-zero weights, bad frozen groups.
        CheckpointError: the init checkpoint is tampered or does not fit the table.
    """
    run = _setup(table, cfg, store, dataset_ids, init_checkpoint, tensorboard)
    with deterministic(run.cfg.num_threads):
        trainer = _Trainer(table, run, resume)
        cancelled, samples_per_s, cpu_s_per_sample = trainer.loop(should_stop, on_progress)
    result = _publish(store, run, trainer, cancelled, samples_per_s)
    result.cpu_s_per_sample = cpu_s_per_sample
    return result


@dataclasses.dataclass
class _Setup:
    """What a training run is, decided before any tensor is built: the effective config, the
    policy spec, the input statistics, the work folder and the checkpoint metadata."""

    cfg: TrainConfig
    dataset_ids: list[str]
    group_w: dict[str, float]
    weight_vec: torch.Tensor
    obs_spec: dict[str, int]
    obs_cols: np.ndarray
    init: Any
    init_checkpoint: str | None
    spec: PolicySpec
    key: str
    stats: dict[str, Any]
    work_dir: Path
    log_dir: Path | None
    meta: dict[str, Any]


def policy_spec(table: TrainingTable, cfg: TrainConfig, obs_spec: Mapping[str, int]
                ) -> PolicySpec:
    """The policy a run of ``cfg`` builds on ``table`` when it sees the observation keys
    ``obs_spec`` (:func:`select_obs`): the derived features whose keys it sees, relative action
    parts of ``cfg.action_mode``, the table's image shape."""
    features = tuple(f for f in cfg.features if all(k in obs_spec for k in FEATURES[f]))
    return PolicySpec(type=cfg.policy, obs_dim=sum(obs_spec.values()),
                      act_dim=int(table.action.shape[1]), hidden=cfg.hidden, chunk=cfg.chunk,
                      image_shape=None if table.image is None else
                      tuple(int(s) for s in table.image.shape[1:]),
                      features=features,
                      obs_layout=tuple(obs_spec.items()) if features else (),
                      relative=relative_parts(cfg.action_mode, obs_spec, table.action_spec),
                      options=dict(cfg.policy_options))


def _setup(table: TrainingTable, cfg: TrainConfig, store: ArtifactStore,
           dataset_ids: Sequence[str] | None, init_checkpoint: str | None,
           tensorboard: bool) -> _Setup:
    """Check the group weights, resolve the init checkpoint, build the spec (see :func:`train`)."""
    dataset_ids = list(table.dataset_ids if dataset_ids is None else dataset_ids)
    cfg = dataclasses.replace(cfg)
    group_w = validate_group_weights(cfg.group_weights, allowed=table.group_names)
    weight_vec = torch.tensor([group_w.get(g, 1.0) for g in table.group_names],
                              dtype=torch.float32)
    present = weight_vec[torch.from_numpy(group_counts(table) > 0)]
    if float(present.sum()) <= 0:
        raise ConfigError("group_weights", group_w, "at least one present group with weight > 0")

    obs_spec, obs_cols = select_obs(table.obs_spec, cfg.exclude_obs_keys)
    init = None
    if init_checkpoint:
        init = ckpt.load_checkpoint(store, init_checkpoint, expected_obs_spec=obs_spec,
                                    expected_action_spec=table.action_spec)
        spec0 = init.spec
        cfg = dataclasses.replace(cfg, policy=spec0.type, hidden=spec0.hidden, chunk=spec0.chunk,
                                  features=spec0.features, policy_options=dict(spec0.options))
        init_checkpoint = init.artifact.id
    spec = policy_spec(table, cfg, obs_spec)
    key = work_key(cfg, dataset_ids, table, init_checkpoint)
    stats = input_stats(table, obs_cols, spec, cfg.std_floor, cfg.action_shift)
    work_dir = store.run_dir / C.DIR_TRAIN_WORK / key
    log_dir = store.run_dir / C.DIR_LOGS / C.DIR_TENSORBOARD / key if tensorboard else None
    meta = {
        "format": ckpt.CHECKPOINT_FORMAT, "train_config": cfg.to_json(),
        "policy_spec": spec.to_json(), "obs_spec": ckpt.spec_pairs(obs_spec),
        "action_spec": ckpt.spec_pairs(table.action_spec),
        "group_names": list(table.group_names), "group_weights": group_w,
        "frozen_groups": list(cfg.frozen_groups), "dataset_ids": dataset_ids,
        "stats": {k: np.asarray(v).tolist() for k, v in stats.items()},
        "init_checkpoint": init_checkpoint,
    }
    return _Setup(cfg, dataset_ids, group_w, weight_vec, obs_spec, obs_cols, init,
                  init_checkpoint, spec, key, stats, work_dir, log_dir, meta)


class _Trainer:
    """The policy, optimizer, generators, sampler and loop state of a run (resumed from the
    newest step folder of the work folder when there is one) and the step loop."""

    def __init__(self, table: TrainingTable, run: _Setup, resume: bool) -> None:
        cfg, spec = run.cfg, run.spec
        self.table, self.run, self.cfg = table, run, cfg
        self.policy = build_policy(spec, run.stats, seed=cfg.seed)
        if run.init is not None:
            self.policy.load_state_dict(run.init.build_model().state_dict())
        freeze(self.policy, cfg.frozen_groups)
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        self.optim = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.sample_gen = torch.Generator().manual_seed(cfg.seed)
        self.noise_gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.num_groups = len(table.group_names)
        self.state = _LoopState(self.num_groups)
        self.resumed_from = 0
        if resume and self._load_newest_step():
            self.resumed_from = self.state.step
        self.sampler = policy_sampler(table, spec, run.obs_cols, cfg,
                                      val_fraction=cfg.val_fraction, seed=cfg.seed,
                                      batch_size=cfg.batch_size)
        self.val = None
        val_batch = self.sampler.validation(cfg.val_samples, cfg.seed)
        if val_batch is not None:
            self.val = TensorBatch(*_to_tensors(val_batch, self.policy))
        self.harden = make_hardener(self.policy, run.obs_spec, cfg)
        self.writer = None
        self.window: _Window | None = None
        #: (loss, per-sample losses, groups) of the steps not yet in the window sums
        self.pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        # Whole windows featurized at once only where that equals per-batch featurization.
        objects = run.obs_spec.get(C.OBS_OBJECT_POSES, 0) // 7
        rows = _WINDOW_ROWS
        self.window_featurize = not BATCH_DEPENDENT_FEATURES.intersection(spec.features)
        if not self.window_featurize and cfg.batch_size * objects % _SIMD_BLOCK == 0:
            self.window_featurize = True
            rows = min(rows, (_GRAIN - 1) // objects)
        self.window_steps = max(1, rows // cfg.batch_size)

    def _load_newest_step(self) -> bool:
        """Load the newest complete step folder (<= cfg.steps); False when there is none."""
        done = [s for s in ckpt.complete_steps(self.run.work_dir) if s <= self.cfg.steps]
        if not done:
            return False
        state = ckpt.read_step(self.run.work_dir / str(done[-1]))
        self.policy.load_state_dict(state.weights)
        ckpt.load_optimizer_state(self.optim, state.tensors, state.state["optimizer"])
        self.sample_gen.set_state(state.tensors["rng.sample"])
        self.noise_gen.set_state(state.tensors["rng.noise"])
        self.state.load(state.state["loop"], state.tensors)
        return True

    def save(self, step: int) -> None:
        """Write step folder ``step``: weights, optimizer, generators, loop state."""
        self._flush()
        tensors, opt_json = ckpt.optimizer_state(self.optim)
        tensors.update(self.state.tensors())
        tensors["rng.sample"] = self.sample_gen.get_state()
        tensors["rng.noise"] = self.noise_gen.get_state()
        window = self.window
        if window is not None and window.used < window.count:  # drawn ahead of this step
            tensors["rng.sample"] = window.sample_states[window.used - 1]
            if window.noise_states is not None:
                tensors["rng.noise"] = window.noise_states[window.used - 1]
        ckpt.write_step(self.run.work_dir, step, policy=self.policy, meta=self.run.meta,
                        state_tensors=tensors,
                        state_json={"optimizer": opt_json, "loop": self.state.to_json()})

    def loop(self, should_stop: Callable[[int], bool] | None,
             on_progress: Callable[[Progress], None] | None) -> tuple[bool, float, float]:
        """Steps until cfg.steps, early stop or ``should_stop``: (cancelled, samples/s, process
        CPU seconds per sample)."""
        cfg, loop = self.cfg, self.state
        if self.run.log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(self.run.log_dir))
        cancelled = False
        start, cpu_start = time.perf_counter(), time.process_time()
        first_step = loop.step
        try:
            while loop.step < cfg.steps and not loop.stopped_early:
                if should_stop is not None and should_stop(loop.step):
                    cancelled = True
                    break
                self.step(loop.step + 1, on_progress)
            if cancelled and loop.step > first_step:
                self.save(loop.step)
        finally:
            if self.writer is not None:
                self.writer.close()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        samples = (loop.step - first_step) * cfg.batch_size
        return (cancelled, samples / max(elapsed, 1e-9),
                cpu / samples if samples else math.nan)

    def step(self, step: int, on_progress: Callable[[Progress], None] | None) -> None:
        """One update, then its log / validation / progress / step folder as they fall due."""
        cfg, loop, policy, optim = self.cfg, self.state, self.policy, self.optim
        for param_group in optim.param_groups:
            param_group["lr"] = lr_at(cfg, step)
        weight = None
        if self.sampler.has_images:
            batch = self.sampler.sample(cfg.batch_size, self.sample_gen)
            if self.harden is not None:
                batch.obs = self.harden(batch.obs, self.noise_gen)
            obs, target, group, image = _to_tensors(batch, policy)
            if image is not None:
                image = policy.augment(image, self.noise_gen)
        else:
            obs, target, group, weight = self._window_batch(step)
            image = None
        log_now = step % cfg.log_interval == 0 or step == cfg.steps
        metrics = update_step(policy, TensorBatch(obs, target, group, image), optim,
                              group_weights=self.run.weight_vec, grad_clip=cfg.grad_clip,
                              compute_grad_norm=log_now, sample_weights=weight,
                              group_stats=False)
        loop.step = step
        loop.win_steps += 1
        self.pending.append((metrics["loss"], metrics["per_sample"], group))
        groups: dict[str, float] = {}
        train_loss = math.nan
        if log_now:
            train_loss, groups = self._log(step, metrics)
        if self.val is not None and (step % cfg.val_interval == 0 or step == cfg.steps):
            self._validate(step)
        if log_now or (self.val is not None and step % cfg.val_interval == 0):
            if not groups:
                groups = loop.history[-1]["group_losses"] if loop.history else {}
                train_loss = loop.history[-1]["loss"] if loop.history else math.nan
            if on_progress is not None:
                on_progress(Progress(step=step, total_steps=cfg.steps, loss=train_loss,
                                     val_loss=loop.last_val, group_losses=groups))
        if step % cfg.checkpoint_interval == 0 or step == cfg.steps or loop.stopped_early:
            self.save(step)

    def _flush(self) -> None:
        """Fold the steps since the last flush into the loop's window sums."""
        if self.pending:
            self.state.add_steps(self.pending)
            self.pending.clear()

    def _window_batch(self, step: int) -> tuple[torch.Tensor, ...]:
        """Step ``step``'s normalized observations, targets, groups and sample weights, from
        the current window (a new one when it is used up)."""
        window = self.window
        if window is None or window.used == window.count:
            window = self.window = self._fill(step)
        window.used += 1
        return window.steps[window.used - 1]

    def _fill(self, step: int) -> _Window:
        """The window from step ``step`` on: the same draws, gathers and hardening noise, in the
        same order, as a step-by-step loop. It ends at the next step that validates (it may stop
        the run) or writes a step folder, so those see the generators as they would be."""
        cfg, sampler, size = self.cfg, self.sampler, self.cfg.batch_size
        end = min(cfg.steps, *(-(-step // n) * n for n in (cfg.checkpoint_interval,
                                                             cfg.val_interval)))
        count = min(self.window_steps, end - step + 1)
        draws, sample_states = [], []
        for _ in range(count):
            draws.append(sampler.draw(size, self.sample_gen))
            sample_states.append(self.sample_gen.get_state())
        rows, ends = sampler.train.locate(np.concatenate(draws))
        parts, every = [], sampler.release_every if sampler.releases else count
        for lo in range(0, count, every):  # pages released as often as step by step
            at = slice(lo * size, (lo + every) * size)
            parts.append(sampler.gather(rows[at], ends[at]))
            sampler.advance(min(every, count - lo))
        batch = parts[0] if len(parts) == 1 else Batch.concat(parts, images=False)
        noise_states = None
        if self.harden is not None:
            hardened, noise_states = [], []
            for k in range(count):
                hardened.append(self.harden(batch.obs[k * size:(k + 1) * size], self.noise_gen))
                noise_states.append(self.noise_gen.get_state())
            batch.obs = np.concatenate(hardened)
        if self.window_featurize:
            obs, target, group, _ = _to_tensors(batch, self.policy)
        else:
            rows = [slice(k * size, (k + 1) * size) for k in range(count)]
            steps = [_to_tensors(Batch(batch.obs[at], batch.action[at], batch.group[at], None,
                                       None if batch.command is None else batch.command[at]),
                                 self.policy)
                     for at in rows]
            obs, target, group = (torch.cat([s[i] for s in steps]) for i in range(3))
        parts = (obs, target, group, self.run.weight_vec[group])
        steps = list(zip(*(part.view(count, size, *part.shape[1:]).unbind(0)
                           for part in parts)))
        return _Window(count, steps, sample_states, noise_states)

    def _log(self, step: int, metrics: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        """Close the logging window: a history entry (and TensorBoard scalars)."""
        loop, writer = self.state, self.writer
        self._flush()
        train_loss = float(loop.win_loss) / max(loop.win_steps, 1)
        groups = _group_means(self.table.group_names, loop.win_sums, loop.win_counts)
        entry = {"step": step, "loss": train_loss, "group_losses": groups,
                 "lr": self.optim.param_groups[0]["lr"],
                 "grad_norm": float(metrics["grad_norm"])}
        if metrics["policy_metrics"]:  # the step's own values, not window means
            entry["policy_metrics"] = {k: float(v) for k, v in
                                       metrics["policy_metrics"].items()}
        loop.history.append(entry)
        loop.reset_window(self.num_groups)
        if writer is not None:
            writer.add_scalar("loss/train", train_loss, step)
            writer.add_scalar("lr", entry["lr"], step)
            writer.add_scalar("grad_norm", entry["grad_norm"], step)
            for name, value in entry.get("policy_metrics", {}).items():
                writer.add_scalar(f"policy/{name}", value, step)
            for name, value in groups.items():
                writer.add_scalar(f"loss_group/{name}", value, step)
        return train_loss, groups

    def _validate(self, step: int) -> None:
        """Validation loss, early-stopping bookkeeping (and TensorBoard scalars)."""
        cfg, loop = self.cfg, self.state
        val_loss, sums, counts = evaluate(self.policy, self.val, self.run.weight_vec)
        loop.last_val = val_loss
        loop.last_val_groups = _group_means(self.table.group_names, sums, counts)
        if val_loss < loop.best_val - cfg.min_delta:
            loop.best_val, loop.bad_evals = val_loss, 0
        else:
            loop.bad_evals += 1
        if cfg.patience and loop.bad_evals >= cfg.patience:
            loop.stopped_early = True
        if self.writer is not None:
            self.writer.add_scalar("loss/val", val_loss, step)
            for name, value in loop.last_val_groups.items():
                self.writer.add_scalar(f"val_loss_group/{name}", value, step)


def _publish(store: ArtifactStore, run: _Setup, trainer: _Trainer, cancelled: bool,
             samples_per_s: float) -> TrainResult:
    """The run's result; unless cancelled, its last step committed as a checkpoint artifact."""
    cfg, loop, dataset_ids = run.cfg, trainer.state, run.dataset_ids
    last = loop.history[-1] if loop.history else {"loss": math.nan, "group_losses": {}}
    result = TrainResult(
        checkpoint_id=None, artifact=None, step=loop.step, train_loss=float(last["loss"]),
        val_loss=loop.last_val, group_losses=dict(last["group_losses"]),
        stopped_early=loop.stopped_early, cancelled=cancelled,
        resumed_from=trainer.resumed_from, samples_per_s=samples_per_s,
        work_dir=run.work_dir, log_dir=run.log_dir)
    if cancelled:
        return result
    if loop.step not in ckpt.complete_steps(run.work_dir):
        trainer.save(loop.step)
    content = {
        "step": loop.step, "steps": cfg.steps, "train_loss": _json_float(result.train_loss),
        "val_loss": _json_float(loop.last_val), "best_val_loss": _json_float(loop.best_val),
        "group_losses": result.group_losses, "val_group_losses": loop.last_val_groups,
        "stopped_early": loop.stopped_early, "train_episodes": trainer.sampler.train_episodes,
        "val_episodes": trainer.sampler.val_episodes, "dataset_ids": dataset_ids,
        "group_weights": run.group_w, "frozen_groups": list(cfg.frozen_groups),
        "history": loop.history, "work_key": run.key,
    }
    init_checkpoint = run.init_checkpoint
    parents = list(dict.fromkeys(dataset_ids + ([init_checkpoint] if init_checkpoint else [])))
    artifact = ckpt.commit_checkpoint(
        store, run.work_dir, loop.step, summary_content=content,
        config={**cfg.to_json(), "dataset_ids": dataset_ids, "init_checkpoint": init_checkpoint},
        seed=cfg.seed, parents=parents,
        summary={"step": loop.step, "train_loss": _json_float(result.train_loss),
                 "val_loss": _json_float(loop.last_val), "stopped_early": loop.stopped_early,
                 "samples_per_s": round(samples_per_s, 1), "resumed_from": trainer.resumed_from,
                 "policy": cfg.policy},
    )
    result.checkpoint_id = artifact.id
    result.artifact = artifact
    return result
