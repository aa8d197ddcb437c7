"""Reading dataset artifacts back: metadata, the episode index and episodes as arrays."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore
from clawgym_ros.dataset.episode_mcap import read_episode
from clawgym_ros.dataset.writer import DATASET_FORMAT, DATASET_VERSION, DatasetError
from clawgym_ros.synthesis.episode import EpisodeRecord


class Dataset:
    """A committed dataset artifact.

    Attributes:
        artifact: the artifact (id, manifest, folder).
        info: info.json content.
        stats: stats.json content.
        index: episodes.jsonl rows (accepted episodes, in plan order).
    """

    def __init__(self, artifact: Artifact):
        if artifact.kind != C.KIND_DATASET:
            raise DatasetError(f"artifact {artifact.id} is a {artifact.kind}, not a dataset")
        self.artifact = artifact
        self.info = _load_json(artifact.file(C.FILE_DATASET_INFO))
        if self.info.get("format") != DATASET_FORMAT or self.info.get("version") != \
                DATASET_VERSION:
            raise DatasetError(f"dataset {artifact.id}: format {self.info.get('format')!r} "
                               f"version {self.info.get('version')!r}, expected "
                               f"{DATASET_FORMAT!r} version {DATASET_VERSION}")
        self.stats = _load_json(artifact.file(C.FILE_DATASET_STATS))
        self.index = _load_jsonl(artifact.file(C.FILE_EPISODE_INDEX))

    @property
    def id(self) -> str:
        return self.artifact.id

    def __len__(self) -> int:
        return len(self.index)

    def rejected(self) -> list[dict[str, Any]]:
        """rejected.jsonl rows (plan index, seed, reason codes and details)."""
        return _load_jsonl(self.artifact.file(C.FILE_REJECTED_INDEX))

    def episode_path(self, row: dict[str, Any] | int) -> Path:
        """Path of an episode's MCAP file, by index row or by position in the index."""
        if isinstance(row, int):
            row = self.index[row]
        return self.artifact.file(row["file"])

    def episode(self, position: int, *, images: bool = True) -> EpisodeRecord:
        """Episode at ``position`` in the index, read back as an EpisodeRecord."""
        return read_episode(self.episode_path(position), images=images)

    def episodes(self, *, images: bool = True) -> Iterator[EpisodeRecord]:
        """All accepted episodes, in plan order."""
        for row in self.index:
            yield read_episode(self.episode_path(row), images=images)


def open_dataset(store: ArtifactStore, ref: str) -> Dataset:
    """Open dataset ``ref`` (id or unique prefix) of ``store``.

    Raises:
        ArtifactError: unknown or malformed id.
        DatasetError: not a dataset or an unsupported version.
    """
    return Dataset(store.resolve(ref, C.KIND_DATASET))


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DatasetError(f"{path} is missing or unreadable: {err}") from None


def _load_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as err:
        raise DatasetError(f"{path} is missing or unreadable: {err}") from None


def dataset_group_names(store: ArtifactStore, dataset_ids: Sequence[str]) -> list[str]:
    """Training group names (``task/template/family``) in MCAP datasets' episode indexes, in
    first-seen order (no episode is read)."""
    from clawgym_ros.dataset.table import group_name

    names: dict[str, None] = {}
    for ref in dataset_ids:
        for row in open_dataset(store, ref).index:
            names[group_name(row["task"], row["template"], row["family"])] = None
    return list(names)


def mean_episode_steps(store: ArtifactStore, ref: str) -> float:
    """Mean length (control steps) of a dataset's accepted episodes, from its index (no
    episode is read): what one demonstration costs in simulated steps.

    Raises:
        DatasetError: the dataset has no accepted episode.
    """
    index = open_dataset(store, ref).index
    if not index:
        raise DatasetError(f"dataset {ref} has no accepted episode: no demonstration length")
    return float(sum(int(row["steps"]) for row in index) / len(index))
