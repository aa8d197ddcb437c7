"""Visual inspection with Rerun (``clawgym view``): an episode of a dataset, or a report.

An episode (one MCAP file of a dataset artifact, read back with
:func:`~clawgym_ros.dataset.episode_mcap.read_episode`) is logged on two timelines, ``step``
(control step) and ``sim_time`` (seconds), under these entity paths:

=================================  ================================================  ==========
entity                             what                                              rows
=================================  ================================================  ==========
``joints/{position,velocity,       one Scalars series per joint (true state)         T each
effort}/<joint>``
``objects/object_<i>``             Transform3D (x, y, z + quaternion) of each free   T each
                                   object, a small box drawn at it
``tool``                           Transform3D of the tool (when observed)           T
``actions/<key>/<i>``              the commanded action, one series per component    T each
``physics/contact_force``,         largest contact force (N), unintended contact     T each
``physics/collision``              0/1
``cameras/<camera>``               the recorded RGB frames (datasets made with       T
                                   ``--images``)
``stages``                         TextLog: each stage at the time it was reached    stages
``skills``                         TextLog: each skill call at its start             calls
``perturbation``                   TextLog at step 0: family, intensity, schedule,   1
                                   parameters (the MCAP's ``perturbation_state``)
``episode``                        static TextDocument: task, template, seed,        static
                                   outcome, goal
=================================  ================================================  ==========

A report is logged on the ``episode`` timeline (one row per evaluated episode):
``episodes/success``, ``episodes/stages_reached``, ``episodes/metrics/<name>`` (Scalars),
``episodes/summary`` (TextLog: task/template, cell, failed stage) and, static, one image per
failure frame under ``failure_frames/<task>/<stage>``.

Where it goes: to a Rerun viewer when one listens (``rerun`` started on this machine, gRPC
port 9876 by default), else into an ``.rrd`` file (``rerun FILE.rrd`` opens it later).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError

APP_ID = "clawgym"
OBJECT_BOX_HALF_SIZE = 0.02


class ViewError(ClawgymError):
    """What to view is not an episode or a report, or Rerun is missing."""


def _rr() -> Any:
    try:
        import rerun as rr
    except ImportError:
        raise ViewError("rerun-sdk is not installed (pinned in requirements.txt: run make "
                        "setup)") from None
    return rr


def viewer_listening(address: str, timeout: float = 0.3) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (a running viewer)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def open_stream(name: str, save: str | Path | None, viewer: str) -> tuple[Any, str]:
    """A recording stream to a viewer (when ``save`` is None and one listens at ``viewer``)
    or to the ``.rrd`` file ``save``; returns (stream, where it goes)."""
    rr = _rr()
    rec = rr.RecordingStream(APP_ID, recording_id=name)
    rec.set_log_time_enabled(False)   # the episode's own timelines only (no wall clock)
    if save is None and viewer_listening(viewer):
        url = f"rerun+http://{viewer}/proxy"
        rec.connect_grpc(url)
        return rec, url
    if save is None:
        raise ViewError(f"no Rerun viewer listens at {viewer} and no file was given")
    rec.save(str(save))
    return rec, str(save)


def _columns(rec: Any, path: str, times: np.ndarray, archetype_columns: Any) -> None:
    rr = _rr()
    steps = np.arange(len(times))
    rec.send_columns(path, indexes=[rr.TimeColumn("step", sequence=steps),
                                    rr.TimeColumn("sim_time", duration=times)],
                     columns=archetype_columns)


def _scalars(rec: Any, path: str, times: np.ndarray, values: np.ndarray) -> None:
    rr = _rr()
    _columns(rec, path, times, rr.Scalars.columns(scalars=np.asarray(values, np.float64)))


def _poses(rec: Any, path: str, times: np.ndarray, poses: np.ndarray) -> None:
    """(T, 7) x, y, z, qw, qx, qy, qz -> Transform3D rows (Rerun quaternions are xyzw)."""
    rr = _rr()
    xyzw = np.concatenate([poses[:, 4:7], poses[:, 3:4]], axis=1)
    _columns(rec, path, times, rr.Transform3D.columns(translation=poses[:, :3],
                                                      quaternion=xyzw))


def _at(rec: Any, step: int, t: float) -> None:
    rec.set_time("step", sequence=step)
    rec.set_time("sim_time", duration=float(t))


def log_episode(rec: Any, record: Any) -> dict[str, int]:
    """Log one :class:`~clawgym_ros.synthesis.episode.EpisodeRecord`; returns the row count
    of every entity logged on the timelines."""
    rr = _rr()
    times = np.asarray(record.time, np.float64)
    steps = len(times)
    rows: dict[str, int] = {}
    for kind, values in (("position", record.joint_position),
                         ("velocity", record.joint_velocity), ("effort", record.joint_effort)):
        for j, name in enumerate(record.joint_names):
            path = f"joints/{kind}/{name}"
            _scalars(rec, path, times, values[:, j])
            rows[path] = steps
    poses = record.observations.get(C.OBS_OBJECT_POSES)
    if poses is not None and poses.shape[1] % 7 == 0:
        for i in range(poses.shape[1] // 7):
            path = f"objects/object_{i}"
            _poses(rec, path, times, poses[:, 7 * i:7 * i + 7])
            rec.log(path, rr.Boxes3D(half_sizes=[[OBJECT_BOX_HALF_SIZE] * 3]), static=True)
            rows[path] = steps
    tool = record.observations.get(C.OBS_TOOL_POSE)
    if tool is not None and tool.shape[1] == 7:
        _poses(rec, "tool", times, tool)
        rows["tool"] = steps
    for key, values in record.actions.items():
        for i in range(values.shape[1]):
            path = f"actions/{key}/{i}"
            _scalars(rec, path, times, values[:, i])
            rows[path] = steps
    _scalars(rec, "physics/contact_force", times, record.contact_force)
    _scalars(rec, "physics/collision", times, record.collision.astype(np.float64))
    rows["physics/contact_force"] = rows["physics/collision"] = steps
    for camera, frames in record.images.items():
        path = f"cameras/{camera}"
        for k in range(len(frames)):
            _at(rec, k, times[k])
            rec.log(path, rr.Image(frames[k], color_model="RGB"))
        rows[path] = len(frames)
    for stage in record.stages:
        k = int(np.searchsorted(times, stage.time - 1e-9))
        _at(rec, min(k, steps - 1), stage.time)
        rec.log("stages", rr.TextLog(stage.name, level="INFO"))
    rows["stages"] = len(record.stages)
    for call in record.skill_calls:
        k = int(np.searchsorted(times, call.start - 1e-9))
        _at(rec, min(k, steps - 1), call.start)
        rec.log("skills", rr.TextLog(f"{call.name} {json.dumps(call.args, sort_keys=True)} "
                                     f"-> {call.outcome}", level="INFO"))
    rows["skills"] = len(record.skill_calls)
    _at(rec, 0, times[0])
    rec.log("perturbation", rr.TextLog(
        f"family={record.family} intensity={record.intensity:g} "
        f"schedule={record.perturbation_schedule} "
        f"params={json.dumps(record.perturbation_params, sort_keys=True)}", level="INFO"))
    rows["perturbation"] = 1
    rec.log("episode", rr.TextDocument(json.dumps({
        "task": record.task, "template": record.template, "seed": record.seed,
        "episode_index": record.episode_index, "difficulty": record.difficulty,
        "success": record.outcome.success, "reason": record.outcome.reason,
        "goal": record.goal, "achieved": record.achieved, "origin": record.origin,
    }, indent=2, default=str), media_type="text/markdown"), static=True)
    return rows


def log_report(rec: Any, report: Mapping[str, Any], folder: Path) -> dict[str, int]:
    """Log a report's per-episode records and its failure frames; returns the row counts."""
    rr = _rr()
    episodes = list(report.get("per_episode", ()))
    index = np.array([int(e["index"]) for e in episodes], dtype=np.int64)
    rows: dict[str, int] = {}

    def series(path: str, values: list[float | None]) -> None:
        keep = [k for k, v in enumerate(values) if v is not None]
        rec.send_columns(path, indexes=[rr.TimeColumn("episode", sequence=index[keep])],
                         columns=rr.Scalars.columns(scalars=np.array(
                             [values[k] for k in keep], dtype=np.float64)))
        rows[path] = len(keep)

    series("episodes/success", [float(e["success"]) for e in episodes])
    series("episodes/stages_reached", [float(len(e["stages_reached"])) for e in episodes])
    names = sorted({m for e in episodes for m in e.get("metrics", {})})
    for name in names:
        series(f"episodes/metrics/{name}", [e.get("metrics", {}).get(name) for e in episodes])
    for e in episodes:
        rec.set_time("episode", sequence=int(e["index"]))
        rec.log("episodes/summary", rr.TextLog(
            f"{e['task']}/{e['template']} cell={e['family']} intensity={e['intensity']:g} "
            f"success={e['success']} failed_stage={e.get('failed_stage') or '-'}",
            level="INFO" if e["success"] else "WARN"))
    rows["episodes/summary"] = len(episodes)
    for frame in report.get("failure_frames", ()):
        if frame.get("file"):
            path = f"failure_frames/{frame['key']}"
            rec.log(path, rr.EncodedImage(path=folder / frame["file"]), static=True)
            rows[path] = 0
    return rows


