"""Streaming minibatches from a memory-mapped :class:`TrainingTable`.

Nothing of size O(rows) is copied into memory: episodes are found as runs of equal ``episode``
values (scanned in chunks), the train/validation split is a list of row ranges, and each
minibatch gathers its random rows straight from the mapped files. Pages that the gathers touch
count towards the process' resident set, so they are released (``madvise(MADV_DONTNEED)``, the
data stays in the page cache) whenever the bytes touched since the last release could exceed a
budget: peak RSS stays flat as the table grows.
"""

from __future__ import annotations

import dataclasses
import mmap
from collections.abc import Iterable

import numpy as np
import torch

from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.dataset.table import TABLE_FILE, TrainingTable
from clawgym_ros.errors import ClawgymError, ConfigError

_SCAN_ROWS = 1 << 20
_VAL_GATHER = 256
#: Bytes mapped per touched row and column: Linux maps 64 KiB around a faulting page of a file
#: mapping ("fault-around"), so a random gather maps far more than the rows it reads.
_FAULT_AROUND = 64 * 1024


@dataclasses.dataclass
class Batch:
    """One minibatch (numpy views/copies; converted to tensors by the loop)."""

    obs: np.ndarray  # float32 (B, obs_dim)
    action: np.ndarray  # float32 (B, chunk, act_dim)
    group: np.ndarray  # int64 (B,)
    image: np.ndarray | None  # uint8 (B, H, W, 3)
    #: float32 (B, act_dim): the action before each row's chunk (the row's own action with
    #: shift 1), for policies relative to their previous command; None when not asked for
    command: np.ndarray | None = None

    @classmethod
    def concat(cls, parts: list[Batch], images: bool = True) -> Batch:
        """The rows of ``parts`` in order as one batch (their images only with ``images``)."""
        def cat(name: str) -> np.ndarray | None:
            return None if getattr(parts[0], name) is None else \
                np.concatenate([getattr(p, name) for p in parts])
        return cls(obs=cat("obs"), action=cat("action"), group=cat("group"),
                   image=cat("image") if images else None, command=cat("command"))


