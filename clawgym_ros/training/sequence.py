"""Incremental learning over a task sequence: one task-conditioned policy trained task after
task (``clawgym train --sequence pick_place,peg_insert,pill_handover``).

Methods, run side by side on the same datasets, seed and step budget:

- ``naive``: sequential fine-tuning (each stage trains only on its task's data);
- ``consolidated``: sequential, with three consolidation mechanisms from the second stage on:
  rehearsal (a share of every batch replays rows of earlier tasks kept in a memory of at most
  ``rehearsal_rows`` rows), EWC (a quadratic penalty on moving parameters away from the end of
  the previous stage, weighted by their diagonal Fisher information on earlier tasks; online:
  the Fisher of each finished task is added to the running one) and sensitivity-based
  freezing (after each stage the ``freeze_layers`` layers with the highest mean Fisher are
  frozen for the rest of the sequence). By default only rehearsal is on (``ewc_lambda=0``,
  ``freeze_layers=0``): on the three arm tasks EWC at lambda 0.1-1 and freezing the most
  sensitive layer (the input layer, which holds the task one-hot's weights) cost the later
  tasks 3-15x their validation loss without lowering forgetting
  (docs/results/2026-12-05-incremental-learning-optimal.md);
- ``joint``: one run on every task's data at once, ``steps * len(tasks)`` steps (upper bound).

Layout. The arm tasks observe different keys (pick_place has a place goal and two objects,
peg_insert two objects and no goal, pill_handover one object and the hand state) and share one
action layout (joint targets, joint velocities, gripper). The policy reads a declared *union
layout*: every key of any task of the sequence, at its largest width, in first-seen order;
keys (or object slots) a task lacks are zeros, and a task one-hot (``task`` key) follows. Each
task has its own normalization statistics (rows of per-task buffers, selected by the one-hot),
computed from its dataset when the sequence starts (constants, like the layout: no gradient
step sees a later task's data), so a padded column normalizes to 0 and a task's inputs keep
their scale whatever the other tasks hold. One shared head rather than per-task heads: the
action layout is the same for all tasks, so the same output units mean the same joints, and
consolidation has to work on the whole network (with per-task heads forgetting would hide in
the shared trunk anyway, and the head would be the freezing choice made by hand). The layout,
the network and its evaluation wrapper live in :mod:`clawgym_ros.training.task_policy` (so
``clawgym eval --checkpoint`` loads a stage checkpoint without this module).

The network's recipe takes the single-task trainer's flags: ``--chunk``, ``--batch-size``,
``--lr`` and ``--add-feature`` (e.g. ``object_rel_first``, peg_insert's recipe:
docs/results/2026-12-05-peg-insert-bc.md); a feature is computed for every task whose union
row holds its keys (zero-padded slots included).

Metrics (per method): success of every task after every stage on held-out seeds (the in-process
evaluator, :class:`~clawgym_ros.evaluation.rollout.Runner`, nominal cell), with Wilson
intervals; average final success; backward transfer ``BWT = mean_j<T (R[T,j] - R[j,j])``
(forgetting = -BWT); forward transfer ``FWT = mean_j>1 (R[j-1,j] - R[0,j])`` against the
untrained network; held-out validation loss of every task after every stage. Differences
carry Newcombe's hybrid Wilson interval.

Determinism: seeded init, seeded generators per stage, deterministic torch algorithms and one
thread: the same seed gives the same checkpoint ids and the same report id. Stage checkpoints
are content-addressed; each names the previous stage's checkpoint and its datasets as
parents. The first stage of ``naive`` and ``consolidated`` is the same training and the same
checkpoint (consolidation starts with the second task).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.dataset.table import TrainingTable
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.stats import wilson, z_value
from clawgym_ros.training import checkpoint as ckpt
from clawgym_ros.training.bc import deterministic, relative_parts
from clawgym_ros.training.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FEATURES,
    DEFAULT_LR,
    FEATURE_NAMES,
)
from clawgym_ros.training.data import TableSampler, episode_runs
from clawgym_ros.training.policies import FEATURES, PolicySpec, TensorBatch, build_policy
from clawgym_ros.training.task_policy import (  # noqa: F401  (the sequence's public names)
    OBS_TASK,
    POLICY_TASK_MLP,
    TaskConditionedMLP,
    TaskPolicy,
    UnionLayout,
    load_task_policy,
)

METHOD_NAIVE = "naive"
METHOD_CONSOLIDATED = "consolidated"
METHOD_JOINT = "joint"
METHODS: tuple[str, ...] = (METHOD_NAIVE, METHOD_CONSOLIDATED, METHOD_JOINT)
#: File of the sequence report artifact (kind ``report``).
FILE_SEQUENCE_REPORT = "sequence.json"
#: Seed key of the evaluation episodes (far from the synthesis seeds' derivations).
_EVAL_KEY = 22_5
_STD_FLOOR = 0.01
_VAL_CHUNK = 4096
#: Settings that make a stage's training (its work key); ``features`` only when not the
#: default (:meth:`SequenceConfig.to_json` leaves it out then).
_TRAIN_KEYS = ("steps", "seed", "batch_size", "lr", "hidden", "chunk", "val_fraction",
               "features")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclasses.dataclass
class SequenceConfig:
    """Settings of an incremental-learning run (validated on construction)."""

    tasks: tuple[str, ...] = dataclasses.field(
        default=(), metadata=_help("the task sequence, in training order (unique, known)"))
    steps: int = dataclasses.field(default=3000, metadata=_help("optimizer steps per stage"))
    seed: int = dataclasses.field(default=0, metadata=_help("seed of init, sampling, eval"))
    methods: tuple[str, ...] = dataclasses.field(
        default=METHODS, metadata=_help("naive, consolidated, joint (any subset)"))
    batch_size: int = dataclasses.field(default=DEFAULT_BATCH_SIZE,
                                        metadata=_help("samples per step"))
    lr: float = dataclasses.field(default=DEFAULT_LR,
                                  metadata=_help("AdamW learning rate (cosine per stage)"))
    hidden: tuple[int, ...] = dataclasses.field(default=(256, 256, 256),
                                                metadata=_help("hidden widths"))
    chunk: int = dataclasses.field(default=20, metadata=_help("actions predicted per step"))
    features: tuple[str, ...] = dataclasses.field(
        default=DEFAULT_FEATURES,
        metadata=_help("derived observation features (``clawgym train --add-feature``: the "
                       "default set plus these); those whose keys no task has are skipped"))
    rehearsal_rows: int = dataclasses.field(
        default=20000, metadata=_help("memory budget: rows of earlier tasks kept in all "
                                     "(split evenly between them); 0 = no rehearsal"))
    rehearsal_share: float = dataclasses.field(
        default=0.5, metadata=_help("share of each batch replayed from the memory"))
    ewc_lambda: float = dataclasses.field(
        default=0.0, metadata=_help("EWC penalty weight (Fisher normalized to mean 1); 0 = off"))
    ewc_gamma: float = dataclasses.field(
        default=1.0, metadata=_help("online EWC: decay of the running Fisher per stage"))
    fisher_batches: int = dataclasses.field(
        default=64, metadata=_help("minibatches of the Fisher estimate after each stage"))
    fisher_batch_size: int = dataclasses.field(
        default=32, metadata=_help("samples per Fisher minibatch"))
    freeze_layers: int = dataclasses.field(
        default=0, metadata=_help("most sensitive layers frozen after each stage; 0 = off"))
    eval_episodes: int = dataclasses.field(
        default=20, metadata=_help("held-out episodes per task and stage; 0 = no rollouts"))
    max_steps: int = dataclasses.field(
        default=0, metadata=_help("control steps per evaluation episode; 0 = the env's limit"))
    eval_steps_factor: float = dataclasses.field(
        default=2.0, metadata=_help("evaluation episode limit of each task: this factor times "
                                    "its dataset's longest demonstration, at most max_steps "
                                    "(or the env's limit); 0 = off"))
    val_fraction: float = dataclasses.field(
        default=0.1, metadata=_help("share of each dataset's episodes held out (val loss)"))
    val_samples: int = dataclasses.field(default=2048,
                                         metadata=_help("max validation rows per task"))
    num_threads: int = dataclasses.field(default=1, metadata=_help("torch intra-op threads"))

    def __post_init__(self) -> None:
        if isinstance(self.tasks, str):
            self.tasks = tuple(t.strip() for t in self.tasks.split(","))
        self.tasks = tuple(self.tasks)
        check_tasks(self.tasks)
        check_int("steps", self.steps, 1, 10_000_000)
        check_int("seed", self.seed, 0, (1 << 63) - 1)
        if isinstance(self.methods, str):
            self.methods = tuple(m.strip() for m in self.methods.split(","))
        self.methods = tuple(self.methods)
        if not self.methods:
            raise ConfigError("methods", "", "one or more of " + ", ".join(METHODS))
        for i, method in enumerate(self.methods):
            check_choice(f"methods[{i}]", method, METHODS)
        if len(set(self.methods)) != len(self.methods):
            raise ConfigError("methods", ",".join(self.methods), "each method once")
        check_int("batch_size", self.batch_size, 2, 1 << 16)
        check_range("lr", self.lr, 0.0, 10.0, low_open=True)
        self.hidden = tuple(self.hidden)
        if not self.hidden:
            raise ConfigError("hidden", self.hidden, "at least one width")
        for i, width in enumerate(self.hidden):
            check_int(f"hidden[{i}]", width, 1, 65536)
        check_int("chunk", self.chunk, 1, 256)
        if isinstance(self.features, str):
            self.features = tuple(f.strip() for f in self.features.split(","))
        self.features = tuple(self.features)
        for i, name in enumerate(self.features):
            check_choice(f"features[{i}]", name, FEATURE_NAMES)
        check_int("rehearsal_rows", self.rehearsal_rows, 0, 100_000_000)
        check_range("rehearsal_share", self.rehearsal_share, 0.0, 1.0, high_open=True)
        check_range("ewc_lambda", self.ewc_lambda, 0.0, 1e12)
        check_range("ewc_gamma", self.ewc_gamma, 0.0, 1.0)
        check_int("fisher_batches", self.fisher_batches, 1, 100_000)
        check_int("fisher_batch_size", self.fisher_batch_size, 1, 1 << 16)
        check_int("freeze_layers", self.freeze_layers, 0, 64)
        check_int("eval_episodes", self.eval_episodes, 0, 100_000)
        check_int("max_steps", self.max_steps, 0, 1_000_000)
        check_range("eval_steps_factor", self.eval_steps_factor, 0.0, 1000.0)
        check_range("val_fraction", self.val_fraction, 0.0, 0.9)
        check_int("val_samples", self.val_samples, 1)
        check_int("num_threads", self.num_threads, 1, 256)

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """Fields settable by ``--sequence-option`` (all but tasks, steps, seed)."""
        return tuple(f.name for f in dataclasses.fields(cls)
                     if f.name not in ("tasks", "steps", "seed"))

    def to_json(self) -> dict[str, Any]:
        data = json.loads(json.dumps(dataclasses.asdict(self)))
        # Left out at the default: runs that name no features keep their checkpoint and
        # report ids from before the option existed.
        if self.features == DEFAULT_FEATURES:
            del data["features"]
        return data


def check_tasks(tasks: Sequence[str], field: str = "sequence") -> tuple[str, ...]:
    """A task sequence: at least one task, every one registered, none twice.

    Raises:
        ConfigError: naming the field, the offending value and what is allowed.
    """
    from clawgym_ros.tasks.registry import TASKS

    tasks = tuple(tasks)
    if not tasks or any(not t for t in tasks):
        raise ConfigError(field, ",".join(tasks), "comma-separated task names, at least one "
                          "(known: " + ", ".join(TASKS) + ")")
    for i, task in enumerate(tasks):
        if task not in TASKS:
            raise ConfigError(f"{field}[{i}]", task, "one of " + ", ".join(TASKS))
        if task in tasks[:i]:
            raise ConfigError(f"{field}[{i}]", task, "each task once (it is also "
                              f"{field}[{tasks.index(task)}])")
    return tasks


def layer_groups(policy: torch.nn.Module) -> dict[str, list[tuple[str, torch.nn.Parameter]]]:
    """Trainable layers as parameter groups: ``encoder.0``, ``trunk.0``, ..., ``head``
    (weight and bias of one Linear together), in network order."""
    groups: dict[str, list[tuple[str, torch.nn.Parameter]]] = {}
    for name, param in policy.named_parameters():
        groups.setdefault(name.rsplit(".", 1)[0], []).append((name, param))
    return groups


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class TaskData:
    """One task of the sequence: its dataset, table, sampler, stats and validation set."""

    task: str
    dataset_id: str
    table: TrainingTable
    sampler: TableSampler
    cols: np.ndarray
    stats: dict[str, np.ndarray]
    longest: int = 0                        # control steps of its longest demonstration
    val_obs: torch.Tensor | None = None     # union, raw
    val_action: torch.Tensor | None = None  # raw chunks


def dataset_tasks(store: ArtifactStore, dataset_id: str) -> set[str]:
    """The tasks of a dataset's episodes (from its group names: task/template/family)."""
    from clawgym_ros.training.data import episode_group_names, open_training_table

    groups = episode_group_names(store, [dataset_id])
    if groups is None:
        groups = open_training_table(store, [dataset_id]).group_names
    return {g.split("/", 1)[0] for g in groups}