def resolve(run_dir: str | Path, ref: str) -> tuple[str, Any, str]:
    """What ``clawgym view REF`` shows: ``("episode", record, name)`` for an ``.mcap`` file
    or ``DATASET_ID[:INDEX]``, ``("report", (report dict, folder), name)`` for a report id.

    Raises:
        ViewError: another artifact kind or an index outside the dataset;
        ArtifactError: an unknown id.
    """
    from clawgym_ros.dataset.episode_mcap import read_episode

    path = Path(ref)
    if ref.endswith(".mcap"):
        if not path.is_file():
            raise ViewError(f"{ref}: no such episode file (an .mcap file, a dataset id with "
                            "an optional :INDEX, or a report id)")
        return "episode", read_episode(path), path.stem
    from clawgym_ros.artifacts import ArtifactStore

    ident, sep, position = ref.partition(":")
    store = ArtifactStore(run_dir)
    artifact = store.resolve(ident)
    if artifact.kind == C.KIND_DATASET:
        from clawgym_ros.dataset.reader import Dataset

        dataset = Dataset(artifact)
        if not sep:
            position = "0"
        if not position.isdigit() or int(position) >= len(dataset):
            raise ViewError(f"episode index {position!r} of dataset {artifact.id[:12]} is "
                            f"invalid; allowed: 0..{len(dataset) - 1}")
        k = int(position)
        return "episode", dataset.episode(k), f"{artifact.id[:12]}-ep{k}"
    if artifact.kind == C.KIND_REPORT:
        if sep:
            raise ViewError(f"{ref}: a report takes no episode index (it logs every episode)")
        report = json.loads(artifact.file(C.FILE_REPORT_JSON).read_text(encoding="utf-8"))
        return "report", (report, artifact.path), f"report-{artifact.id[:12]}"
    raise ViewError(f"{ref} is a {artifact.kind} artifact; clawgym view shows a dataset episode "
                    "(DATASET_ID[:INDEX] or an .mcap file) or a report")
