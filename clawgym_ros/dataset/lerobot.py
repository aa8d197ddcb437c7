"""Export a dataset artifact as a LeRobotDataset (format ``v3.0``, what lerobot 0.4.x reads).

The ``lerobot`` package's own writer cannot be used here: lerobot 0.4.4 requires
``torch<2.11``, ``packaging<26`` and ``rerun-sdk<0.27`` (this project pins torch 2.13.0,
packaging 26.4, rerun-sdk 0.41.0) and brings diffusers, accelerate, wandb and opencv. So the
documented v3.0 layout is written with pyarrow (already pinned), and
``test/test_export_lerobot.py`` loads the result with ``LeRobotDataset`` from a separate
environment that has lerobot installed.

Layout (``OUT/``)::

    meta/info.json                          codebase_version v3.0, fps, features, paths
    meta/stats.json                         min/max/mean/std/count/q01..q99 per feature
    meta/tasks.parquet                      task string (pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet   one row per episode: tasks, length, where its
                                            frames are, per-episode stats, clawgym provenance
    data/chunk-000/file-000.parquet         one row per frame (more files past 100 MB)

Features: ``observation.state`` = the policy observation vector (the dataset's
``observation_spec`` keys concatenated in order; ``names`` gives ``key`` or ``key_i`` per
element), ``action`` = the commanded action vector (``action_spec``), both float32;
``observation.images.<camera>`` per recorded camera (dtype ``image``: PNG bytes in the
parquet, which LeRobot decodes to float CHW in [0, 1]); ``timestamp`` (s since the episode's
first step, float32), ``frame_index``, ``episode_index`` (0.. in the dataset's order),
``index`` (frame over the whole dataset) and ``task_index``. The task string of an episode is
``<task>/<template>``. ``fps`` is the control rate; an episode whose steps are not 1/fps apart
is refused.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros.errors import ClawgymError, ConfigError

#: The LeRobotDataset format written (lerobot 0.4.x's CODEBASE_VERSION).
CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
TASKS_PATH = "meta/tasks.parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
STATE = "observation.state"
ACTION = "action"
IMAGE_PREFIX = "observation.images."
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
#: Largest step-time deviation from 1/fps accepted (LeRobot's default tolerance_s).
TOLERANCE_S = 1e-4
DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}


class ExportError(ClawgymError):
    """A dataset cannot be exported as asked (one line naming the dataset and why)."""


@dataclasses.dataclass(frozen=True)
class ExportSummary:
    """What an export wrote."""

    out: Path
    episodes: int
    frames: int
    fps: int
    tasks: tuple[str, ...]
    cameras: tuple[str, ...]
    data_files: int


def _names(spec: Sequence[Sequence[Any]]) -> list[str]:
    out = []
    for key, width in spec:
        out += [key] if int(width) == 1 else [f"{key}_{i}" for i in range(int(width))]
    return out


def _png(frame: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(buf, format="PNG")
    return buf.getvalue()


def _stats(values: np.ndarray) -> dict[str, list]:
    """LeRobot's per-feature statistics over axis 0 (``count`` = rows)."""
    out = {"min": values.min(axis=0), "max": values.max(axis=0), "mean": values.mean(axis=0),
           "std": values.std(axis=0), "count": np.array([len(values)])}
    for q in QUANTILES:
        out[f"q{int(round(q * 100)):02d}"] = np.quantile(values, q, axis=0)
    return {k: np.asarray(v).tolist() for k, v in out.items()}


def _image_stats(frames: np.ndarray) -> dict[str, list]:
    """Per-channel statistics of uint8 frames (T, H, W, 3) scaled to [0, 1], shaped (3, 1, 1)
    as LeRobot stores them; ``count`` = frames."""
    pixels = frames.reshape(-1, frames.shape[-1]).astype(np.float64) / 255.0
    flat = _stats(pixels)
    out = {k: np.asarray(v).reshape(-1, 1, 1).tolist() for k, v in flat.items() if k != "count"}
    out["count"] = [int(len(frames))]
    return out


def _fps(time: np.ndarray, where: str) -> int:
    steps = np.diff(np.asarray(time, dtype=np.float64))
    if steps.size == 0:
        raise ExportError(f"{where} has a single step: no frame rate to export")
    fps = int(round(1.0 / float(np.median(steps))))
    if fps <= 0:
        raise ExportError(f"{where}: step times {float(np.median(steps))} s give no frame rate")
    return fps


def _check_times(time: np.ndarray, fps: int, where: str) -> np.ndarray:
    t = np.asarray(time, dtype=np.float64) - float(time[0])
    off = np.abs(t - np.arange(len(t)) / fps)
    if off.max() > TOLERANCE_S:
        k = int(off.argmax())
        raise ExportError(f"{where}: step {k} at {t[k]:.6f} s is not {k}/{fps} s (LeRobot "
                          f"datasets have a fixed frame rate; tolerance {TOLERANCE_S} s)")
    return t