def check_datasets(store: ArtifactStore, tasks: Sequence[str], refs: Sequence[str]
                   ) -> list[str]:
    """Resolve one dataset per task (in sequence order) and check each holds only its task.

    Returns:
        The full dataset ids.

    Raises:
        ConfigError: a count mismatch, or a dataset with another task's episodes.
        ArtifactError: an unknown dataset id.
    """
    if len(refs) != len(tasks):
        raise ConfigError("--dataset", list(refs), f"one dataset per task of the sequence "
                          f"({len(tasks)}: {', '.join(tasks)}), in the same order")
    ids = []
    for i, (task, ref) in enumerate(zip(tasks, refs)):
        art = store.resolve(ref, C.KIND_DATASET)
        found = dataset_tasks(store, art.id)
        if found != {task}:
            raise ConfigError(f"--dataset[{i}]", ref, f"a dataset of task {task} (sequence "
                              f"position {i}); it holds {', '.join(sorted(found))}")
        ids.append(art.id)
    return ids


def _stats(data_obs: np.ndarray, data_action: np.ndarray, ends: np.ndarray,
           model: TaskConditionedMLP, chunk: int) -> dict[str, np.ndarray]:
    """Normalization of the network input and of the (relative) action targets of one task's
    rows (union obs): mean, std floored; one-hot columns pass through (0, 1)."""
    obs = torch.from_numpy(data_obs)
    with torch.no_grad():
        feats = model.featurizer(obs).double()
    mean = feats.mean(0)
    std = feats.std(0, unbiased=False).clamp_min(_STD_FLOOR)
    at = model.task_at
    mean[at:at + model.num_tasks] = 0.0
    std[at:at + model.num_tasks] = 1.0
    rows = np.arange(len(data_obs))
    steps = np.minimum(rows[:, None] + 1 + np.arange(chunk)[None, :], (ends - 1)[:, None])
    action = torch.from_numpy(data_action[steps])
    rel = model.to_relative(action, obs).double().reshape(-1, action.shape[-1])
    a_mean = rel.mean(0)
    a_std = rel.std(0, unbiased=False).clamp_min(_STD_FLOOR)
    return {"obs_mean": mean.float().numpy(), "obs_std": std.float().numpy(),
            "action_mean": a_mean.float().numpy(), "action_std": a_std.float().numpy()}


