"""The columnar training table: the contract between datasets and the trainer.

A table is a folder of ``.npy`` files (memory-mapped on read, so training streams from disk
instead of holding a dataset in memory) plus ``table.json``::

    obs.npy      float32 (N, obs_dim)   observation vector, keys concatenated in obs_spec order
    action.npy   float32 (N, act_dim)   action vector, keys concatenated in action_spec order
    group.npy    int32   (N,)           index into group_names (task/template/family)
    episode.npy  int32   (N,)           episode index within the table
    image.npy    uint8   (N, H, W, 3)   optional camera frames (CNN policies)
    table.json   obs_spec, action_spec ([key, width] pairs in column order), group_names,
                 stats, source dataset ids

The synthesis side writes tables from MCAP episodes (keyed by dataset id, so a cache is reused);
the trainer only reads them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from clawgym_ros.artifacts.atomic import atomic_write_json
from clawgym_ros.errors import ClawgymError, shorten

TABLE_VERSION = 1
TABLE_FILE = "table.json"
COLUMNS = ("obs", "action", "group", "episode")


class TableDamagedError(ClawgymError):
    """A training table folder is incomplete, truncated or edited (the cache rebuilds it)."""


def group_name(task: str, template: str, family: str) -> str:
    """Name of a training group: task x template x perturbation family."""
    return f"{task}/{template}/{family}"


@dataclasses.dataclass(frozen=True)
class TrainingTable:
    """Per-step training data; arrays are memory-mapped read-only."""

    root: Path
    obs: np.ndarray
    action: np.ndarray
    group: np.ndarray
    episode: np.ndarray
    obs_spec: dict[str, int]
    action_spec: dict[str, int]
    group_names: list[str]
    stats: dict[str, np.ndarray]
    dataset_ids: list[str]
    image: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    @classmethod
    def open(cls, root: str | Path) -> TrainingTable:
        """Open a table folder written by :func:`write_table`.

        Raises:
            ClawgymError: missing files, wrong version or inconsistent shapes.
        """
        root = Path(root)
        meta_path = root / TABLE_FILE
        if not meta_path.is_file():
            raise TableDamagedError(f"training table {root} has no {TABLE_FILE}")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise TableDamagedError(f"training table {root}: {TABLE_FILE} is unreadable "
                               f"({shorten(str(err), 120)})") from None
        if not isinstance(meta, dict) or meta.get("version") != TABLE_VERSION:
            version = meta.get("version") if isinstance(meta, dict) else None
            raise TableDamagedError(f"training table {root}: version {version!r}, "
                               f"expected {TABLE_VERSION}")
        arrays = {}
        for name in (*COLUMNS, "image"):
            path = root / f"{name}.npy"
            if name == "image" and not path.exists():
                continue
            try:
                arrays[name] = np.load(path, mmap_mode="r")
            except (OSError, ValueError, EOFError) as err:
                # A truncated .npy: numpy's header promises more bytes than the file has.
                raise TableDamagedError(f"training table {root}: {path.name} is damaged or "
                                   f"truncated ({shorten(str(err), 120)})") from None
        n = arrays["obs"].shape[0]
        if any(a.shape[0] != n for a in arrays.values()):
            raise TableDamagedError(f"training table {root}: columns have different lengths")
        try:
            return cls(
                root=root, obs_spec=dict(meta["obs_spec"]),
                action_spec=dict(meta["action_spec"]), group_names=list(meta["group_names"]),
                stats={k: np.asarray(v, dtype=np.float32) for k, v in meta["stats"].items()},
                dataset_ids=list(meta["dataset_ids"]), **arrays,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise TableDamagedError(f"training table {root}: {TABLE_FILE} lacks or mangles "
                               f"{shorten(str(err), 120)}") from None


def compute_stats(obs: np.ndarray, action: np.ndarray) -> dict[str, np.ndarray]:
    """Normalization statistics (mean, std floored at 1e-6) of observations and actions."""
    return {
        "obs_mean": obs.mean(axis=0).astype(np.float32),
        "obs_std": np.maximum(obs.std(axis=0), 1e-6).astype(np.float32),
        "action_mean": action.mean(axis=0).astype(np.float32),
        "action_std": np.maximum(action.std(axis=0), 1e-6).astype(np.float32),
    }


def write_table(
    root: str | Path,
    *,
    obs: np.ndarray,
    action: np.ndarray,
    group: np.ndarray,
    episode: np.ndarray,
    obs_spec: Mapping[str, int],
    action_spec: Mapping[str, int],
    group_names: Sequence[str],
    dataset_ids: Sequence[str],
    image: np.ndarray | None = None,
    stats: Mapping[str, np.ndarray] | None = None,
) -> TrainingTable:
    """Write a table folder (table.json last, so a table without it is incomplete)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if obs.shape[1] != sum(obs_spec.values()) or action.shape[1] != sum(action_spec.values()):
        raise ClawgymError("training table: column widths do not match obs_spec/action_spec")
    columns = {"obs": obs.astype(np.float32), "action": action.astype(np.float32),
               "group": group.astype(np.int32), "episode": episode.astype(np.int32)}
    if image is not None:
        columns["image"] = image.astype(np.uint8)
    for name, array in columns.items():
        np.save(root / f"{name}.npy", array)
    stats = dict(stats) if stats is not None else compute_stats(columns["obs"],
                                                                columns["action"])
    atomic_write_json(root / TABLE_FILE, {
        # Specs as [key, width] pairs: a JSON object would be key-sorted and lose the order.
        "version": TABLE_VERSION, "obs_spec": [[k, int(w)] for k, w in obs_spec.items()],
        "action_spec": [[k, int(w)] for k, w in action_spec.items()],
        "group_names": list(group_names), "dataset_ids": list(dataset_ids),
        "stats": {k: np.asarray(v).tolist() for k, v in stats.items()},
    })
    return TrainingTable.open(root)