def episode_runs(episode: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal consecutive episode values, scanned in chunks.

    Returns:
        ``(starts, ends, episode_ids)``, int64 arrays of one entry per run.
    """
    starts, ids = [], []
    previous = None
    for lo in range(0, len(episode), _SCAN_ROWS):
        chunk = np.asarray(episode[lo:lo + _SCAN_ROWS])
        change = np.flatnonzero(chunk[1:] != chunk[:-1]) + 1
        if previous is None or chunk[0] != previous:
            change = np.concatenate([[0], change])
        starts.append(change + lo)
        ids.append(chunk[change])
        previous = chunk[-1]
    if not starts:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    start = np.concatenate(starts).astype(np.int64)
    end = np.append(start[1:], len(episode)).astype(np.int64)
    return start, end, np.concatenate(ids).astype(np.int64)


class _Ranges:
    """A set of row ranges, sampled uniformly over its rows."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.starts = starts
        self.ends = ends
        self.offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64)

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])

    def locate(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions ``u`` in [0, rows) -> (table rows, end of each row's run)."""
        run = np.searchsorted(self.offsets, u, side="right") - 1
        return self.starts[run] + (u - self.offsets[run]), self.ends[run]


class TableSampler:
    """Random minibatches of the train split; a fixed validation set of held-out episodes.

    Args:
        table: the training table (memory-mapped).
        val_fraction: share of episodes held out (chosen with ``seed``).
        chunk: consecutive actions per sample (targets past an episode's end repeat its last).
        shift: the target chunk of row t starts at row t + shift (clipped to the episode's
            last row). Datasets record each step's observation *after* its action, so the
            action taken on the observation of row t is the one of row t + 1 (shift 1).
        obs_columns: columns of the observation vector the policy sees (None = all).
        seed: seed of the split.
        resident_budget_mb: mapped bytes allowed to stay resident between releases.
        batch_size: rows per minibatch (to size the release interval).
    """

    def __init__(self, table: TrainingTable, *, val_fraction: float, chunk: int, seed: int,
                 resident_budget_mb: float, batch_size: int, shift: int = 0,
                 obs_columns: np.ndarray | None = None, command: bool = False):
        if len(table) == 0:
            raise ClawgymError(f"training table {table.root} is empty")
        self.table = table
        self.chunk = chunk
        if command and shift < 1:
            raise ConfigError("action_shift", shift, "at least 1 for a policy relative to its "
                              "previous command (the action before a row's chunk)")
        self.shift = shift
        self.command = command
        self._offsets = (shift + np.arange(chunk, dtype=np.int64))[None, :]
        self.obs_columns = None if obs_columns is None else np.asarray(obs_columns, np.int64)
        self._obs = np.asarray(table.obs)
        self._action = np.asarray(table.action)
        self._group = np.asarray(table.group)
        self._image = None if table.image is None else np.asarray(table.image)
        starts, ends, ids = episode_runs(table.episode)
        episodes = np.unique(ids)
        n_val = int(round(val_fraction * len(episodes))) if len(episodes) > 1 else 0
        if val_fraction > 0 and len(episodes) > 1:
            n_val = min(max(n_val, 1), len(episodes) - 1)
        rng = np.random.default_rng(seed)
        val_eps = np.sort(rng.permutation(episodes)[:n_val])
        is_val = np.isin(ids, val_eps)
        self.train = _Ranges(starts[~is_val], ends[~is_val])
        self.val = _Ranges(starts[is_val], ends[is_val])
        self.train_episodes = len(episodes) - n_val
        self.val_episodes = n_val
        row_bytes = sum(a.strides[0] for a in self._arrays())
        touched_per_step = batch_size * (chunk + 2 + min(shift, 1)) * max(row_bytes,
                                                                         _FAULT_AROUND)
        self.budget_bytes = int(resident_budget_mb * 2**20)
        self.release_every = max(1, self.budget_bytes // touched_per_step)
        self.total_bytes = sum(a.nbytes for a in self._arrays())
        self._steps = 0
        self.release()

    @property
    def releases(self) -> bool:
        """Whether mapped pages are ever released (the table exceeds the budget)."""
        return self.total_bytes > self.budget_bytes

    @property
    def has_images(self) -> bool:
        return self._image is not None

    def _arrays(self) -> list[np.ndarray]:
        arrays = [self._obs, self._action, self._group]
        return arrays + ([self._image] if self._image is not None else [])

    def _maps(self) -> Iterable[mmap.mmap]:
        for column in ("obs", "action", "group", "episode", "image"):
            handle = getattr(getattr(self.table, column), "_mmap", None)
            if isinstance(handle, mmap.mmap):
                yield handle

    def release(self) -> None:
        """Drop this process' mappings of table pages (they stay in the OS page cache)."""
        for handle in self._maps():
            if hasattr(handle, "madvise"):
                handle.madvise(mmap.MADV_DONTNEED)

    def gather(self, rows: np.ndarray, ends: np.ndarray) -> Batch:
        """Rows of the table (and their action chunks) as a batch."""
        if self.chunk == 1 and self.shift == 0:
            action = np.take(self._action, rows, axis=0)[:, None, :]
        else:
            steps = np.minimum(rows[:, None] + self._offsets, ends[:, None] - 1)
            action = np.take(self._action, steps.reshape(-1), axis=0).reshape(
                len(rows), self.chunk, -1)
        image = None if self._image is None else np.take(self._image, rows, axis=0)
        obs = np.take(self._obs, rows, axis=0)
        if self.obs_columns is not None:
            obs = obs[:, self.obs_columns]
        command = None
        if self.command:
            # the action just before the chunk: row + shift - 1 >= row, so in the episode
            at = np.minimum(rows + (self.shift - 1), ends - 1)
            command = np.take(self._action, at, axis=0)
        return Batch(obs=obs, action=action,
                     group=np.take(self._group, rows).astype(np.int64), image=image,
                     command=command)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A uniformly random minibatch of train rows, drawn with ``generator``."""
        batch = self.gather(*self.train.locate(self.draw(batch_size, generator)))
        self.advance(1)
        return batch

    def draw(self, batch_size: int, generator: torch.Generator) -> np.ndarray:
        """Positions in the train split of one minibatch's rows (``train.locate`` gives the
        table rows :meth:`sample` gathers), drawn with ``generator``; nothing is read."""
        return torch.randint(self.train.rows, (batch_size,), generator=generator).numpy()

    def advance(self, steps: int) -> None:
        """Count ``steps`` gathered minibatches; release the mapped pages when due."""
        due = self._steps // self.release_every != (self._steps + steps) // self.release_every
        self._steps += steps
        if due and self.releases:
            self.release()

    def validation(self, max_rows: int, seed: int) -> Batch | None:
        """A fixed validation batch of up to ``max_rows`` held-out rows (None without a split)."""
        if self.val.rows == 0:
            return None
        if self.val.rows <= max_rows:
            u = np.arange(self.val.rows, dtype=np.int64)
        else:
            rng = np.random.default_rng([seed, 1])
            u = np.sort(rng.choice(self.val.rows, size=max_rows, replace=False))
        parts = []
        for lo in range(0, len(u), _VAL_GATHER):
            parts.append(self.gather(*self.val.locate(u[lo:lo + _VAL_GATHER])))
            self.release()
        return Batch.concat(parts)


def open_training_table(store: ArtifactStore, dataset_ids: list[str]) -> TrainingTable:
    """The training table of one or more dataset artifacts.

    A dataset artifact that *is* a table (``table.json`` at its root, e.g. written by a
    benchmark or a test) is opened in place after verifying its hashes; otherwise the dataset
    layer builds (or reuses) a table from the datasets' MCAP episodes.

    Raises:
        ClawgymError: unknown dataset ids, or no dataset layer available.
    """
    from clawgym_ros import constants as C

    if not dataset_ids:
        raise ClawgymError("no dataset ids given (use --dataset ID)")
    artifacts = [store.resolve(ref, C.KIND_DATASET) for ref in dataset_ids]
    if len(artifacts) == 1 and (artifacts[0].path / TABLE_FILE).is_file():
        store.verify(artifacts[0])
        return TrainingTable.open(artifacts[0].path)
    try:
        from clawgym_ros.dataset.cache import training_table
    except ImportError as err:
        raise ClawgymError(f"cannot build a training table from MCAP datasets: {err}") from None
    return training_table(store, [a.id for a in artifacts])


def episode_group_names(store: ArtifactStore, dataset_ids: list[str]) -> list[str] | None:
    """The training group names of MCAP datasets from their episode index alone (no episode
    is read), or None for a dataset that is a table (opened as cheaply as checked)."""
    from clawgym_ros import constants as C

    artifacts = [store.resolve(ref, C.KIND_DATASET) for ref in dataset_ids]
    if any((a.path / TABLE_FILE).is_file() for a in artifacts):
        return None
    from clawgym_ros.dataset.reader import dataset_group_names

    return dataset_group_names(store, [a.id for a in artifacts])

