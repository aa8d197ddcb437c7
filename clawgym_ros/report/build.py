"""Build ``report.json`` from episode results and commit it with ``report.html`` as an artifact.

The report holds no timestamp: the artifact manifest records when it was created. So the same
results, suite and config give byte-identical report.json and report.html, hence the same
report artifact id (a re-run or a resumed loop finds the existing report instead of a
near-duplicate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import to_dict
from clawgym_ros.evaluation.config import EvalConfig
from clawgym_ros.evaluation.metrics import dimension_scores, episode_motion, evaluate
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.suites import Suite, suite_ref
from clawgym_ros.report.gaps import diagnosis, find_gaps
from clawgym_ros.report.schema import REPORT_KIND, REPORT_SCHEMA_VERSION, validate_report


def episode_record(r: EpisodeResult, cfg: EvalConfig) -> dict[str, Any]:
    """The ``per_episode`` entry of one result (raw time series left out; their metrics in)."""
    return {
        "index": r.index, "seed": r.seed, "perturbation_seed": r.perturbation_seed,
        "task": r.task, "template": r.template, "split": r.split, "family": r.family,
        "families": list(r.families), "intensity": r.intensity,
        "perturbation": dict(r.perturbation), "stages": list(r.stages),
        "stages_reached": list(r.stages_reached), "failed_stage": r.failed_stage,
        "success": r.success, "duration_s": r.duration_s,
        "skill_calls": len(r.skill_calls),
        "skill_calls_legal": sum(c.legal for c in r.skill_calls),
        "violations": dict(r.violations), "goal_consistent": r.goal_consistent,
        "metrics": episode_motion(r, cfg.metrics),
        **({"failure_states": [fs.meta() for fs in r.failure_states]}
           if r.failure_states else {}),
        **({"recovery": dict(r.recovery)} if r.recovery is not None else {}),
    }


def frame_file(key: str) -> str:
    """Artifact-relative file of a failure frame (``<task>/<stage>`` key)."""
    return f"{C.DIR_FAILURE_FRAMES}/{key.replace('/', '__')}.png"


def failure_frames(results: Sequence[EpisodeResult]) -> list[dict[str, Any]]:
    """The report's ``failure_frames``: one failure state per (task, failing stage), with the
    number of failed episodes that stopped there (file: None until a frame is rendered)."""
    from clawgym_ros.evaluation.failure_states import collect, frame_key, pick_frames

    states = collect(results)
    counts: dict[str, int] = {}
    for r in results:
        keys = {frame_key(fs) for fs in r.failure_states}
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    return [{"key": key, "task": fs.task, "stage": fs.stage, "name": fs.name,
             "episode": fs.episode, "template": fs.template, "family": fs.family,
             "intensity": fs.intensity, "time": round(fs.time, 3),
             "failed_here": counts[key], "file": None}
            for key, fs in pick_frames(states).items()]


def _history(history: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(history or ()):
        entry = {"iteration": int(item.get("iteration", i)),
                 "scores": {str(k): dict(v) for k, v in dict(item["scores"]).items()}}
        if item.get("report_id"):
            entry["report_id"] = str(item["report_id"])
        out.append(entry)
    return out


def build_report(
    results: Sequence[EpisodeResult],
    suite: Suite,
    config: EvalConfig,
    history: Sequence[Mapping[str, Any]] | None = None,
    judgments: Sequence[Any] | None = None,
    policy: str = "",
) -> dict[str, Any]:
    """The report as a dict, validated against the schema.

    Args:
        results: one record per episode (any order; sorted by ``index`` here).
        suite: the suite that was run.
        config: the evaluation config (its ``seed`` overrides the suite's).
        history: earlier iterations' ``{"iteration", "scores", "report_id"}`` (the coordinator
            passes the loop's; ``scores`` as in a report's ``scores``).
        judgments: pairwise human judgments to fit (e.g. the run's preference store).
        policy: the evaluated policy's name in the judgments (full checkpoint id or
            ``scripted:...``): its judged strength enters the preference score.

    Raises:
        ReportSchemaError: if the built report does not match the schema (a bug).
    """
    results = sorted(results, key=lambda r: r.index)
    aggregated = evaluate(results, config.metrics, judgments, policy)
    gaps = find_gaps(results, config.metrics)
    suite_info = suite.to_dict()
    suite_info["seed"] = suite.seed if config.seed is None else config.seed
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": REPORT_KIND,
        "suite": suite_info,
        # The worker count is an execution detail (like a timestamp): results are identical
        # for any count, so the report is too.
        # (a report without a calibration keeps the form, and id, it had before the key)
        # The suite by its name or file name (suite_ref): its content is under "suite".
        "config": {k: suite_ref(v) if k == "suite" else v for k, v in to_dict(config).items()
                   if k != "workers" and not (k == "calibration" and not v)},
        "n_episodes": len(results),
        "per_episode": [episode_record(r, config) for r in results],
        "aggregated": aggregated,
        "scores": dimension_scores(aggregated),
        "gaps": gaps,
        "diagnosis": diagnosis(gaps, aggregated, config.metrics),
        "history": _history(history),
    }
    frames = failure_frames(results)
    if frames:
        report["failure_frames"] = frames
    validate_report(report)
    return report


def write_report(
    store: Any,
    results: Sequence[EpisodeResult],
    suite: Suite,
    config: EvalConfig,
    parents: Sequence[str] = (),
    history: Sequence[Mapping[str, Any]] | None = None,
    judgments: Sequence[Any] | None = None,
    frames: Mapping[str, bytes] | None = None,
    policy: str = "",
) -> Any:
    """Build, validate and render the report; commit report.json + report.html (+ the failure
    states and their frames) as an artifact.

    Args:
        store: the run's :class:`~clawgym_ros.artifacts.ArtifactStore`.
        parents: ids of the checkpoint (and configs) evaluated.
        frames: PNG bytes per failure-frame key (``failure_states.render_frames``).

    Returns:
        The committed :class:`~clawgym_ros.artifacts.Artifact` (kind ``report``).
    """
    from clawgym_ros.evaluation.failure_states import collect, encode

    report = build_report(results, suite, config, history, judgments, policy)
    frames = dict(frames or {})
    for entry in report.get("failure_frames", ()):
        if entry["key"] in frames:
            entry["file"] = frame_file(entry["key"])
    seed = report["suite"]["seed"]
    summary = {"suite": suite.name, "episodes": len(results), "gaps": len(report["gaps"]),
               **{d: report["scores"][d]["value"] for d in C.DIMENSIONS}}
    with store.stage(C.KIND_REPORT) as staging:
        write_report_files(staging.path, report, encode(collect(results)), frames)
        return staging.commit(config=config, seeds={"suite": seed}, parents=parents,
                              summary=summary)


def write_report_files(folder: Any, report: dict[str, Any], failure_blob: bytes | None,
                       frames: Mapping[str, bytes]) -> None:
    """Write report.json, report.html and the failure-state files of ``report`` into a
    staging folder (the report's ``failure_frames`` name the frame files)."""
    import json
    from pathlib import Path

    from clawgym_ros.report.html import render_html

    folder = Path(folder)
    text = json.dumps(report, indent=2, sort_keys=True, allow_nan=False) + "\n"
    if failure_blob is not None:
        (folder / C.FILE_FAILURE_STATES).write_bytes(failure_blob)
    images = {}
    for entry in report.get("failure_frames", ()):
        if entry["file"]:
            path = folder / entry["file"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(frames[entry["key"]])
            images[entry["key"]] = frames[entry["key"]]
    # Render from the serialized form, exactly what `clawgym report ID` re-renders from
    # (key order included), so both give the same bytes.
    html = render_html(json.loads(text), images)
    (folder / C.FILE_REPORT_JSON).write_text(text, encoding="utf-8")
    (folder / C.FILE_REPORT_HTML).write_text(html, encoding="utf-8")


def read_report_files(artifact: Any, report: Mapping[str, Any]
                      ) -> tuple[bytes | None, dict[str, bytes]]:
    """The failure-state bytes and frame PNGs a committed report artifact holds."""
    blob_path = artifact.file(C.FILE_FAILURE_STATES)
    blob = blob_path.read_bytes() if blob_path.exists() else None
    frames = {}
    for entry in report.get("failure_frames", ()):
        if entry.get("file"):
            frames[entry["key"]] = artifact.file(entry["file"]).read_bytes()
    return blob, frames
