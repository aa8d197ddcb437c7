"""Re-render a committed report's HTML from its report.json (``clawgym report ID``)."""

from __future__ import annotations

import json
from pathlib import Path

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore, atomic_write_text
from clawgym_ros.errors import ArtifactError
from clawgym_ros.report.html import render_html
from clawgym_ros.report.schema import validate_report


def load_report(run_dir: str | Path, ref: str) -> tuple[str, dict]:
    """Resolve a report artifact and read its validated report.json.

    Returns:
        (full artifact id, report dict).

    Raises:
        ArtifactError: unknown / malformed id, not a report, unreadable report.json.
        ReportSchemaError: report.json does not match the schema.
    """
    art = ArtifactStore(run_dir).resolve(ref, C.KIND_REPORT)
    path = art.file(C.FILE_REPORT_JSON)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ArtifactError(f"report {art.id[:12]}: cannot read {path}: {err}") from None
    validate_report(report, str(path))
    return art.id, report


def rerender(run_dir: str | Path, ref: str, out: str | Path | None = None) -> Path:
    """Render report ``ref`` to ``out`` (default ``<run>/reports/<id>.html``) atomically.

    The artifact itself is never modified (its files are content-addressed).

    Returns:
        The path written.
    """
    from clawgym_ros.report.build import read_report_files

    art_id, report = load_report(run_dir, ref)
    artifact = ArtifactStore(run_dir).get(art_id, C.KIND_REPORT)
    try:
        _, frames = read_report_files(artifact, report)
    except OSError as err:
        raise ArtifactError(f"report {art_id[:12]}: cannot read a failure frame: {err}"
                            ) from None
    target = Path(out) if out else Path(run_dir) / C.DIR_RENDERED_REPORTS / f"{art_id}.html"
    return atomic_write_text(target, render_html(report, frames))
