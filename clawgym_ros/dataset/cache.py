"""Columnar training cache: datasets' MCAP episodes -> a TrainingTable, built once per id list.

``training_table(store, dataset_ids)`` is what the trainer calls. The table lives under
``<run>/cache/<key>/`` where ``key`` hashes the full dataset ids (in the given order) and the
table/cache versions; a table that exists is opened, not rebuilt. Building writes into a
temporary sibling folder and renames it into place, so concurrent builders never see a partial
table.

Columns (see dataset/table.py): ``obs`` = the union of the datasets' observation keys in the
canonical order ``constants.OBS_STATE_KEYS`` (others after, sorted), ``action`` likewise with
``constants.ACTION_KEYS``; an episode that lacks a key gets zeros there. ``group`` indexes
``group_names`` = ``task/template/family`` in first-appearance order; ``episode`` counts episodes
across the whole table from 0. ``image`` holds one camera's frames (wrist camera preferred)
when every dataset recorded that camera at the same size.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.artifacts.atomic import default_mode
from clawgym_ros.dataset.episode_mcap import read_episode, read_episode_vectors
from clawgym_ros.dataset.reader import Dataset, open_dataset
from clawgym_ros.dataset.table import (
    TABLE_FILE,
    TABLE_VERSION,
    TableDamagedError,
    TrainingTable,
    group_name,
    write_table,
)
from clawgym_ros.dataset.writer import DatasetError
from clawgym_ros.synthesis.episode import ordered_keys

CACHE_VERSION = 1


def cache_key(dataset_ids: Sequence[str]) -> str:
    """Folder name of the table of ``dataset_ids`` (full ids, order matters)."""
    digest = hashlib.sha256(f"clawgym-table-v{TABLE_VERSION}-c{CACHE_VERSION}\0".encode())
    for ds_id in dataset_ids:
        digest.update(f"{ds_id}\0".encode())
    return digest.hexdigest()[:32]


def training_table(store: ArtifactStore, dataset_ids: Sequence[str],
                   cache_dir: str | Path | None = None) -> TrainingTable:
    """The training table of ``dataset_ids``, built from their MCAP episodes or reused.

    Args:
        store: the run's artifact store.
        dataset_ids: dataset ids or unique prefixes (order fixes the row order).
        cache_dir: where tables live (default ``<run>/cache``).

    Returns:
        The (memory-mapped) table.

    Raises:
        ArtifactError: an unknown id.
        DatasetError: no ids, no episodes, or a key with different widths across datasets.
    """
    if not dataset_ids:
        raise DatasetError("training_table needs at least one dataset id")
    datasets = [open_dataset(store, ref) for ref in dataset_ids]
    ids = [d.id for d in datasets]
    base = Path(cache_dir) if cache_dir is not None else store.run_dir / C.DIR_CACHE
    root = base / cache_key(ids)
    if (root / TABLE_FILE).is_file():
        try:
            table = TrainingTable.open(root)
        except TableDamagedError:
            # A truncated or edited cache (a full disk, a crash, a hand): built again below.
            shutil.rmtree(root, ignore_errors=True)
        else:
            if table.dataset_ids == ids:
                return table
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=base))
    tmp.chmod(default_mode(directory=True))
    try:
        _build(datasets, ids, tmp)
        try:
            os.rename(tmp, root)
        except OSError:
            if not (root / TABLE_FILE).is_file():
                raise
            # Someone else built the same table meanwhile; theirs is identical.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TrainingTable.open(root)


def _union_spec(datasets: Sequence[Dataset], field: str, canonical: Sequence[str]) -> dict:
    widths: dict[str, int] = {}
    for ds in datasets:
        for key, width in ds.info[field]:
            if widths.setdefault(key, width) != width:
                raise DatasetError(f"dataset {ds.id}: {field} {key!r} has width {width}, other "
                                   f"datasets {widths[key]}")
    return {k: widths[k] for k in ordered_keys(widths, canonical)}


def _camera(datasets: Sequence[Dataset]) -> tuple[str, tuple[int, int]] | None:
    common = None
    for ds in datasets:
        cams = {k: tuple(v) for k, v in ds.info.get("cameras", {}).items()}
        common = cams if common is None else {k: v for k, v in common.items()
                                              if cams.get(k) == v}
    if not common:
        return None
    name = ordered_keys(common, (C.CAMERA_WRIST, C.CAMERA_FRONT))[0]
    return name, common[name]


def _offsets(spec: dict[str, int]) -> dict[str, int]:
    out, col = {}, 0
    for key, width in spec.items():
        out[key] = col
        col += width
    return out


def _build(datasets: Sequence[Dataset], ids: list[str], root: Path) -> None:
    obs_spec = _union_spec(datasets, "observation_spec", C.OBS_STATE_KEYS)
    act_spec = _union_spec(datasets, "action_spec", C.ACTION_KEYS)
    obs_at, act_at = _offsets(obs_spec), _offsets(act_spec)
    rows = [(ds, row) for ds in datasets for row in ds.index]
    total = sum(int(row["steps"]) for _, row in rows)
    if total == 0:
        raise DatasetError(f"datasets {ids} have no accepted episodes")
    obs = np.zeros((total, sum(obs_spec.values())), dtype=np.float32)
    act = np.zeros((total, sum(act_spec.values())), dtype=np.float32)
    group = np.zeros(total, dtype=np.int32)
    episode = np.zeros(total, dtype=np.int32)
    camera = _camera(datasets)
    image = None
    if camera is not None:
        height, width = camera[1]
        image = np.lib.format.open_memmap(root / "image.npy", mode="w+", dtype=np.uint8,
                                          shape=(total, height, width, 3))
    groups: dict[str, int] = {}
    start = 0
    for number, (ds, row) in enumerate(rows):
        path = ds.episode_path(row)
        meta, ep_obs, ep_act = read_episode_vectors(path)
        steps = ep_obs.shape[0]
        if steps != int(row["steps"]):
            raise DatasetError(f"dataset {ds.id}: {row['file']} has {steps} steps, index says "
                               f"{row['steps']}")
        _place(obs, start, ep_obs, meta["observation_spec"], obs_at)
        _place(act, start, ep_act, meta["action_spec"], act_at)
        name = group_name(row["task"], row["template"], row["family"])
        group[start:start + steps] = groups.setdefault(name, len(groups))
        episode[start:start + steps] = number
        if image is not None:
            frames = read_episode(path, images=True).images[camera[0]]
            image[start:start + steps] = frames
        start += steps
    if image is not None:
        image.flush()
        del image
    write_table(root, obs=obs, action=act, group=group, episode=episode, obs_spec=obs_spec,
                action_spec=act_spec, group_names=list(groups), dataset_ids=ids)


def _place(target: np.ndarray, start: int, values: np.ndarray, spec: list[tuple[str, int]],
           offsets: dict[str, int]) -> None:
    col = 0
    steps = values.shape[0]
    for key, width in spec:
        at = offsets[key]
        target[start:start + steps, at:at + width] = values[:, col:col + width]
        col += width