def _pandas_index_metadata(tasks: Sequence[str]) -> bytes:
    """The ``pandas`` schema metadata that makes ``pandas.read_parquet`` restore the task
    strings as the frame's index (what lerobot's ``load_tasks`` expects), written without
    pandas."""
    meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode",
                            "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": None},
            {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": __import__("pyarrow").__version__},
        "pandas_version": "2.2.3",
    }
    return json.dumps(meta).encode()


def export_lerobot(store: Any, ref: str, out: str | Path, images: bool | None = None,
                   progress: Any = None) -> ExportSummary:
    """Write dataset ``ref`` of ``store`` as a LeRobotDataset v3.0 folder ``out``.

    The folder is written next to ``out`` under a temporary name and renamed into place when
    complete, so ``out`` either does not exist or holds the whole export.

    Args:
        images: True = export camera frames and refuse a dataset without any; False = leave
            them out; None = export them when the dataset has any.
        progress: called with (episodes done, total) after each episode.

    Raises:
        ArtifactError / DatasetError: unknown or malformed dataset id.
        ConfigError: ``out`` exists already; ``images`` asked of a dataset without frames.
        ExportError: no accepted episodes, no fixed frame rate, inconsistent episodes.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clawgym_ros.dataset.reader import open_dataset

    out = Path(out)
    if out.exists() or out.is_symlink():
        raise ConfigError("OUT", str(out), "a path that does not exist yet (the export "
                          "creates it)")
    dataset = open_dataset(store, ref)
    info = dataset.info
    cameras = sorted(info.get("cameras") or {})
    where = f"dataset {dataset.id[:12]}"
    if images and not cameras:
        raise ConfigError("--images", True, f"a dataset with camera frames; {where} has none "
                          "(synthesize with --images, or export without --images)")
    if images is False:
        cameras = []
    if not dataset.index:
        raise ExportError(f"{where} has no accepted episodes to export")
    obs_spec, act_spec = info["observation_spec"], info["action_spec"]
    obs_keys = [k for k, _ in obs_spec]
    act_keys = [k for k, _ in act_spec]
    state_dim, action_dim = sum(int(w) for _, w in obs_spec), sum(int(w) for _, w in act_spec)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        summary = _write(dataset, tmp, out, cameras, obs_keys, act_keys, obs_spec, act_spec,
                         state_dim, action_dim, where, pa, pq, progress)
        if out.exists():
            raise ConfigError("OUT", str(out), "a path that does not exist yet (it appeared "
                              "during the export)")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def _write(dataset: Any, root: Path, out: Path, cameras: list[str], obs_keys: list[str],
           act_keys: list[str], obs_spec: Sequence, act_spec: Sequence, state_dim: int,
           action_dim: int, where: str, pa: Any, pq: Any, progress: Any) -> ExportSummary:
    fields = [(STATE, pa.list_(pa.float32(), state_dim)),
              (ACTION, pa.list_(pa.float32(), action_dim))]
    fields += [(IMAGE_PREFIX + cam, pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
               for cam in cameras]
    fields += [("timestamp", pa.float32()), ("frame_index", pa.int64()),
               ("episode_index", pa.int64()), ("index", pa.int64()), ("task_index", pa.int64())]
    schema = pa.schema(fields)
    tasks: list[str] = []
    episodes: list[dict[str, Any]] = []
    all_state, all_action = [], []
    image_stats_rows: dict[str, list[np.ndarray]] = {cam: [] for cam in cameras}
    fps = 0
    total = 0
    chunk, file_index, file_rows_bytes = 0, 0, 0
    writer = None
    n = len(dataset.index)
    try:
        for ep, row in enumerate(dataset.index):
            record = dataset.episode(ep, images=bool(cameras))
            here = f"{where} episode {ep} ({row.get('file', '')})"
            fps = fps or _fps(record.time, here)
            t = _check_times(record.time, fps, here)
            steps = record.num_steps
            try:
                state = np.concatenate([record.observations[k] for k in obs_keys], axis=1) \
                    if obs_keys else np.zeros((steps, 0))
                action = np.concatenate([record.actions[k] for k in act_keys], axis=1) \
                    if act_keys else np.zeros((steps, 0))
            except KeyError as err:
                raise ExportError(f"{here} lacks the key {err.args[0]!r} the dataset's spec "
                                  "names") from None
            if state.shape[1] != state_dim or action.shape[1] != action_dim:
                raise ExportError(f"{here}: state/action widths {state.shape[1]}/"
                                  f"{action.shape[1]}, the dataset's {state_dim}/{action_dim}")
            task = f"{record.task}/{record.template}"
            if task not in tasks:
                tasks.append(task)
            columns: dict[str, Any] = {
                STATE: pa.FixedSizeListArray.from_arrays(
                    pa.array(state.astype(np.float32).ravel()), state_dim),
                ACTION: pa.FixedSizeListArray.from_arrays(
                    pa.array(action.astype(np.float32).ravel()), action_dim),
            }
            ep_stats = {STATE: _stats(state.astype(np.float32).astype(np.float64)),
                        ACTION: _stats(action.astype(np.float32).astype(np.float64))}
            for cam in cameras:
                frames = record.images.get(cam)
                if frames is None or len(frames) != steps:
                    raise ExportError(f"{here} has no frames of camera {cam!r} at every step")
                columns[IMAGE_PREFIX + cam] = pa.array(
                    [{"bytes": _png(f), "path": None} for f in frames],
                    type=schema.field(IMAGE_PREFIX + cam).type)
                ep_stats[IMAGE_PREFIX + cam] = _image_stats(frames)
                image_stats_rows[cam].append(frames)
            columns["timestamp"] = pa.array(t.astype(np.float32))
            columns["frame_index"] = pa.array(np.arange(steps, dtype=np.int64))
            columns["episode_index"] = pa.array(np.full(steps, ep, dtype=np.int64))
            columns["index"] = pa.array(np.arange(total, total + steps, dtype=np.int64))
            columns["task_index"] = pa.array(np.full(steps, tasks.index(task), dtype=np.int64))
            table = pa.Table.from_pydict(columns, schema=schema)
            if writer is not None and file_rows_bytes + table.nbytes >= \
                    DATA_FILES_SIZE_IN_MB * 1024 * 1024:
                writer.close()
                writer = None
                file_index += 1
                if file_index == CHUNKS_SIZE:
                    chunk, file_index = chunk + 1, 0
            if writer is None:
                path = root / DATA_PATH.format(chunk_index=chunk, file_index=file_index)
                path.parent.mkdir(parents=True, exist_ok=True)
                writer = pq.ParquetWriter(path, schema, compression="snappy")
                file_rows_bytes = 0
            writer.write_table(table)
            file_rows_bytes += table.nbytes
            episodes.append({
                "episode_index": ep, "tasks": [task], "length": steps,
                "data/chunk_index": chunk, "data/file_index": file_index,
                "dataset_from_index": total, "dataset_to_index": total + steps,
                "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
                **{f"stats/{feat}/{k}": v for feat, s in ep_stats.items() for k, v in s.items()},
                "clawgym/dataset_id": dataset.id, "clawgym/episode": int(row["index"]),
                "clawgym/seed": int(row["seed"]), "clawgym/family": str(row["family"]),
                "clawgym/intensity": float(row["intensity"]),
                "clawgym/success": bool(row["success"]),
            })
            all_state.append(state.astype(np.float32))
            all_action.append(action.astype(np.float32))
            total += steps
            if progress:
                progress(ep + 1, n)
    finally:
        if writer is not None:
            writer.close()
    data_files = sum(1 for _ in (root / "data").glob("*/*.parquet"))

    # meta/episodes, meta/tasks
    path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(episodes), path, compression="snappy")
    task_table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()),
                           "__index_level_0__": pa.array(tasks, pa.string())})
    task_table = task_table.replace_schema_metadata({b"pandas": _pandas_index_metadata(tasks)})
    pq.write_table(task_table, root / TASKS_PATH)

    # meta/stats.json over the whole dataset
    stats = {STATE: _stats(np.concatenate(all_state).astype(np.float64)),
             ACTION: _stats(np.concatenate(all_action).astype(np.float64))}
    for cam in cameras:
        stats[IMAGE_PREFIX + cam] = _image_stats(np.concatenate(image_stats_rows[cam]))
    (root / STATS_PATH).write_text(json.dumps(stats, indent=4) + "\n")

    features: dict[str, Any] = {
        STATE: {"dtype": "float32", "shape": [state_dim], "names": _names(obs_spec)},
        ACTION: {"dtype": "float32", "shape": [action_dim], "names": _names(act_spec)},
    }
    for cam in cameras:
        h, w = (int(x) for x in dataset.info["cameras"][cam])
        features[IMAGE_PREFIX + cam] = {"dtype": "image", "shape": [h, w, 3],
                                        "names": ["height", "width", "channels"]}
    features.update(DEFAULT_FEATURES)
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": "clawgym",
        "total_episodes": len(episodes),
        "total_frames": total,
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILES_SIZE_IN_MB,
        "video_files_size_in_mb": VIDEO_FILES_SIZE_IN_MB,
        "fps": fps,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": DATA_PATH,
        "video_path": None,
        "features": features,
        "clawgym": {"dataset_id": dataset.id, "joint_names": dataset.info.get("joint_names"),
                    "task_strings": "<task>/<template>"},
    }
    (root / INFO_PATH).write_text(json.dumps(info, indent=4) + "\n")
    return ExportSummary(out, len(episodes), total, fps, tuple(tasks), tuple(cameras),
                         data_files)
