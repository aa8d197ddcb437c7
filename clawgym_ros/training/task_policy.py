"""The task-conditioned policy of ``clawgym train --sequence`` (type ``task_mlp``): its union
observation layout, the network with per-task normalization, and :class:`TaskPolicy`, the
network behind the evaluator's Policy protocol, told each episode's task by ``set_task``.

Layout. The arm tasks observe different keys (pick_place has a place goal and two objects,
peg_insert two objects and no goal, pill_handover one object and the hand state) and share one
action layout. The policy reads a declared *union layout*: every key of any task of the
sequence, at its largest width, in first-seen order; keys (or object slots) a task lacks are
zeros, and a task one-hot (``task`` key) follows. A checkpoint records the layout in its
config.json (``layout``), so it loads back as a :class:`TaskPolicy` for any of its tasks
(:func:`load_task_policy`, called by :func:`~clawgym_ros.training.checkpoint.load_policy`).

Training lives in :mod:`clawgym_ros.training.sequence` (it also evaluates, a layer up).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from clawgym_ros import constants as C
from clawgym_ros.errors import CheckpointError, ClawgymError, ConfigError
from clawgym_ros.training.policies import MLPPolicy, PolicySpec, unflatten_action
from clawgym_ros.training.registry import register_policy

if TYPE_CHECKING:
    from clawgym_ros.training.checkpoint import LoadedCheckpoint

#: Policy type of the task-conditioned network.
POLICY_TASK_MLP = C.POLICY_TASK_MLP
#: Observation key of the task one-hot (last key of the union layout).
OBS_TASK = "task"


# ---------------------------------------------------------------------------------------------
# Union layout
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UnionLayout:
    """The declared observation layout of a task sequence.

    Attributes:
        tasks: the sequence.
        keys: ordered (key, width) of the union (largest width of each key), task one-hot last.
        task_keys: per task, the (key, width) pairs its observations have.
    """

    tasks: tuple[str, ...]
    keys: tuple[tuple[str, int], ...]
    task_keys: tuple[tuple[tuple[str, int], ...], ...]

    @classmethod
    def build(cls, tasks: Sequence[str], specs: Sequence[Mapping[str, int]]) -> UnionLayout:
        widths: dict[str, int] = {}
        for spec in specs:
            for key, width in spec.items():
                widths[key] = max(widths.get(key, 0), int(width))
        if OBS_TASK in widths:
            raise ClawgymError(f"observation key {OBS_TASK!r} is reserved for the task one-hot")
        widths[OBS_TASK] = len(tasks)
        return cls(tuple(tasks), tuple(widths.items()),
                   tuple(tuple((k, int(w)) for k, w in s.items()) for s in specs))

    @property
    def spec(self) -> dict[str, int]:
        return dict(self.keys)

    @property
    def dim(self) -> int:
        return sum(w for _, w in self.keys)

    def columns(self, t: int) -> np.ndarray:
        """Union columns of task ``t``'s observation vector (in its table's order)."""
        at = dict(zip(self.spec, np.cumsum([0, *self.spec.values()])[:-1].tolist()))
        return np.concatenate([np.arange(at[k], at[k] + w) for k, w in self.task_keys[t]]
                              ).astype(np.int64)

    def to_union(self, obs: np.ndarray, t: int, cols: np.ndarray | None = None) -> np.ndarray:
        """Task ``t``'s observation rows (B, its width) -> union rows with its one-hot."""
        cols = self.columns(t) if cols is None else cols
        out = np.zeros((obs.shape[0], self.dim), dtype=np.float32)
        out[:, cols] = obs
        out[:, self.dim - len(self.tasks) + t] = 1.0
        return out

    def to_json(self) -> dict[str, Any]:
        return {"tasks": list(self.tasks), "keys": [[k, w] for k, w in self.keys],
                "task_keys": {t: [[k, w] for k, w in keys]
                              for t, keys in zip(self.tasks, self.task_keys)}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnionLayout:
        """Inverse of :meth:`to_json` (the layout a checkpoint's config.json records).

        Raises:
            CheckpointError: a malformed layout.
        """
        try:
            tasks = tuple(str(t) for t in data["tasks"])
            keys = tuple((str(k), int(w)) for k, w in data["keys"])
            task_keys = tuple(tuple((str(k), int(w)) for k, w in data["task_keys"][t])
                              for t in tasks)
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"malformed union layout in a {POLICY_TASK_MLP} checkpoint "
                                  f"({type(err).__name__}: {err})") from None
        widths = dict(keys)
        if not tasks or widths.get(OBS_TASK) != len(tasks) or any(
                widths.get(k, -1) < w for spec in task_keys for k, w in spec):
            raise CheckpointError(f"malformed union layout in a {POLICY_TASK_MLP} checkpoint: "
                                  f"tasks {list(tasks)}, keys {list(keys)}")
        return cls(tasks, keys, task_keys)


