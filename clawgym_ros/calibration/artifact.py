"""The ``calibration`` artifact: fitted values with intervals, RMSE before/after, an HTML page
with recorded vs simulated joint trajectories, and the content hash of the log it came from.

Content (the id hashes these; wall times go to the manifest's summary only, so the same log,
parameters, bounds and seed give the same id):

* ``calibration.json`` - format, scene, the log (name, sha256 of its bytes or, for a rosbag2
  folder, of its files), fit options, per parameter value / nominal / bounds / sd / 95%
  interval / restart range / identifiable, RMSE before and after per quantity and joint, noise
  levels, warnings, the starts;
* ``calibration.html`` - the same as tables and plots (matplotlib SVG, fixed settings).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore
from clawgym_ros.calibration.fit import UNITS, FitConfig, FitResult

CALIBRATION_FORMAT = "clawgym-calibration"
CALIBRATION_VERSION = 1
FILE_JSON = "calibration.json"
FILE_HTML = "calibration.html"
PLOT_POINTS = 1200


def log_digest(path: str | Path) -> str:
    """sha256 of a log: the file's bytes, or for a folder the sorted (relative name, sha256)
    pairs of its files."""
    path = Path(path)
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256(b"clawgym-log-folder-v1\0")
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix()
        digest.update(f"{rel}\0{hashlib.sha256(file.read_bytes()).hexdigest()}\0".encode())
    return digest.hexdigest()


def round_floats(value: Any) -> Any:
    """Floats to 12 significant digits (stable text across platforms' last bits)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: round_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v) for v in value]
    return value


def calibration_dict(result: FitResult, config: FitConfig, log_name: str,
                     log_sha256: str) -> dict[str, Any]:
    """The ``calibration.json`` content."""
    return round_floats({
        "format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION,
        "scene": config.scene,
        "log": {"name": log_name, "sha256": log_sha256, "duration_s": result.duration_s,
                "samples_fitted": result.samples},
        "fit": {"params": list(config.params),
                "bounds": {k: list(v) for k, v in config.bounds.items()},
                "seed": config.seed, "starts": config.starts, "settle_s": config.settle_s,
                "start_window_s": config.start_window_s, "max_nfev": config.max_nfev,
                "contacts": result.contacts, "objects_moved_m": result.objects_moved_m,
                "newey_west_bandwidth": result.bandwidth, "rollouts": result.rollouts},
        "params": [dataclasses.asdict(p) for p in result.params],
        "values": {p.name: p.value for p in result.params},
        "rmse_before": result.rmse_before, "rmse_after": result.rmse_after,
        "position_rmse_before": result.summary_rmse("before"),
        "position_rmse_after": result.summary_rmse("after"),
        "noise": result.noise, "warnings": result.warnings, "starts": result.starts,
    })


def commit_calibration(store: ArtifactStore, result: FitResult, config: FitConfig,
                       log_path: str | Path) -> Artifact:
    """Write and commit the artifact (atomic: staged, hashed, renamed into place)."""
    path = Path(log_path)
    digest = log_digest(path)
    data = calibration_dict(result, config, path.name, digest)
    page = render_html(data, result)
    summary = {"position_rmse_before": data["position_rmse_before"],
               "position_rmse_after": data["position_rmse_after"],
               "params": len(result.params), "warnings": len(result.warnings),
               "wall_s": round(result.wall_s, 2), "log_sha256": digest}
    files = {FILE_JSON: (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(),
             FILE_HTML: page.encode()}
    return store.put_files(C.KIND_CALIBRATION, files,
                           config={"fit": data["fit"], "scene": config.scene,
                                   "log": data["log"]},
                           seeds={"calibration": config.seed}, summary=summary)


def _svg(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _trajectory_plot(result: FitResult) -> str:
    from matplotlib.figure import Figure

    tr = result.traces
    step = max(1, len(tr["t"]) // PLOT_POINTS)
    t = tr["t"][::step]
    fig = Figure(figsize=(11.0, 13.0))
    axes = fig.subplots(7, 2, sharex=True)
    for j, joint in enumerate(C.ARM_JOINTS):
        rec = tr["recorded"][::step, j]
        ax, axr = axes[j]
        ax.plot(t, rec, color="#222222", lw=1.0, label="recorded")
        ax.plot(t, tr["before"][::step, j], color="#d62728", lw=0.8, ls="--",
                label="simulated, nominal")
        ax.plot(t, tr["after"][::step, j], color="#1f77b4", lw=0.8, label="simulated, fitted")
        ax.set_ylabel(f"{joint}\n(rad)")
        axr.plot(t, 1000 * (tr["before"][::step, j] - rec), color="#d62728", lw=0.8,
                 label="nominal - recorded")
        axr.plot(t, 1000 * (tr["after"][::step, j] - rec), color="#1f77b4", lw=0.8,
                 label="fitted - recorded")
        axr.set_ylabel("error (mrad)")
    axes[0][0].legend(loc="upper right", fontsize=7)
    axes[0][1].legend(loc="upper right", fontsize=7)
    axes[-1][0].set_xlabel("time from the first joint state (s)")
    axes[-1][1].set_xlabel("time from the first joint state (s)")
    fig.tight_layout()
    return _svg(fig)


def render_html(data: dict[str, Any], result: FitResult) -> str:
    """The self-contained page (deterministic: same data, same bytes)."""
    import matplotlib

    from clawgym_ros.report.html import CSS, RC

    with matplotlib.rc_context(RC):
        plot = _trajectory_plot(result)
    esc = html.escape
    rows = []
    for p in data["params"]:
        flag = "yes" if p["identifiable"] else "<b>no</b>"
        rows.append(
            f"<tr><td>{esc(p['name'])}</td><td class=num>{p['value']:.6g}</td>"
            f"<td class=num>[{p['ci_low']:.6g}, {p['ci_high']:.6g}]</td>"
            f"<td class=num>{p['sd']:.3g}</td><td class=num>{p['model_error']:.3g}</td>"
            f"<td class=num>{p['nominal']:g}</td>"
            f"<td class=num>[{p['low']:g}, {p['high']:g}]</td><td>{esc(p['unit'])}</td>"
            f"<td>{flag}</td><td>{esc(p['note'])}</td></tr>")
    rmse_rows = []
    for g in data["rmse_after"]:
        before = np.asarray(data["rmse_before"][g])
        after = np.asarray(data["rmse_after"][g])
        cells = "".join(f"<td class=num>{b:.3g} &rarr; {a:.3g}</td>"
                        for b, a in zip(before, after, strict=True))
        rmse_rows.append(f"<tr><td>{g} ({UNITS[g]})</td>{cells}</tr>")
    warn = "".join(f"<li>{esc(w)}</li>" for w in data["warnings"]) or "<li>none</li>"
    log = data["log"]
    head = "".join(f"<th>{j}</th>" for j in C.ARM_JOINTS)
    ratio = data["position_rmse_after"] / max(data["position_rmse_before"], 1e-300)
    return (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>calibration</title>"
        f"<style>{CSS}</style></head><body><h1>Calibration</h1>"
        f"<p class=\"meta\">log {esc(log['name'])} (sha256 {log['sha256']}), "
        f"{log['duration_s']:.1f} s, {log['samples_fitted']} joint states fitted; scene "
        f"{esc(data['scene'])}; seed {data['fit']['seed']}, {data['fit']['starts']} starts</p>"
        f"<p>Joint position RMSE {data['position_rmse_before']:.4g} rad with the nominal "
        f"model, {data['position_rmse_after']:.4g} rad calibrated (ratio {ratio:.3f}).</p>"
        "<h2>Parameters</h2><table><tr><th>parameter</th><th>fitted</th><th>95% interval</th>"
        "<th>sd</th><th>model error</th><th>nominal</th><th>bounds</th><th>unit</th>"
        "<th>identifiable</th>"
        f"<th>note</th></tr>{''.join(rows)}</table>"
        f"<h2>Warnings</h2><ul class=\"diag\">{warn}</ul>"
        f"<h2>RMSE, nominal &rarr; fitted</h2><table><tr><th></th>{head}</tr>"
        f"{''.join(rmse_rows)}</table>"
        "<h2>Recorded vs simulated joint positions</h2>"
        f"<figure><img src=\"{plot}\" alt=\"joint trajectories\"><figcaption>left: "
        "recorded, simulated with nominal and with fitted parameters; right: their "
        "errors</figcaption></figure></body></html>\n")