def _episode_extents(table: TrainingTable) -> tuple[np.ndarray, np.ndarray]:
    """(each row's episode end, each episode's length in control steps) of ``table``."""
    starts, ends, _ = episode_runs(table.episode)
    lengths = ends - starts
    return np.repeat(ends, lengths), lengths


# ---------------------------------------------------------------------------------------------
# Training pieces
# ---------------------------------------------------------------------------------------------
def lr_at(lr: float, steps: int, step: int) -> float:
    """Cosine from ``lr`` at step 1 towards 0 after ``steps`` (restarted every stage)."""
    return lr * 0.5 * (1.0 + math.cos(math.pi * (step - 1) / max(steps, 1)))


def sequence_update_step(policy: TaskConditionedMLP, batch: TensorBatch,
                         optim: torch.optim.Optimizer,
                         penalty: Callable[[], torch.Tensor] | None = None
                         ) -> dict[str, torch.Tensor]:
    """One optimizer step: mean behaviour-cloning loss of the batch plus the consolidation
    penalty (EWC), if any.

    Returns:
        Detached ``loss`` (behaviour cloning) and ``penalty`` (0 without one).
    """
    policy.train()
    per_sample, _ = policy.loss(batch)
    loss = per_sample.mean()
    pen = penalty() if penalty is not None else torch.zeros(())
    optim.zero_grad(set_to_none=True)
    (loss + pen).backward()
    optim.step()
    return {"loss": loss.detach(), "penalty": pen.detach()}