# ---------------------------------------------------------------------------------------------
# The task-conditioned policy
# ---------------------------------------------------------------------------------------------
@register_policy(POLICY_TASK_MLP)
class TaskConditionedMLP(MLPPolicy):
    """The ``mlp`` network on the union layout (task one-hot included), with per-task
    normalization: rows of ``task_obs_mean``/``task_obs_std``/``task_action_mean``/
    ``task_action_std`` (buffers, saved with the weights), chosen by the one-hot.

    Parameter groups are the ``mlp``'s (encoder, trunk, head); consolidation works per layer
    (:func:`layer_groups`).
    """

    def __init__(self, spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 options: Any = None):
        super().__init__(spec, stats, options)
        layout = dict(spec.obs_layout)
        if OBS_TASK not in layout:
            raise ClawgymError(f"a {POLICY_TASK_MLP} policy needs the {OBS_TASK!r} key")
        self.num_tasks = int(layout[OBS_TASK])
        self.task_at = spec.obs_dim - self.num_tasks
        n, d, a = self.num_tasks, spec.input_dim, spec.act_dim
        self.register_buffer("task_obs_mean", torch.zeros(n, d))
        self.register_buffer("task_obs_std", torch.ones(n, d))
        self.register_buffer("task_action_mean", torch.zeros(n, a))
        self.register_buffer("task_action_std", torch.ones(n, a))

    def set_task_stats(self, t: int, stats: Mapping[str, np.ndarray]) -> None:
        """Fill task ``t``'s normalization row (obs over the whole network input)."""
        with torch.no_grad():
            for name in ("obs_mean", "obs_std", "action_mean", "action_std"):
                getattr(self, f"task_{name}")[t] = torch.as_tensor(
                    np.asarray(stats[name], np.float32))

    def task_index(self, obs: torch.Tensor) -> torch.Tensor:
        """Task index of each raw observation row (argmax of its one-hot)."""
        return obs[:, self.task_at:self.task_at + self.num_tasks].argmax(dim=1)

    def normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        t = self.task_index(obs)
        return (self.featurizer(obs) - self.task_obs_mean[t]) / self.task_obs_std[t]

    def normalize_task_action(self, action: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return (action - self.task_action_mean[t][:, None]) / self.task_action_std[t][:, None]

    def act(self, state: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        t = self.task_index(state)
        pred = self(self.normalize_obs(state), image)
        raw = pred * self.task_action_std[t][:, None] + self.task_action_mean[t][:, None]
        return self.from_relative(raw, state)


class TaskPolicy:
    """A task-conditioned network behind the evaluator's Policy protocol: builds the union
    vector of the current task's observation (keys the task lacks are zeros) and appends the
    task's one-hot.

    The task is given here or, per episode, by :meth:`set_task` (the evaluator calls it before
    every episode: :func:`~clawgym_ros.evaluation.protocol.start_episode`); ``clawgym eval
    --checkpoint`` of a sequence checkpoint loads it this way (:func:`load_task_policy`).

    Args:
        model: the network (put in eval mode).
        layout: its union layout (the sequence's tasks, in one-hot order).
        task: the task to act for; None = set by :meth:`set_task` before acting.
        action_spec: action key -> width.
    """

    def __init__(self, model: TaskConditionedMLP, layout: UnionLayout, task: str | None,
                 action_spec: Mapping[str, int]):
        self.model = model.eval()
        self.layout = layout
        self.action_spec = dict(action_spec)
        self._queue: deque[np.ndarray] = deque()
        self.t: int | None = None
        self.keys: tuple[tuple[str, int], ...] = ()
        self.cols = np.zeros(0, np.int64)
        if task is not None:
            self.set_task(task)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks this network was trained on, in one-hot order."""
        return self.layout.tasks

    @property
    def task(self) -> str | None:
        """The task it acts for now."""
        return None if self.t is None else self.layout.tasks[self.t]

    @property
    def obs_spec(self) -> dict[str, int]:
        """The observation keys it reads for the current task (none before a task is set)."""
        return dict(self.keys)

    def set_task(self, task: str) -> None:
        """Act for ``task`` from now on (the queued chunk is dropped).

        Raises:
            ConfigError: a task the network was not trained on (naming them).
        """
        if task not in self.layout.tasks:
            raise ConfigError("task", task, "one of the tasks this checkpoint was trained on: "
                              + ", ".join(self.layout.tasks))
        if self.t is None or self.layout.tasks[self.t] != task:
            self.t = self.layout.tasks.index(task)
            self.keys = self.layout.task_keys[self.t]
            self.cols = self.layout.columns(self.t)
        self._queue.clear()

    def reset(self) -> None:
        self._queue.clear()

    def open_loop_steps(self) -> int:
        """Queued actions of the current chunk (acted on without reading the observation)."""
        return len(self._queue)

    def act(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        if not self._queue:
            if self.t is None:
                raise ClawgymError(f"a {POLICY_TASK_MLP} policy needs its task before acting "
                                   "(set_task: one of " + ", ".join(self.layout.tasks) + ")")
            parts = []
            for key, width in self.keys:
                if key not in obs:
                    raise ClawgymError(f"observation lacks key {key!r} of task "
                                       f"{self.layout.tasks[self.t]}")
                value = np.asarray(obs[key], dtype=np.float32).reshape(-1)
                if value.size != width:
                    raise ClawgymError(f"observation {key!r} has {value.size} values, "
                                       f"expected {width}")
                parts.append(value)
            vec = self.layout.to_union(np.concatenate(parts)[None], self.t, self.cols)
            with torch.inference_mode():
                chunk = self.model.act(torch.from_numpy(vec))[0]
            self._queue.extend(chunk.numpy().astype(np.float64))
        return unflatten_action(self._queue.popleft(), self.action_spec)


def load_task_policy(loaded: LoadedCheckpoint) -> TaskPolicy:
    """A loaded ``task_mlp`` checkpoint as a :class:`TaskPolicy` with no task set yet (the
    evaluator sets each episode's), from the union layout its config.json records.

    Raises:
        CheckpointError: no or a malformed layout, or one that does not fit its policy spec.
    """
    if "layout" not in loaded.meta:
        raise CheckpointError(f"checkpoint {loaded.artifact.id[:12]}: a {POLICY_TASK_MLP} "
                              "checkpoint without its union layout (config.json 'layout')")
    layout = UnionLayout.from_json(loaded.meta["layout"])
    if list(layout.keys) != list(loaded.spec.obs_layout):
        raise CheckpointError(f"checkpoint {loaded.artifact.id[:12]}: its union layout "
                              f"{list(layout.keys)} differs from its policy spec's "
                              f"{list(loaded.spec.obs_layout)}")
    model = loaded.build_model()
    assert isinstance(model, TaskConditionedMLP)
    return TaskPolicy(model, layout, None, loaded.action_spec)
