"""Dataset artifacts: accepted episodes as MCAP files plus metadata, committed by content id.

Layout of a dataset artifact (``<run>/artifacts/dataset/<id>/``)::

    episodes/000000.mcap   one MCAP file per accepted episode, named by plan index (gaps =
    episodes/000002.mcap   rejected episodes); see dataset/episode_mcap.py for topics
    episodes.jsonl         index: one JSON row per accepted episode (task, template,
                           perturbation, seed, outcome, stages, skills, steps, file)
    rejected.jsonl         one row per rejected episode (seed, reason codes and details)
    info.json              format + version, topic -> ROS type, observation/action specs,
                           joints, cameras, counts by rejection reason, generation settings
    stats.json             normalization stats of the observation and action vectors
    manifest.json          written by the artifact store (config, seeds, parents, versions)

Why one file per episode: workers encode episodes independently, a reader can open one episode
without scanning the rest, and every file is a complete ``ros2 bag`` / Foxglove recording whose
sim-time clock starts at the episode's start.

Every content file is deterministic (no wall-clock, counts in fixed order), so the same plan
gives the same dataset id with 1 or W workers. Wall time goes only into the manifest summary.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore, atomic_write_json
from clawgym_ros.dataset.episode_mcap import (
    EPISODE_FORMAT_VERSION,
    MESSAGE_TYPES,
    encode_episode,
    image_topic,
)
from clawgym_ros.dataset.msgdefs import message_definition
from clawgym_ros.errors import ClawgymError
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec, ordered_keys
from clawgym_ros.synthesis.pool import (
    EpisodeResult,
    GenerationSummary,
    Generator,
    ProgressCallback,
    Signoff,
    run_generation,
)

DATASET_FORMAT = "clawgym_dataset"
DATASET_VERSION = 1


class DatasetError(ClawgymError):
    """A dataset cannot be written or read (inconsistent episodes, missing files)."""


def episode_file(index: int) -> str:
    """Relative path of episode ``index`` inside a dataset artifact."""
    return f"{C.DIR_EPISODES}/{index:06d}.mcap"


@dataclasses.dataclass
class Moments:
    """Count, mean, sum of squared deviations, min and max of vector rows (mergeable)."""

    n: int
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray) -> Moments:
        mean = rows.mean(axis=0) if len(rows) else np.zeros(rows.shape[1])
        return cls(len(rows), mean, ((rows - mean) ** 2).sum(axis=0),
                   rows.min(axis=0, initial=np.inf), rows.max(axis=0, initial=-np.inf))

    def merge(self, other: Moments) -> Moments:
        """Chan et al.'s parallel update (merging in a fixed order keeps results exact)."""
        n = self.n + other.n
        if n == 0:
            return self
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        m2 = self.m2 + other.m2 + delta ** 2 * (self.n * other.n / n)
        return Moments(n, mean, m2, np.minimum(self.min, other.min),
                       np.maximum(self.max, other.max))

    def to_dict(self, spec: Sequence[tuple[str, int]]) -> dict[str, Any]:
        std = np.sqrt(self.m2 / self.n) if self.n else np.zeros_like(self.mean)
        return {"keys": [[k, w] for k, w in spec], "count": self.n,
                "mean": self.mean.tolist(), "std": std.tolist(),
                "min": self.min.tolist(), "max": self.max.tolist()}


@dataclasses.dataclass
class EncodedEpisode:
    """What a worker sends back for an accepted episode: the file and what the index needs."""

    index: int
    mcap: bytes
    summary: dict[str, Any]
    joint_names: tuple[str, ...]
    observation_spec: dict[str, int]
    action_spec: dict[str, int]
    cameras: dict[str, list[int]]
    obs: np.ndarray
    action: np.ndarray


def encode_for_dataset(record: EpisodeRecord) -> EncodedEpisode:
    """Encoder for :func:`~clawgym_ros.synthesis.pool.run_generation` (runs in workers)."""
    obs_spec, act_spec = record.observation_spec(), record.action_spec()
    obs = np.concatenate([record.observations[k] for k in obs_spec], axis=1) if obs_spec \
        else np.zeros((record.num_steps, 0))
    act = np.concatenate([record.actions[k] for k in act_spec], axis=1) if act_spec \
        else np.zeros((record.num_steps, 0))
    return EncodedEpisode(
        index=record.episode_index, mcap=encode_episode(record), summary=record.summary(),
        joint_names=record.joint_names, observation_spec=obs_spec, action_spec=act_spec,
        cameras={k: list(v.shape[1:3]) for k, v in sorted(record.images.items())},
        obs=obs, action=act,
    )


