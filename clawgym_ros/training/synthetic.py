"""Synthetic training tables for tests and benchmarks (no simulator needed).

Rows come in episodes; each episode belongs to one group. The action of a row is a fixed
nonlinear function of its observation that differs per group, so groups compete for the
network's capacity (which makes per-group loss weights visible). Tables are written in slices
so that a large one never has to exist in memory whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore
from clawgym_ros.artifacts.atomic import atomic_write_json
from clawgym_ros.dataset.table import TABLE_FILE, TABLE_VERSION, TrainingTable, group_name

OBS_SPEC = {C.OBS_JOINT_POS: 7, C.OBS_JOINT_VEL: 7, C.OBS_GRIPPER: 1, C.OBS_OBJECT_POSES: 7,
            C.OBS_TOOL_POSE: 7}
ACTION_SPEC = {C.ACT_JOINT_TARGET: 7, C.ACT_GRIPPER: 1}
#: Observation feature that sets the synthetic images' brightness.
IMAGE_FEATURE = 0
FAMILIES = (C.FAMILY_NONE, C.FAMILY_SENSOR_NOISE, C.FAMILY_LIGHTING, C.FAMILY_DYNAMICS)


def synthetic_table(
    root: str | Path,
    *,
    rows: int,
    episode_len: int = 100,
    groups: int = 3,
    seed: int = 0,
    image_size: int | None = None,
    dataset_ids: tuple[str, ...] = (),
    slice_rows: int = 200_000,
) -> TrainingTable:
    """Write a synthetic table of ``rows`` rows to ``root`` and open it.

    Args:
        rows: number of rows (steps).
        episode_len: rows per episode.
        groups: number of groups (``pick_place/<template>/<family>`` names).
        seed: seed of the per-group maps and the observations.
        image_size: add square RGB images of this side (for the cnn policy).
        dataset_ids: recorded as the table's source datasets.
        slice_rows: rows generated at a time (bounds the writer's memory).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    obs_dim, act_dim = sum(OBS_SPEC.values()), sum(ACTION_SPEC.values())
    maps = rng.normal(0.0, 1.0 / np.sqrt(obs_dim), size=(groups, obs_dim, act_dim))
    shifts = rng.normal(0.0, 1.0, size=(groups, obs_dim))
    names = [group_name(C.TASK_PICK_PLACE, f"t{g // len(FAMILIES)}", FAMILIES[g % len(FAMILIES)])
             for g in range(groups)]
    columns = {"obs": (np.float32, (obs_dim,)), "action": (np.float32, (act_dim,)),
               "group": (np.int32, ()), "episode": (np.int32, ())}
    if image_size:
        columns["image"] = (np.uint8, (image_size, image_size, 3))
    arrays = {name: np.lib.format.open_memmap(root / f"{name}.npy", mode="w+", dtype=dtype,
                                              shape=(rows, *shape))
              for name, (dtype, shape) in columns.items()}
    stats_acc = {"obs": [np.zeros(obs_dim), np.zeros(obs_dim)],
                 "action": [np.zeros(act_dim), np.zeros(act_dim)]}
    for lo in range(0, rows, slice_rows):
        hi = min(rows, lo + slice_rows)
        episode = np.arange(lo, hi) // episode_len
        group = episode % groups
        obs = rng.normal(size=(hi - lo, obs_dim)) * 0.5 + shifts[group] * 0.5
        action = np.tanh(np.einsum("ni,nij->nj", obs, maps[group]) * 2.0)
        action += rng.normal(0.0, 0.01, size=action.shape)
        arrays["obs"][lo:hi] = obs
        arrays["action"][lo:hi] = action
        arrays["group"][lo:hi] = group
        arrays["episode"][lo:hi] = episode
        if image_size:
            level = (np.clip(obs[:, IMAGE_FEATURE], -2, 2) + 2.0) * 60.0
            arrays["image"][lo:hi] = level[:, None, None, None].astype(np.uint8)
        for key, value in (("obs", obs), ("action", action)):
            stats_acc[key][0] += value.sum(axis=0)
            stats_acc[key][1] += (value ** 2).sum(axis=0)
    for array in arrays.values():
        array.flush()
    stats = {}
    for key, (total, squares) in stats_acc.items():
        mean = total / rows
        stats[f"{key}_mean"] = mean.astype(np.float32)
        stats[f"{key}_std"] = np.maximum(np.sqrt(np.maximum(squares / rows - mean ** 2, 0.0)),
                                         1e-6).astype(np.float32)
    del arrays
    return write_table_meta(root, names, stats, dataset_ids)


def write_table_meta(root: Path, names: list[str], stats: dict[str, np.ndarray],
                     dataset_ids: tuple[str, ...]) -> TrainingTable:
    """Write table.json (the format of :func:`write_table`) next to written columns; open."""
    atomic_write_json(root / TABLE_FILE, {
        "version": TABLE_VERSION, "obs_spec": [[k, w] for k, w in OBS_SPEC.items()],
        "action_spec": [[k, w] for k, w in ACTION_SPEC.items()],
        "group_names": names, "dataset_ids": list(dataset_ids),
        "stats": {k: np.asarray(v).tolist() for k, v in stats.items()},
    })
    return TrainingTable.open(root)


def synthetic_dataset(store: ArtifactStore, *, rows: int, seed: int = 0, **kwargs: Any
                      ) -> Artifact:
    """Commit a synthetic table as a dataset artifact (trainable by id, like real datasets).

    Keyword arguments go to :func:`synthetic_table`.
    """
    with store.stage(C.KIND_DATASET) as staging:
        synthetic_table(staging.path, rows=rows, seed=seed, **kwargs)
        return staging.commit(config={"synthetic": True, "rows": rows, **kwargs},
                              seeds={"synthetic": seed}, summary={"rows": rows})
