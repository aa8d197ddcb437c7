"""Content-addressed artifact store.

Layout under a run directory::

    <run>/artifacts/<kind>/<id>/manifest.json   (kind, id, created, config, seeds, parents, ...)
    <run>/artifacts/<kind>/<id>/...             (content files)
    <run>/artifacts/.staging/<kind>-w<host>-<pid>-<start>-<tmp>/
                                                (work in progress, never visible under an id)

The id is the sha256 of the kind and the content files (relative path + file hash), so the same
content always gets the same id, whatever the time or the number of workers that produced it.
The manifest is not part of the id. An artifact appears under its id only by an atomic rename
of a complete staging folder. A staging folder's name records its writer (host, pid, process
start time): opening the store removes the folders whose writer on this host is dead (a killed
synthesis left its folder behind forever), and folders of an older layout, without a writer,
once they are a day old.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.artifacts.atomic import default_mode, fsync_dir
from clawgym_ros.artifacts.provenance import git_commit, package_versions
from clawgym_ros.config import to_dict
from clawgym_ros.errors import ArtifactError

MANIFEST_SCHEMA_VERSION = 1
ID_LENGTH = 64
MIN_PREFIX_LENGTH = 8
_ID_PATTERN = re.compile(rf"^[0-9a-f]{{{MIN_PREFIX_LENGTH},{ID_LENGTH}}}$")
_CHUNK = 1 << 20
#: A staging folder without a recorded writer (older layout) is stale after this many seconds.
STALE_UNTAGGED_S = 24 * 3600
_STAGING_NAME = re.compile(r"^[a-z]+-w(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<start>\d+)-")
_HOST = hashlib.sha256(os.uname().nodename.encode()).hexdigest()[:8]


def _start_time(pid: int) -> int:
    """A process's start time in clock ticks since boot (0 where /proc is not available)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _writer_alive(pid: int, start: int) -> bool:
    """Whether process ``pid`` started at ``start`` still runs (a reused pid does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != b"Z" and (not start or _start_time(pid) in (0, start))


def clean_stale_staging(staging_root: Path) -> list[Path]:
    """Remove the staging folders whose writer is gone; returns those removed.

    Only folders written on this host are judged by their writer (a pid means nothing on
    another host sharing the run directory); a folder of the older layout is removed once
    :data:`STALE_UNTAGGED_S` old. Never raises: a read-only run directory is left as it is.
    """
    removed = []
    try:
        entries = list(os.scandir(staging_root))
    except OSError:
        return removed
    now = dt.datetime.now().timestamp()
    for entry in entries:
        match = _STAGING_NAME.match(entry.name)
        try:
            if match:
                if match["host"] != _HOST or _writer_alive(int(match["pid"]),
                                                           int(match["start"])):
                    continue
            elif now - entry.stat(follow_symlinks=False).st_mtime < STALE_UNTAGGED_S:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def validate_id_syntax(ref: object) -> str:
    """Check that ``ref`` looks like an artifact id or an id prefix.

    An id is 64 lowercase hex characters (sha256); a unique prefix of at least 8 is accepted.
    Nothing else (paths, ``..``, upper case, whitespace) can pass, so a checked id can never
    resolve outside the run directory.

    Returns:
        The id, unchanged.

    Raises:
        ArtifactError: if the id is malformed.
    """
    if not isinstance(ref, str) or not _ID_PATTERN.match(ref):
        raise ArtifactError(
            f"artifact id {ref!r} is malformed: expected {MIN_PREFIX_LENGTH}-{ID_LENGTH} "
            "lowercase hex characters (a sha256 or a unique prefix of one)"
        )
    return ref


def file_sha256(path: Path) -> str:
    """sha256 of one file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def content_id(kind: str, files: Mapping[str, str]) -> str:
    """The artifact id of ``kind`` content with ``files`` (relative path -> sha256)."""
    digest = hashlib.sha256()
    digest.update(f"clawgym-artifact-v1\0{kind}\0".encode())
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\0".encode())
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What an artifact is and where it came from."""

    kind: str
    id: str
    created: str
    config: dict[str, Any]
    seeds: dict[str, int]
    parents: list[str]
    versions: dict[str, str]
    git_commit: str
    files: dict[str, str]
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)
    schema_version: int = MANIFEST_SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_file(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError) as err:
            raise ArtifactError(f"manifest {path} is unreadable or malformed: {err}") from None


@dataclasses.dataclass(frozen=True)
class Artifact:
    """A committed artifact: its manifest and its folder."""

    manifest: Manifest
    path: Path

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def kind(self) -> str:
        return self.manifest.kind

    def file(self, rel: str) -> Path:
        """Path of one content file, refusing names that leave the artifact folder."""
        target = (self.path / rel).resolve()
        if self.path.resolve() not in target.parents:
            raise ArtifactError(f"file {rel!r} is outside artifact {self.id}")
        return target


class Staging:
    """A folder to write an artifact's content into; :meth:`commit` publishes it atomically."""

    def __init__(self, store: ArtifactStore, kind: str, path: Path):
        self.store = store
        self.kind = kind
        self.path = path
        self.artifact: Artifact | None = None

    def commit(
        self,
        *,
        config: Any = None,
        seeds: Mapping[str, int] | None = None,
        parents: Sequence[str] = (),
        summary: Mapping[str, Any] | None = None,
    ) -> Artifact:
        """Hash the content, write the manifest and rename the folder to its id.

        Args:
            config: the config that produced the content (dataclass or mapping).
            seeds: named seeds used (e.g. ``{"run": 7}``).
            parents: ids of the artifacts this one was made from; they must exist.
            summary: small JSON-able facts for listings (counts, metrics).

        Returns:
            The committed artifact. If an artifact with the same id exists, it is returned and
            the staged copy is discarded.

        Raises:
            ArtifactError: if a parent is unknown or the staging folder is empty.
        """
        if self.artifact is not None:
            return self.artifact
        parent_ids = [self.store.resolve(p).id for p in parents]
        files = {}
        for file in sorted(self.path.rglob("*")):
            if file.is_file():
                rel = file.relative_to(self.path).as_posix()
                if rel == C.FILE_MANIFEST:
                    raise ArtifactError(f"content file name {rel!r} is reserved")
                files[rel] = file_sha256(file)
        if not files:
            raise ArtifactError(f"refusing to commit an empty {self.kind} artifact")
        art_id = content_id(self.kind, files)
        manifest = Manifest(
            kind=self.kind,
            id=art_id,
            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            config=to_dict(config) if config is not None else {},
            seeds={k: int(v) for k, v in (seeds or {}).items()},
            parents=parent_ids,
            versions=package_versions(),
            git_commit=git_commit(),
            files=files,
            summary=to_dict(dict(summary or {})),
        )
        manifest_path = self.path / C.FILE_MANIFEST
        with open(manifest_path, "w", encoding="utf-8") as handle:
            handle.write(manifest.to_json())
            handle.flush()
            os.fsync(handle.fileno())
        final = self.store.kind_dir(self.kind) / art_id
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(self.path, final)
            fsync_dir(final.parent)
        except OSError:
            if not (final / C.FILE_MANIFEST).is_file():
                raise
            # Same content committed before (or concurrently): keep the existing one.
            shutil.rmtree(self.path, ignore_errors=True)
            self.artifact = self.store.get(art_id)
            return self.artifact
        self.artifact = Artifact(manifest, final)
        return self.artifact