class EWC:
    """Online elastic weight consolidation: ``lambda/2 * sum F (theta - theta*)^2``.

    The Fisher of each finished task (mean of squared minibatch gradients of its loss) is
    normalized to mean 1 over all parameters (so ``lambda`` does not depend on the loss scale),
    then added to the running Fisher after decaying it by ``gamma``; the anchor is the
    parameters at the end of the latest stage.
    """

    def __init__(self, lam: float, gamma: float):
        self.lam = lam
        self.gamma = gamma
        self.fisher: dict[str, torch.Tensor] = {}
        self.anchor: dict[str, torch.Tensor] = {}

    def consolidate(self, policy: torch.nn.Module, fisher: Mapping[str, torch.Tensor]) -> None:
        total = sum(float(f.sum()) for f in fisher.values())
        count = sum(f.numel() for f in fisher.values())
        scale = count / total if total > 0 else 0.0
        for name, value in fisher.items():
            prior = self.fisher.get(name)
            value = value * scale
            self.fisher[name] = value if prior is None else self.gamma * prior + value
        self.anchor = {n: p.detach().clone() for n, p in policy.named_parameters()}

    def penalty(self, policy: torch.nn.Module) -> Callable[[], torch.Tensor] | None:
        if self.lam <= 0 or not self.fisher:
            return None
        params = [(p, self.fisher[n], self.anchor[n]) for n, p in policy.named_parameters()
                  if p.requires_grad]

        def compute() -> torch.Tensor:
            return 0.5 * self.lam * sum((f * (p - a).pow(2)).sum() for p, f, a in params)
        return compute

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {f"ewc.fisher.{n}": v for n, v in self.fisher.items()}
        out.update({f"ewc.anchor.{n}": v for n, v in self.anchor.items()})
        return out


def fisher_diagonal(policy: TaskConditionedMLP, draw: Callable[[int], TensorBatch],
                    batches: int, batch_size: int) -> dict[str, torch.Tensor]:
    """Diagonal empirical Fisher of the behaviour-cloning loss: mean over ``batches``
    minibatches of the squared gradient of every parameter (frozen ones included: their
    sensitivity still counts for the choice of what to freeze next)."""
    named = list(policy.named_parameters())
    flags = [p.requires_grad for _, p in named]
    for _, p in named:
        p.requires_grad_(True)
    out = {n: torch.zeros_like(p) for n, p in named}
    policy.eval()
    try:
        for _ in range(batches):
            batch = draw(batch_size)
            per, _ = policy.loss(batch)
            policy.zero_grad(set_to_none=True)
            per.mean().backward()
            for n, p in named:
                out[n] += p.grad.detach().pow(2)
    finally:
        policy.zero_grad(set_to_none=True)
        for (_, p), flag in zip(named, flags):
            p.requires_grad_(flag)
    return {n: v / batches for n, v in out.items()}


def most_sensitive(policy: torch.nn.Module, fisher: Mapping[str, torch.Tensor],
                   frozen: Sequence[str], count: int) -> list[str]:
    """The ``count`` most sensitive layers not frozen yet (mean Fisher per parameter), never
    every remaining one (one layer stays trainable)."""
    groups = layer_groups(policy)
    scores = {g: float(torch.cat([fisher[n].reshape(-1) for n, _ in params]).mean())
              for g, params in groups.items() if g not in frozen}
    order = sorted(scores, key=lambda g: (-scores[g], g))
    return order[:max(0, min(count, len(order) - 1))]


def sensitivities(policy: torch.nn.Module, fisher: Mapping[str, torch.Tensor]
                  ) -> dict[str, float]:
    return {g: float(torch.cat([fisher[n].reshape(-1) for n, _ in params]).mean())
            for g, params in layer_groups(policy).items()}


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------
def newcombe_diff(k1: int, n1: int, k0: int, n0: int, confidence: float = 0.95
                  ) -> dict[str, float | None]:
    """``p1 - p0`` with Newcombe's hybrid Wilson score interval (method 10)."""
    if n1 == 0 or n0 == 0:
        return {"value": None, "low": None, "high": None}
    a, b = wilson(k1, n1, confidence), wilson(k0, n0, confidence)
    p1, p0 = k1 / n1, k0 / n0
    d = p1 - p0
    low = d - math.sqrt((p1 - a.low) ** 2 + (b.high - p0) ** 2)
    high = d + math.sqrt((a.high - p1) ** 2 + (p0 - b.low) ** 2)
    return {"value": _r(d), "low": _r(max(-1.0, low)), "high": _r(min(1.0, high))}


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.6g}")


def _neg(x: float | None) -> float | None:
    value = None if x is None else _r(-x)
    return None if value is None else value + 0.0      # no -0.0 in the report