class DatasetWriter:
    """Writes results (in index order) into a staging folder; :meth:`finish` adds metadata.

    Args:
        root: the (empty) staging folder of the dataset artifact.
        generation: JSON-able settings that determine the content (run seed, mixture, episode
            count, options); stored in info.json. Must not contain wall-clock values or worker
            counts, or the dataset id would depend on them.
    """

    def __init__(self, root: str | Path, generation: Mapping[str, Any] | None = None):
        self.root = Path(root)
        self.generation = dict(generation or {})
        (self.root / C.DIR_EPISODES).mkdir(parents=True, exist_ok=True)
        self._index = open(self.root / C.FILE_EPISODE_INDEX, "w", encoding="utf-8")  # noqa: SIM115
        self._rejected = open(self.root / C.FILE_REJECTED_INDEX, "w", encoding="utf-8")  # noqa: SIM115
        self.summary = GenerationSummary(planned=0)
        self.obs_spec: dict[str, int] = {}
        self.act_spec: dict[str, int] = {}
        self.joint_names: tuple[str, ...] | None = None
        self.cameras: dict[str, list[int]] = {}
        self.tasks: list[str] = []
        self.groups: dict[str, int] = {}
        self.obs_moments: dict[str, Moments] = {}
        self.act_moments: dict[str, Moments] = {}
        self._last_index = -1

    def add(self, result: EpisodeResult) -> None:
        """Record one result: an accepted one needs an :class:`EncodedEpisode` payload.

        Raises:
            DatasetError: out-of-order results, a missing payload, or a key whose width differs
                from earlier episodes.
        """
        if result.spec.index <= self._last_index:
            raise DatasetError(f"episode {result.spec.index} arrived after "
                               f"{self._last_index}: results must come in index order")
        self._last_index = result.spec.index
        self.summary.add(result)
        if not result.accepted:
            row = {**result.spec.to_dict(), **{k: result.summary.get(k) for k in
                                                 ("template", "success", "reason")
                                                 if k in result.summary},
                   "reasons": [r.code for r in result.rejections],
                   "details": [r.detail for r in result.rejections]}
            self._rejected.write(json.dumps(row, sort_keys=True) + "\n")
            return
        enc = result.payload
        if not isinstance(enc, EncodedEpisode):
            raise DatasetError(f"accepted episode {result.spec.index} has no encoded payload "
                               "(run the pool with encode=encode_for_dataset)")
        self._merge_specs(enc)
        rel = episode_file(enc.index)
        (self.root / rel).write_bytes(enc.mcap)
        row = {**enc.summary, "file": rel, "options": dict(result.spec.options)}
        self._index.write(json.dumps(row, sort_keys=True) + "\n")
        task = enc.summary["task"]
        if task not in self.tasks:
            self.tasks.append(task)
        self._moments(self.obs_moments, enc.observation_spec, enc.obs)
        self._moments(self.act_moments, enc.action_spec, enc.action)

    def _merge_specs(self, enc: EncodedEpisode) -> None:
        for target, spec, what in ((self.obs_spec, enc.observation_spec, "observation"),
                                   (self.act_spec, enc.action_spec, "action")):
            for key, width in spec.items():
                if target.setdefault(key, width) != width:
                    raise DatasetError(f"episode {enc.index}: {what} {key!r} has width {width},"
                                       f" earlier episodes {target[key]}")
        if self.joint_names is None:
            self.joint_names = enc.joint_names
        for cam, shape in enc.cameras.items():
            if self.cameras.setdefault(cam, shape) != shape:
                raise DatasetError(f"episode {enc.index}: camera {cam!r} frames {shape}, "
                                   f"earlier episodes {self.cameras[cam]}")

    @staticmethod
    def _moments(into: dict[str, Moments], spec: Mapping[str, int], rows: np.ndarray) -> None:
        col = 0
        for key, width in spec.items():
            part = Moments.of(rows[:, col:col + width])
            into[key] = into[key].merge(part) if key in into else part
            col += width

    def finish(self) -> dict[str, Any]:
        """Close the index files and write info.json and stats.json.

        Returns:
            The info.json content.
        """
        self._index.close()
        self._rejected.close()
        obs_spec = [(k, self.obs_spec[k]) for k in ordered_keys(self.obs_spec, C.OBS_STATE_KEYS)]
        act_spec = [(k, self.act_spec[k]) for k in ordered_keys(self.act_spec, C.ACTION_KEYS)]
        topics = {
            C.TOPIC_JOINT_STATES: "sensor_msgs/msg/JointState",
            C.TOPIC_JOINT_TRAJECTORY: "trajectory_msgs/msg/JointTrajectory",
            C.TOPIC_GRIPPER_COMMAND: "clawgym_interfaces/msg/GripperCommand",
            C.TOPIC_CMD_VEL: "geometry_msgs/msg/Twist",
            C.TOPIC_EPISODE_OBSERVATION: "std_msgs/msg/Float64MultiArray",
            C.TOPIC_EPISODE_ACTION: "std_msgs/msg/Float64MultiArray",
            C.TOPIC_EPISODE_PHYSICS: "std_msgs/msg/Float64MultiArray",
            C.TOPIC_EPISODE_STAGES: "std_msgs/msg/String",
            C.TOPIC_SKILL_CALLS: "clawgym_interfaces/msg/SkillCall",
            C.TOPIC_PERTURBATION_STATE: "clawgym_interfaces/msg/PerturbationState",
            **{image_topic(cam): "sensor_msgs/msg/Image" for cam in sorted(self.cameras)},
        }
        counts = self.summary.to_dict()
        info = {
            "format": DATASET_FORMAT, "version": DATASET_VERSION,
            "episode_format_version": EPISODE_FORMAT_VERSION,
            "layout": "one MCAP file per accepted episode: episodes/<plan index:06d>.mcap",
            "topics": topics,
            "message_definitions": {t: _sha(message_definition(t)) for t in MESSAGE_TYPES},
            "observation_spec": [[k, w] for k, w in obs_spec],
            "action_spec": [[k, w] for k, w in act_spec],
            "joint_names": list(self.joint_names or ()),
            "cameras": dict(sorted(self.cameras.items())),
            "tasks": list(self.tasks),
            "episodes": {k: counts[k] for k in ("done", "accepted", "rejected",
                                                "rejected_by_reason", "yield")},
            "generation": self.generation,
        }
        atomic_write_json(self.root / C.FILE_DATASET_INFO, info)
        stats = {
            "observation": {k: self.obs_moments[k].to_dict([(k, w)]) for k, w in obs_spec},
            "action": {k: self.act_moments[k].to_dict([(k, w)]) for k, w in act_spec},
        }
        atomic_write_json(self.root / C.FILE_DATASET_STATS, stats)
        return info


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def synthesize_dataset(
    store: ArtifactStore,
    specs: Sequence[EpisodeSpec],
    generate: Generator,
    signoff: Signoff,
    *,
    workers: int | None = None,
    generation: Mapping[str, Any] | None = None,
    config: Any = None,
    seeds: Mapping[str, int] | None = None,
    parents: Sequence[str] = (),
    progress: ProgressCallback | None = None,
    cancel: threading.Event | Callable[[], bool] | None = None,
    commit_partial: bool = False,
    start_method: str | None = None,
) -> tuple[Artifact | None, GenerationSummary]:
    """Generate, sign off, record and commit a dataset artifact.

    Args:
        store: the run's artifact store.
        specs: the episode plan (``plan_episodes(mixture, n, seed)``).
        generate, signoff: the expert and the dual sign-off (picklable).
        workers: processes (None = one per core).
        generation: content-determining settings for info.json (seed, mixture, episodes).
        config: the synthesis config for the manifest (not part of the id).
        seeds: named seeds for the manifest (e.g. ``{"run": 7}``).
        parents: ids of artifacts this dataset derives from (e.g. a config artifact).
        progress, cancel: see :func:`~clawgym_ros.synthesis.pool.run_generation`.
        commit_partial: commit what was accepted when cancelled (else nothing is committed).

    Returns:
        (the committed artifact or None when cancelled without commit_partial, the summary).
    """
    with store.stage(C.KIND_DATASET) as staging:
        writer = DatasetWriter(staging.path, generation)
        try:
            summary = run_generation(specs, generate, signoff, workers=workers,
                                     encode=encode_for_dataset, keep_records=False,
                                     on_result=writer.add, progress=progress, cancel=cancel,
                                     start_method=start_method)
        finally:
            info = writer.finish()
        if summary.cancelled and not commit_partial:
            return None, summary
        summary_json = summary.to_dict()
        artifact = staging.commit(
            config=config if config is not None else dict(generation or {}),
            seeds=seeds, parents=parents,
            summary={**summary_json, "tasks": info["tasks"],
                     "observation_dim": sum(w for _, w in info["observation_spec"]),
                     "action_dim": sum(w for _, w in info["action_spec"])},
        )
    return artifact, summary