class ArtifactStore:
    """Artifacts of one run directory."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.root = self.run_dir / C.DIR_ARTIFACTS
        clean_stale_staging(self.root / C.DIR_STAGING)

    def kind_dir(self, kind: str) -> Path:
        if kind not in C.ARTIFACT_KINDS:
            raise ArtifactError(f"artifact kind {kind!r} is unknown; allowed: "
                                + ", ".join(C.ARTIFACT_KINDS))
        return self.root / kind

    @contextlib.contextmanager
    def stage(self, kind: str) -> Iterator[Staging]:
        """Context manager giving a :class:`Staging` folder; removed unless committed."""
        self.kind_dir(kind)
        staging_root = self.root / C.DIR_STAGING
        staging_root.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        path = Path(tempfile.mkdtemp(prefix=f"{kind}-w{_HOST}-{pid}-{_start_time(pid)}-",
                                     dir=staging_root))
        path.chmod(default_mode(directory=True))     # the artifact folder, once renamed
        staging = Staging(self, kind, path)
        try:
            yield staging
        finally:
            if staging.artifact is None or path.exists():
                shutil.rmtree(path, ignore_errors=True)

    def put_files(
        self, kind: str, files: Mapping[str, bytes], **commit_kwargs: Any
    ) -> Artifact:
        """Commit an artifact made of in-memory files (relative path -> bytes)."""
        with self.stage(kind) as staging:
            for rel, data in files.items():
                target = staging.path / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            return staging.commit(**commit_kwargs)

    def resolve(self, ref: object, kind: str | None = None) -> Artifact:
        """Find the artifact with id (or unique id prefix) ``ref``.

        Raises:
            ArtifactError: malformed, unknown, ambiguous, of another kind, or outside the run.
        """
        ref = validate_id_syntax(ref)
        kinds = [kind] if kind else list(C.ARTIFACT_KINDS)
        if kind:
            self.kind_dir(kind)
        matches = []
        for k in C.ARTIFACT_KINDS:
            folder = self.root / k
            if folder.is_dir():
                matches += [(k, p) for p in folder.iterdir() if p.name.startswith(ref)]
        if not matches:
            raise ArtifactError(f"unknown artifact id {ref!r} in run directory {self.run_dir}")
        if len(matches) > 1:
            raise ArtifactError(f"artifact id prefix {ref!r} is ambiguous in {self.run_dir}: "
                                + ", ".join(p.name[:16] for _, p in matches[:5]))
        found_kind, path = matches[0]
        if found_kind not in kinds:
            raise ArtifactError(f"artifact {ref!r} is a {found_kind}, expected a {kind}")
        resolved = path.resolve()
        if self.root.resolve() not in resolved.parents:
            raise ArtifactError(f"artifact {ref!r} resolves outside {self.root}")
        return self.get(path.name, found_kind)

    def get(self, art_id: str, kind: str | None = None) -> Artifact:
        """Load a committed artifact by full id (and kind, if known)."""
        validate_id_syntax(art_id)
        candidates = [kind] if kind else list(C.ARTIFACT_KINDS)
        for k in candidates:
            path = self.root / k / art_id
            manifest_path = path / C.FILE_MANIFEST
            if manifest_path.is_file():
                manifest = Manifest.from_file(manifest_path)
                if manifest.id != art_id or manifest.kind != k:
                    raise ArtifactError(f"manifest of {path} does not match its id and kind")
                return Artifact(manifest, path)
        raise ArtifactError(f"unknown artifact id {art_id!r} in run directory {self.run_dir}")

    def verify(self, artifact: Artifact) -> None:
        """Recompute content hashes; raise if any file was changed, added or removed.

        Raises:
            ArtifactError: naming the first file that does not match the manifest.
        """
        found = {}
        for file in sorted(artifact.path.rglob("*")):
            rel = file.relative_to(artifact.path).as_posix()
            if file.is_file() and rel != C.FILE_MANIFEST:
                found[rel] = file_sha256(file)
        expected = artifact.manifest.files
        for rel in sorted(set(found) | set(expected)):
            if found.get(rel) != expected.get(rel):
                state = "missing" if rel not in found else (
                    "unexpected" if rel not in expected else "modified")
                raise ArtifactError(f"artifact {artifact.id[:12]} is corrupt: file {rel!r} is "
                                    f"{state} (sha256 mismatch with its manifest)")
        if content_id(artifact.kind, found) != artifact.id:
            raise ArtifactError(f"artifact {artifact.id[:12]} is corrupt: content id mismatch")

    def list(self, kind: str | None = None) -> list[Artifact]:
        """All committed artifacts (of one kind), oldest first."""
        out = []
        for k in [kind] if kind else C.ARTIFACT_KINDS:
            folder = self.kind_dir(k)
            if folder.is_dir():
                for path in folder.iterdir():
                    if (path / C.FILE_MANIFEST).is_file():
                        out.append(self.get(path.name, k))
        return sorted(out, key=lambda a: (a.manifest.created, a.id))

    def lineage(self, ref: str) -> dict[str, Any]:
        """The tree of an artifact's parents down to their configs and seeds.

        Returns:
            ``{"id", "kind", "created", "config", "seeds", "git_commit", "parents": [...]}``.
        """
        return self._lineage(self.resolve(ref), set())

    def _lineage(self, artifact: Artifact, seen: set[str]) -> dict[str, Any]:
        m = artifact.manifest
        node: dict[str, Any] = {
            "id": m.id, "kind": m.kind, "created": m.created, "config": m.config,
            "seeds": m.seeds, "git_commit": m.git_commit, "summary": m.summary, "parents": [],
        }
        if m.id in seen:
            node["parents"] = "(cycle)"
            return node
        for parent in m.parents:
            node["parents"].append(self._lineage(self.get(parent), seen | {m.id}))
        return node


def format_lineage(tree: Mapping[str, Any], indent: str = "") -> list[str]:
    """Render a :meth:`ArtifactStore.lineage` tree as text lines."""
    seeds = ", ".join(f"{k}={v}" for k, v in tree["seeds"].items()) or "-"
    lines = [f"{indent}{tree['kind']} {tree['id']}  created {tree['created']}  seeds: {seeds}"
             f"  commit {tree['git_commit'][:12]}"]
    config = json.dumps(tree["config"], sort_keys=True)
    if len(config) > 200:
        config = config[:197] + "..."
    lines.append(f"{indent}  config: {config}")
    parents = tree["parents"]
    if isinstance(parents, str):
        lines.append(f"{indent}  {parents}")
        return lines
    for parent in parents:
        lines += format_lineage(parent, indent + "    ")
    return lines