def pooled(counts: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Wilson estimate of pooled counts [(successes, n), ...]."""
    k = sum(c[0] for c in counts)
    n = sum(c[1] for c in counts)
    return wilson(k, n).to_dict()


def transfer_metrics(matrix: Sequence[Sequence[tuple[int, int]]],
                     init: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Average final success, backward transfer, forgetting and forward transfer of a success
    matrix ``matrix[i][j] = (successes, n)`` of task j after stage i, ``init[j]`` the untrained
    network's; differences pooled over tasks with Newcombe intervals."""
    last = len(matrix) - 1
    final = matrix[-1]
    out: dict[str, Any] = {"average_final_success": pooled(final)}
    if last > 0:
        k1 = sum(final[j][0] for j in range(last))
        k0 = sum(matrix[j][j][0] for j in range(last))
        n1 = sum(final[j][1] for j in range(last))
        n0 = sum(matrix[j][j][1] for j in range(last))
        bwt = newcombe_diff(k1, n1, k0, n0)
        out["backward_transfer"] = bwt
        out["forgetting"] = {"value": _neg(bwt["value"]), "low": _neg(bwt["high"]),
                             "high": _neg(bwt["low"])}
        out["backward_transfer_per_task"] = [
            newcombe_diff(final[j][0], final[j][1], matrix[j][j][0], matrix[j][j][1])
            for j in range(last)]
        k1 = sum(matrix[j - 1][j][0] for j in range(1, last + 1))
        n1 = sum(matrix[j - 1][j][1] for j in range(1, last + 1))
        k0 = sum(init[j][0] for j in range(1, last + 1))
        n0 = sum(init[j][1] for j in range(1, last + 1))
        out["forward_transfer"] = newcombe_diff(k1, n1, k0, n0)
    return out


def loss_transfer(losses: Sequence[Sequence[float | None]], init: Sequence[float | None]
                  ) -> dict[str, Any]:
    """The same summaries on held-out validation loss (lower is better): mean final loss,
    loss forgetting ``mean_j<T (L[T,j] - L[j,j])``, forward ``mean_j>1 (L[j-1,j] - L0[j])``."""
    last = len(losses) - 1
    if any(v is None for row in [*losses, init] for v in row):   # a dataset without val split
        return {"average_final_val_loss": None}
    out: dict[str, Any] = {"average_final_val_loss": _r(float(np.mean(losses[-1])))}
    if last > 0:
        out["val_loss_forgetting"] = _r(float(np.mean(
            [losses[-1][j] - losses[j][j] for j in range(last)])))
        out["val_loss_forward_transfer"] = _r(float(np.mean(
            [losses[j - 1][j] - init[j] for j in range(1, last + 1)])))
    return out


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class SequenceResult:
    """Outcome of :func:`run_sequence`."""

    report_id: str
    report: dict[str, Any]
    checkpoints: dict[str, list[str]]
    wall_s: float


class _Run:
    """State shared by the methods of one sequence run."""

    def __init__(self, store: ArtifactStore, cfg: SequenceConfig, dataset_ids: Sequence[str],
                 log: Callable[[str], None]):
        from clawgym_ros.training.data import open_training_table

        self.store = store
        self.cfg = cfg
        self.log = log
        tables = [open_training_table(store, [d]) for d in dataset_ids]
        action_spec = tables[0].action_spec
        for i, table in enumerate(tables):
            if table.action_spec != action_spec:
                raise ConfigError(f"--dataset[{i}]", dataset_ids[i][:12],
                                  "a dataset with the action layout of the first ("
                                  + ", ".join(f"{k}:{w}" for k, w in action_spec.items())
                                  + "); it has " + ", ".join(
                                      f"{k}:{w}" for k, w in table.action_spec.items()))
        self.action_spec = dict(action_spec)
        self.layout = UnionLayout.build(cfg.tasks, [t.obs_spec for t in tables])
        union = self.layout.spec
        features = tuple(f for f in cfg.features if all(k in union for k in FEATURES[f]))
        self.spec = PolicySpec(
            type=POLICY_TASK_MLP, obs_dim=self.layout.dim,
            act_dim=int(tables[0].action.shape[1]), hidden=cfg.hidden, chunk=cfg.chunk,
            features=features, obs_layout=self.layout.keys,
            relative=relative_parts(C.ACTION_MODE_DELTA, union, self.action_spec))
        self.init = build_policy(self.spec, seed=cfg.seed)
        assert isinstance(self.init, TaskConditionedMLP)
        self.data: list[TaskData] = []
        for t, (task, table, did) in enumerate(zip(cfg.tasks, tables, dataset_ids)):
            cols = self.layout.columns(t)
            obs = self.layout.to_union(np.asarray(table.obs), t, cols)
            row_ends, lengths = _episode_extents(table)
            stats = _stats(obs, np.asarray(table.action), row_ends, self.init, cfg.chunk)
            self.init.set_task_stats(t, stats)
            sampler = TableSampler(table, val_fraction=cfg.val_fraction, chunk=cfg.chunk,
                                   seed=cfg.seed, resident_budget_mb=64.0,
                                   batch_size=cfg.batch_size, shift=1)
            td = TaskData(task, did, table, sampler, cols, stats,
                          longest=int(np.max(lengths, initial=0)))
            val = sampler.validation(cfg.val_samples, cfg.seed)
            if val is not None:
                td.val_obs = torch.from_numpy(self.layout.to_union(val.obs, t, cols))
                td.val_action = torch.from_numpy(val.action)
            self.data.append(td)
        self.stage_cache: dict[str, tuple[str, TaskConditionedMLP, dict[str, Any]]] = {}
        self.eval_cache: dict[str, dict[str, Any]] = {}

    # --- batches ---------------------------------------------------------------------------
    def tensors(self, t: int, rows: np.ndarray, ends: np.ndarray,
                policy: TaskConditionedMLP) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalized network input and targets of task ``t``'s table rows."""
        batch = self.data[t].sampler.gather(rows, ends)
        raw = torch.from_numpy(self.layout.to_union(batch.obs, t, self.data[t].cols))
        action = torch.from_numpy(batch.action)
        with torch.no_grad():
            obs = policy.normalize_obs(raw)
            idx = torch.full((len(rows),), t, dtype=torch.int64)
            target = policy.normalize_task_action(policy.to_relative(action, raw), idx)
        return obs, target

    def draw(self, t: int, n: int, gen: torch.Generator, policy: TaskConditionedMLP
             ) -> tuple[torch.Tensor, torch.Tensor]:
        train = self.data[t].sampler.train
        u = torch.randint(train.rows, (n,), generator=gen).numpy()
        return self.tensors(t, *train.locate(u), policy)

    def batch(self, parts: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> TensorBatch:
        obs = torch.cat([p[0] for p in parts])
        target = torch.cat([p[1] for p in parts])
        return TensorBatch(obs, target, torch.zeros(obs.shape[0], dtype=torch.int64))

    # --- evaluation ------------------------------------------------------------------------
    def val_loss(self, policy: TaskConditionedMLP, t: int) -> float:
        td = self.data[t]
        if td.val_obs is None:
            return math.nan
        policy.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for lo in range(0, td.val_obs.shape[0], _VAL_CHUNK):
                raw = td.val_obs[lo:lo + _VAL_CHUNK]
                idx = torch.full((raw.shape[0],), t, dtype=torch.int64)
                target = policy.normalize_task_action(
                    policy.to_relative(td.val_action[lo:lo + _VAL_CHUNK], raw), idx)
                per, _ = policy.loss(TensorBatch(policy.normalize_obs(raw), target, idx))
                total += float(per.double().sum())
                count += raw.shape[0]
        return total / max(count, 1)

    def episodes(self, task: str) -> list[Any]:
        from clawgym_ros.evaluation.suites import EpisodeSpec, _crc, derive_seed
        from clawgym_ros.tasks.registry import get_task

        templates = get_task(task).training_templates
        specs = []
        for rep in range(self.cfg.eval_episodes):
            seed = derive_seed(self.cfg.seed, _EVAL_KEY, _crc(task), rep)
            specs.append(EpisodeSpec(
                index=rep, task=task, template=templates[rep % len(templates)],
                split=C.SPLIT_TRAIN, family=C.FAMILY_NONE, families=(), intensity=0.0,
                schedule="constant", seed=seed, perturbation_seed=seed))
        return specs

    def eval_limit(self, t: int) -> int:
        """Control steps per evaluation episode of task ``t``: ``max_steps`` or the env's
        limit, cut to ``eval_steps_factor`` x its longest demonstration when that is set."""
        from clawgym_ros.tasks.registry import task_entry

        limit = self.cfg.max_steps or task_entry(self.cfg.tasks[t]).max_episode_steps
        if self.cfg.eval_steps_factor and self.data[t].longest:
            limit = min(limit, math.ceil(self.cfg.eval_steps_factor * self.data[t].longest))
        return int(limit)

    def evaluate(self, key: str, policy: TaskConditionedMLP) -> dict[str, Any]:
        """Success (held-out seeds) and validation loss of every task (memoized by ``key``)."""
        if key in self.eval_cache:
            return self.eval_cache[key]
        from clawgym_ros.evaluation.rollout import RolloutOptions, Runner

        out: dict[str, Any] = {"success": {}, "val_loss": {}, "episodes": {}, "max_steps": {}}
        for t, task in enumerate(self.cfg.tasks):
            out["val_loss"][task] = _r(self.val_loss(policy, t))
            if not self.cfg.eval_episodes:
                continue
            limit = self.eval_limit(t) if self.cfg.eval_steps_factor else self.cfg.max_steps
            out["max_steps"][task] = limit
            runner = Runner(TaskPolicy(policy, self.layout, task, self.action_spec),
                            RolloutOptions(world="task", max_steps=limit,
                                           failure_states=False))
            try:
                flags = [bool(runner.run(spec).success) for spec in self.episodes(task)]
            finally:
                runner.close()
            est = wilson(sum(flags), len(flags)).to_dict()
            out["success"][task] = {"successes": sum(flags), **est}
            out["episodes"][task] = [int(f) for f in flags]
        self.eval_cache[key] = out
        self.log(f"  eval {key[:12]}: " + ", ".join(
            f"{task} {out['success'].get(task, {}).get('value')} "
            f"(val {out['val_loss'][task]})" for task in self.cfg.tasks))
        return out


def _key(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _train_stage(run: _Run, policy: TaskConditionedMLP, *, method: str, stage: int,
                 parent: str | None, ewc: EWC | None, memory: list[np.ndarray] | None,
                 frozen: Sequence[str], key: str) -> dict[str, Any]:
    """Train ``policy`` in place for one stage; returns its loss history summary."""
    cfg = run.cfg
    steps = cfg.steps * (len(cfg.tasks) if method == METHOD_JOINT else 1)
    from clawgym_ros.evaluation.suites import derive_seed

    # Seeded by the stage alone: the first stage of naive and consolidated is one training.
    gen = torch.Generator().manual_seed(derive_seed(cfg.seed, stage))
    for name, param in policy.named_parameters():
        param.requires_grad_(name.rsplit(".", 1)[0] not in frozen)
    trainable = [p for p in policy.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.0)
    penalty = ewc.penalty(policy) if ewc is not None else None
    replay = np.concatenate(memory) if memory else np.zeros((0, 3), np.int64)
    n_replay = int(round(cfg.rehearsal_share * cfg.batch_size)) if len(replay) else 0
    history = []
    win_loss, win_pen, win = 0.0, 0.0, 0
    log_every = max(1, steps // 10)
    for step in range(1, steps + 1):
        for group in optim.param_groups:
            group["lr"] = lr_at(cfg.lr, steps, step)
        if method == METHOD_JOINT:
            share = [cfg.batch_size // len(cfg.tasks)] * len(cfg.tasks)
            share[0] += cfg.batch_size - sum(share)
            parts = [run.draw(t, n, gen, policy) for t, n in enumerate(share)]
        else:
            parts = [run.draw(stage, cfg.batch_size - n_replay, gen, policy)]
            if n_replay:
                pick = replay[torch.randint(len(replay), (n_replay,), generator=gen).numpy()]
                for t in np.unique(pick[:, 0]):
                    sel = pick[pick[:, 0] == t]
                    parts.append(run.tensors(int(t), sel[:, 1], sel[:, 2], policy))
        metrics = sequence_update_step(policy, run.batch(parts), optim, penalty)
        win_loss += float(metrics["loss"])
        win_pen += float(metrics["penalty"])
        win += 1
        if step % log_every == 0 or step == steps:
            history.append({"step": step, "loss": _r(win_loss / win),
                            "penalty": _r(win_pen / win)})
            win_loss, win_pen, win = 0.0, 0.0, 0
    what = "all tasks" if method == METHOD_JOINT else f"stage {stage} ({cfg.tasks[stage]})"
    run.log(f"  {method} {what}: "
            f"{steps} steps, loss {history[-1]['loss']}, penalty {history[-1]['penalty']}")
    return {"steps": steps, "history": history}


def _commit_stage(run: _Run, policy: TaskConditionedMLP, *, key: str, method: str, stage: int,
                  parent: str | None, dataset_ids: Sequence[str], frozen: Sequence[str],
                  ewc: EWC | None, memory_rows: Mapping[str, int], trained: Mapping[str, Any]
                  ) -> Artifact:
    cfg = run.cfg
    work_dir = run.store.run_dir / C.DIR_TRAIN_WORK / key
    shutil.rmtree(work_dir, ignore_errors=True)
    meta = {
        "format": ckpt.CHECKPOINT_FORMAT, "sequence_config": cfg.to_json(),
        "policy_spec": run.spec.to_json(), "obs_spec": ckpt.spec_pairs(run.layout.spec),
        "action_spec": ckpt.spec_pairs(run.action_spec), "layout": run.layout.to_json(),
        "method": method, "stage": stage, "dataset_ids": list(dataset_ids),
        "init_checkpoint": parent, "frozen_layers": list(frozen),
    }
    tensors = ewc.tensors() if ewc is not None and ewc.fisher else {}
    if not tensors:
        tensors = {"none": torch.zeros(1)}
    ckpt.write_step(work_dir, trained["steps"], policy=policy, meta=meta, state_tensors=tensors,
                    state_json={"memory_rows": dict(memory_rows), "frozen_layers": list(frozen)})
    parents = list(dict.fromkeys(list(dataset_ids) + ([parent] if parent else [])))
    content = {"method": method, "stage": stage, "tasks": list(cfg.tasks),
               "history": trained["history"], "work_key": key, "dataset_ids": list(dataset_ids),
               "frozen_layers": list(frozen), "memory_rows": dict(memory_rows)}
    artifact = ckpt.commit_checkpoint(
        run.store, work_dir, trained["steps"], summary_content=content,
        config={**cfg.to_json(), "method": method, "stage": stage, "init_checkpoint": parent},
        seed=cfg.seed, parents=parents,
        summary={"method": method, "stage": stage, "policy": POLICY_TASK_MLP,
                 "train_loss": trained["history"][-1]["loss"]})
    shutil.rmtree(work_dir, ignore_errors=True)
    return artifact


def _memory(run: _Run, upto: int) -> tuple[list[np.ndarray], dict[str, int]]:
    """Rehearsal memory after stage ``upto``: ``rehearsal_rows`` split evenly over tasks
    0..upto, each a prefix of a fixed seeded permutation of its train rows (a shrinking share
    keeps a subset). Rows are (task, table row, end of its episode)."""
    from clawgym_ros.evaluation.suites import derive_seed

    cfg = run.cfg
    per = cfg.rehearsal_rows // (upto + 1)
    out, counts = [], {}
    for t in range(upto + 1):
        train = run.data[t].sampler.train
        rng = np.random.default_rng(derive_seed(cfg.seed, 7, t))
        u = rng.permutation(train.rows)[:per]
        rows, ends = train.locate(u)
        out.append(np.stack([np.full(len(u), t), rows, ends], axis=1).astype(np.int64))
        counts[cfg.tasks[t]] = int(len(u))
    return out, counts


def _drawer(run: _Run, t: int, policy: TaskConditionedMLP) -> Callable[[int], TensorBatch]:
    """Minibatches of task ``t``'s train rows from a generator of their own (Fisher)."""
    from clawgym_ros.evaluation.suites import derive_seed

    gen = torch.Generator().manual_seed(derive_seed(run.cfg.seed, 11, t))

    def draw(n: int) -> TensorBatch:
        return run.batch([run.draw(t, n, gen, policy)])
    return draw


def _sequential(run: _Run, method: str) -> dict[str, Any]:
    cfg = run.cfg
    policy = build_policy(run.spec, seed=cfg.seed)
    policy.load_state_dict(run.init.state_dict())
    consolidate = method == METHOD_CONSOLIDATED
    ewc = EWC(cfg.ewc_lambda, cfg.ewc_gamma) if consolidate else None
    frozen: list[str] = []
    memory: list[np.ndarray] | None = None
    memory_rows: dict[str, int] = {}
    parent: str | None = None
    stages = []
    for stage, task in enumerate(cfg.tasks):
        settings: dict[str, Any] = {"kind": "sequential"}
        if stage > 0:
            settings = {"kind": method}
            if consolidate:
                settings.update({k: getattr(cfg, k) for k in (
                    "rehearsal_rows", "rehearsal_share", "ewc_lambda", "ewc_gamma",
                    "fisher_batches", "fisher_batch_size", "freeze_layers")})
        train_cfg = {k: v for k, v in cfg.to_json().items() if k in _TRAIN_KEYS}
        key = _key({"stage": stage, "tasks": list(cfg.tasks), "parent": parent,
                    "datasets": [d.dataset_id for d in run.data], "settings": settings,
                    "train": train_cfg, "format": ckpt.CHECKPOINT_FORMAT})
        if key in run.stage_cache:
            art_id, cached, record = run.stage_cache[key]
            policy.load_state_dict(cached.state_dict())
        else:
            with deterministic(cfg.num_threads):
                trained = _train_stage(run, policy, method=method, stage=stage, parent=parent,
                                       ewc=ewc, memory=memory if consolidate else None,
                                       frozen=frozen, key=key)
            art = _commit_stage(run, policy, key=key, method=method, stage=stage,
                                parent=parent, dataset_ids=[run.data[stage].dataset_id],
                                frozen=frozen, ewc=ewc, memory_rows=memory_rows,
                                trained=trained)
            art_id = art.id
            snapshot = build_policy(run.spec)
            snapshot.load_state_dict(policy.state_dict())
            record = {"checkpoint": art_id, "task": task, "steps": trained["steps"],
                      "final_loss": trained["history"][-1]["loss"]}
            run.stage_cache[key] = (art_id, snapshot, record)
        evaluation = run.evaluate(art_id, policy)
        entry = {**record, "frozen_layers": list(frozen), "memory_rows": dict(memory_rows),
                 **evaluation}
        if consolidate and stage < len(cfg.tasks) - 1:
            with deterministic(cfg.num_threads):
                fisher = fisher_diagonal(policy, _drawer(run, stage, policy),
                                         cfg.fisher_batches, cfg.fisher_batch_size)
                ewc.consolidate(policy, fisher)
                entry["sensitivity"] = {g: _r(s) for g, s in
                                        sensitivities(policy, ewc.fisher).items()}
                if cfg.freeze_layers:
                    frozen.extend(most_sensitive(policy, ewc.fisher, frozen, cfg.freeze_layers))
                if cfg.rehearsal_rows:
                    memory, memory_rows = _memory(run, stage)
        stages.append(entry)
        parent = art_id
    return {"stages": stages}


def _joint(run: _Run) -> dict[str, Any]:
    cfg = run.cfg
    policy = build_policy(run.spec, seed=cfg.seed)
    policy.load_state_dict(run.init.state_dict())
    key = _key({"joint": True, "tasks": list(cfg.tasks),
                "datasets": [d.dataset_id for d in run.data],
                "train": {k: v for k, v in cfg.to_json().items() if k in _TRAIN_KEYS},
                "format": ckpt.CHECKPOINT_FORMAT})
    with deterministic(cfg.num_threads):
        trained = _train_stage(run, policy, method=METHOD_JOINT, stage=len(cfg.tasks),
                               parent=None, ewc=None, memory=None, frozen=(), key=key)
    art = _commit_stage(run, policy, key=key, method=METHOD_JOINT, stage=len(cfg.tasks) - 1,
                        parent=None, dataset_ids=[d.dataset_id for d in run.data], frozen=(),
                        ewc=None, memory_rows={}, trained=trained)
    evaluation = run.evaluate(art.id, policy)
    return {"stages": [{"checkpoint": art.id, "task": "+".join(cfg.tasks),
                        "steps": trained["steps"],
                        "final_loss": trained["history"][-1]["loss"], **evaluation}]}


def summarize(cfg: SequenceConfig, methods: Mapping[str, Any], init_eval: Mapping[str, Any]
              ) -> dict[str, Any]:
    """Per-method transfer metrics and the acceptance comparisons (issue 22)."""
    tasks = cfg.tasks

    def counts(ev: Mapping[str, Any]) -> list[tuple[int, int]]:
        return [(int(ev["success"][t]["successes"]), int(ev["success"][t]["n"]))
                if t in ev["success"] else (0, 0) for t in tasks]

    init_c = counts(init_eval)
    init_l = [init_eval["val_loss"][t] for t in tasks]
    out: dict[str, Any] = {}
    for method, data in methods.items():
        stages = data["stages"]
        m: dict[str, Any] = {}
        if method == METHOD_JOINT:
            m["average_final_success"] = pooled(counts(stages[-1]))
            m.update(loss_transfer([[stages[-1]["val_loss"][t] for t in tasks]], init_l))
        else:
            if cfg.eval_episodes:
                m.update(transfer_metrics([counts(s) for s in stages], init_c))
            m.update(loss_transfer([[s["val_loss"][t] for t in tasks] for s in stages], init_l))
        out[method] = m
    acceptance: dict[str, Any] = {}
    naive, cons, joint = (out.get(k) for k in METHODS)
    if naive and cons and "forgetting" in naive and "forgetting" in cons:
        f_n, f_c = naive["forgetting"]["value"], cons["forgetting"]["value"]
        acceptance["forgetting_naive"] = f_n
        acceptance["forgetting_consolidated"] = f_c
        acceptance["forgetting_at_most_half_of_naive"] = (
            None if f_n is None or f_c is None else bool(f_c <= 0.5 * f_n)
            if f_n > 0 else None)
    if cons and joint and cfg.eval_episodes:
        a_c = cons["average_final_success"]["value"]
        a_j = joint["average_final_success"]["value"]
        acceptance["average_final_success_consolidated"] = a_c
        acceptance["average_final_success_joint"] = a_j
        acceptance["within_0.1_of_joint"] = None if a_c is None or a_j is None \
            else bool(a_c >= a_j - 0.1)
    out["acceptance"] = acceptance
    return out


def run_sequence(run_dir: str, cfg: SequenceConfig, dataset_refs: Sequence[str],
                 log: Callable[[str], None] | None = None) -> SequenceResult:
    """Train the sequence with every method of ``cfg``, evaluate, commit the report.

    Args:
        run_dir: run directory holding the datasets (checkpoints and the report go there).
        cfg: settings.
        dataset_refs: one dataset id (or prefix) per task, in sequence order.
        log: progress lines (default: none).

    Returns:
        A :class:`SequenceResult` with the report artifact id.

    Raises:
        ConfigError: a dataset count or task mismatch, different action layouts (before
            anything is trained or committed).
    """
    log = log or (lambda _line: None)
    start = time.perf_counter()
    store = ArtifactStore(run_dir)
    dataset_ids = check_datasets(store, cfg.tasks, dataset_refs)
    torch.set_num_threads(cfg.num_threads)
    run = _Run(store, cfg, dataset_ids, log)
    # The untrained network: the reference of forward transfer.
    init_eval = run.evaluate("init", run.init)
    methods: dict[str, Any] = {}
    for method in cfg.methods:
        log(f"method {method}")
        methods[method] = _joint(run) if method == METHOD_JOINT else _sequential(run, method)
    report = {
        "kind": "incremental_learning", "config": cfg.to_json(), "datasets": dataset_ids,
        "layout": run.layout.to_json(), "policy_spec": run.spec.to_json(),
        "confidence": 0.95, "z": _r(z_value(0.95)),
        "init": init_eval, "methods": methods, "metrics": summarize(cfg, methods, init_eval),
    }
    checkpoints = {m: [s["checkpoint"] for s in d["stages"]] for m, d in methods.items()}
    parents = list(dict.fromkeys([c for ids in checkpoints.values() for c in ids]))
    with store.stage(C.KIND_REPORT) as staging:
        (staging.path / FILE_SEQUENCE_REPORT).write_text(ckpt.dump_json(report))
        artifact = staging.commit(config=cfg, seeds={"train": cfg.seed}, parents=parents,
                                  summary={"kind": "incremental_learning",
                                           "tasks": list(cfg.tasks),
                                           "acceptance": report["metrics"]["acceptance"]})
    return SequenceResult(artifact.id, report, checkpoints, time.perf_counter() - start)
