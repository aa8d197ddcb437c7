"""Render ``report.html`` from a report dict: self-contained, deterministic.

Plots are matplotlib SVGs embedded as base64 ``data:`` images (each SVG keeps its own ids, so
several plots on one page cannot clash), rendered with fixed settings (``svg.hashsalt``, text
kept as text, no date in the metadata) so the same report always gives the same bytes. Nothing
is loaded from outside the file.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.report.gaps import family_text, fmt_estimate

#: Fixed matplotlib settings: reproducible SVG bytes whatever the user's matplotlibrc says.
RC = {
    "svg.hashsalt": "clawgym-report",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100.0,
    "savefig.dpi": 100.0,
    "path.simplify": False,
}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
          "#17becf", "#7f7f7f", "#bcbd22")

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1180px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:0}h2{border-bottom:1px solid #ccc;padding-bottom:4px;
margin-top:32px}.meta{color:#666;font-size:.9em}
table{border-collapse:collapse;margin:8px 0;font-size:.88em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.diag li{margin:4px 0}.diag{background:#fff8e6;border-left:4px solid #f0a500;
padding:8px 8px 8px 28px}.plots{display:flex;flex-wrap:wrap;gap:16px}
.plots figure{margin:0}figcaption{font-size:.85em;color:#555;text-align:center}
img{max-width:100%;height:auto}
"""


def _svg_data_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float, height: float, **kwargs: Any) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained", **kwargs)


def _img(uri: str, alt: str, caption: str) -> str:
    return (f'<figure><img src="{uri}" alt="{html.escape(alt)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def plot_degradation(robustness: dict[str, Any]) -> str | None:
    """Success vs intensity per family (with 95% CIs), nominal at intensity 0."""
    families = robustness["families"]
    if not families:
        return None
    nominal = robustness["nominal"]
    fig = _figure(6.4, 3.8)
    ax = fig.add_subplot()
    cells = {(c["family"], c["intensity"]): c for c in robustness["cells"]}
    threshold = None
    for k, (family, info) in enumerate(families.items()):
        xs, ys, lo, hi = [], [], [], []
        if nominal["value"] is not None:
            xs.append(0.0)
            ys.append(nominal["value"])
            lo.append(max(0.0, nominal["value"] - nominal["ci"][0]))
            hi.append(max(0.0, nominal["ci"][1] - nominal["value"]))
        for x in info["intensities"]:
            est = cells[(family, x)]["success"]
            xs.append(x)
            ys.append(est["value"])
            lo.append(max(0.0, est["value"] - est["ci"][0]))
            hi.append(max(0.0, est["ci"][1] - est["value"]))
        color = COLORS[k % len(COLORS)]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=3, color=color,
                    label=family_text(family))
        if info["boundary"] is not None:
            ax.axvline(info["boundary"], color=color, ls=":", lw=1)
        threshold = info["threshold"]
    if threshold is not None:
        ax.axhline(threshold, color="#555", ls="--", lw=1, label=f"threshold {threshold:g}")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("perturbation intensity")
    ax.set_ylabel("success rate")
    ax.set_title("Degradation curves (dotted: boundary intensity)")
    ax.legend(fontsize=8, loc="lower left")
    return _svg_data_uri(fig)


def plot_radar(scores: dict[str, Any]) -> str:
    """Four-dimension radar (values clipped to [0, 1]; n/a dimensions drawn at 0)."""
    import numpy as np

    dims = list(C.DIMENSIONS)
    values = [scores[d]["value"] for d in dims]
    shown = [min(1.0, max(0.0, v)) if v is not None else 0.0 for v in values]
    angles = np.linspace(0, 2 * np.pi, len(dims), endpoint=False)
    fig = _figure(3.8, 3.8)
    ax = fig.add_subplot(projection="polar")
    ax.plot(np.append(angles, angles[0]), shown + shown[:1], color=COLORS[0], marker="o")
    ax.fill(np.append(angles, angles[0]), shown + shown[:1], color=COLORS[0], alpha=0.2)
    ax.set_xticks(angles)
    ax.set_xticklabels([f"{d}\n{'n/a' if v is None else f'{v:.2f}'}"
                        for d, v in zip(dims, values)])
    ax.set_ylim(0, 1)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0])
    ax.set_rlabel_position(22.5)
    ax.set_title("Four dimensions")
    return _svg_data_uri(fig)


def plot_funnel(functional: dict[str, Any]) -> str | None:
    """Per task, the share of episodes reaching each stage (with 95% CIs)."""
    funnel = functional["funnel"]
    if not funnel:
        return None
    tasks = list(funnel)
    cols = min(2, len(tasks))
    nrows = -(-len(tasks) // cols)
    height = max(2.2, 0.32 * max(len(rows) for rows in funnel.values()) + 1.0)
    fig = _figure(4.2 * cols, height * nrows)
    axes = fig.subplots(nrows, cols, squeeze=False).ravel()
    for ax in axes[len(tasks):]:
        ax.set_visible(False)
    for ax, task in zip(axes, tasks):
        rows = funnel[task]
        names = [r["stage"] for r in rows][::-1]
        vals = [r["value"] or 0.0 for r in rows][::-1]
        err = [[(r["value"] or 0) - (r["ci"][0] or 0) for r in rows][::-1],
               [(r["ci"][1] or 0) - (r["value"] or 0) for r in rows][::-1]]
        ax.barh(names, vals, xerr=err, color=COLORS[2], alpha=0.8, capsize=2)
        for y, v in enumerate(vals):
            ax.text(0.02, y, f"{v:.2f}", va="center", fontsize=8, color="white"
                    if v > 0.1 else "black")
        ax.set_xlim(0, 1)
        ax.set_title(f"{task}: stage funnel")
        ax.set_xlabel("share of episodes reaching the stage")
    return _svg_data_uri(fig)


def plot_history(history: Sequence[dict[str, Any]]) -> str | None:
    """Each dimension's score (with CI band) over the loop's iterations."""
    if not history:
        return None
    fig = _figure(6.4, 3.4)
    ax = fig.add_subplot()
    for k, dim in enumerate(C.DIMENSIONS):
        pts = [(h["iteration"], h["scores"][dim]) for h in history
               if dim in h["scores"] and h["scores"][dim]["value"] is not None]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1]["value"] for p in pts], marker="o", color=COLORS[k], label=dim)
        lows = [p[1]["ci"][0] if p[1]["ci"][0] is not None else p[1]["value"] for p in pts]
        highs = [p[1]["ci"][1] if p[1]["ci"][1] is not None else p[1]["value"] for p in pts]
        ax.fill_between(xs, lows, highs, color=COLORS[k], alpha=0.15)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel("score")
    ax.set_title("Iteration history")
    ax.legend(fontsize=8)
    return _svg_data_uri(fig)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()
           ) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = ' class="num"' if i in numeric else ""
            cells.append(f"<td{cls}>{html.escape('' if v is None else str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _num(v: Any, fmt: str = ".3g") -> str:
    return "n/a" if v is None else format(v, fmt)


def render_html(report: dict[str, Any], frames: Mapping[str, bytes] | None = None) -> str:
    """The full HTML page of a (schema-valid) report; ``frames``: the PNG of each entry of
    its ``failure_frames`` (by key), embedded as images."""
    import matplotlib

    with matplotlib.rc_context(RC):
        return _render(report, frames or {})


def _failure_section(report: dict[str, Any], frames: Mapping[str, bytes]) -> list[str]:
    entries = report.get("failure_frames") or []
    if not entries:
        return []
    parts = ["<h2>Where it failed</h2>",
             "<p class=\"meta\">One restorable failure state per failing stage (the moment "
             "the robot stood still after its last stage, or the episode's end), rendered "
             "from the scene camera. Every failed episode's snapshots are stored in "
             f"<code>{C.FILE_FAILURE_STATES}</code>; <code>clawgym synth --from-report</code> "
             "restarts the expert from them.</p><div class=\"plots\">"]
    for e in entries:
        cell = "nominal" if e["family"] == C.FAMILY_NONE else \
            f"{family_text(e['family'])} {e['intensity']:g}"
        caption = (f"{e['task']}: failed at {e['stage']} ({e['failed_here']} episode"
                   f"{'s' if e['failed_here'] != 1 else ''}); shown: episode {e['episode']}, "
                   f"{e['template']}, {cell}, t = {e['time']:.2f} s")
        png = frames.get(e["key"])
        if png is None:
            parts.append(f"<figure><p>(no frame rendered)</p><figcaption>"
                         f"{html.escape(caption)}</figcaption></figure>")
            continue
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        parts.append(_img(uri, f"failure state at {e['stage']}", caption))
    parts.append("</div>")
    return parts


def _render(report: dict[str, Any], frames: Mapping[str, bytes]) -> str:
    agg = report["aggregated"]
    suite = report["suite"]
    cfg = report["config"]
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>ClawGym report: {html.escape(suite['name'])}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>ClawGym evaluation report: {html.escape(suite['name'])}</h1>",
        f"<p class=\"meta\">suite seed {suite['seed']} &middot; {report['n_episodes']} episodes"
        f" &middot; mode {html.escape(str(cfg.get('mode', '')))} &middot; checkpoint "
        f"{html.escape(str(cfg.get('checkpoint_id') or '-'))} &middot; report schema "
        f"v{report['schema_version']}</p>",
        "<h2>Diagnosis</h2><ul class=\"diag\">",
        *[f"<li>{html.escape(line)}</li>" for line in report["diagnosis"]],
        "</ul>",
    ]
    # Scores.
    parts.append("<h2>Four dimensions</h2><div class=\"plots\">")
    parts.append(_img(plot_radar(report["scores"]), "radar of the four dimensions",
                      "Scores clipped to [0, 1]"))
    rows = [(d, fmt_estimate(report["scores"][d]), report["scores"][d]["n"])
            for d in C.DIMENSIONS]
    parts.append("<div>" + _table(["dimension", "value [95% CI]", "n"], rows, (2,))
                 + "<p class=\"meta\">functional = nominal success (Wilson); robustness = mean "
                 "stability (perturbed / nominal success, stratified bootstrap); generalization"
                 " = held-out / in-distribution success (Katz log); preference = mean comfort "
                 "score (bootstrap).</p></div></div>")
    # Robustness.
    rob = agg[C.DIM_ROBUSTNESS]
    parts.append("<h2>Robustness</h2><div class=\"plots\">")
    curve = plot_degradation(rob)
    if curve:
        parts.append(_img(curve, "degradation curves", "Success vs intensity, 95% Wilson CIs"))
    parts.append("</div>")
    rows = [(c["family"], c["intensity"], c["success"]["n"], fmt_estimate(c["success"]),
             fmt_estimate(c["stability"]) if c["stability"] else "-",
             c["dominant_failure_stage"] or "-",
             _num(c["dominant_failure_share"], ".0%") if c["dominant_failure_stage"] else "-")
            for c in rob["cells"]]
    parts.append(_table(["family", "intensity", "n", "success", "stability",
                         "main failure stage", "share of failures"], rows, (1, 2)))
    parts.append(f"<p>Mean stability {fmt_estimate(rob['stability'])}.</p>")
    gps = rob["gps_recovery"]
    if gps["outages"]:
        parts.append(f"<p>GPS outages: {gps['outages']}; recovered "
                     f"{fmt_estimate(gps['recovered'])}; recovery time (s) "
                     f"{fmt_estimate(gps['recovery_s'])}.</p>")
    if rob.get("disturbance_recovery"):
        parts.append("<h3>Disturbances</h3><p class=\"meta\">recovery rate = disturbed "
                     "episodes that still delivered (Wilson 95% CI); regained = disturbed "
                     "episodes back to stage progress; steps to recover = median control steps "
                     "from the disturbance to regained progress (order-statistic 95% CI).</p>")
        parts.append(_table(
            ["task", "cell", "intensity", "event", "episodes", "disturbed", "recovery rate",
             "regained", "steps to recover"],
            [(d["task"], d["family"], d["intensity"], d["event"], d["episodes"],
              d["disturbed"], fmt_estimate(d["recovery_rate"]), fmt_estimate(d["regained"]),
              fmt_estimate(d["steps_to_recover"])) for d in rob["disturbance_recovery"]],
            (2, 4, 5)))
    # Functional.
    fun = agg[C.DIM_FUNCTIONAL]
    parts.append("<h2>Functional correctness</h2><div class=\"plots\">")
    funnel = plot_funnel(fun)
    if funnel:
        parts.append(_img(funnel, "stage funnel", f"Episodes in scope: {fun['scope']}"))
    parts.append("</div>")
    parts.append(_table(["metric", "value [95% CI]", "n"], [
        ("success", fmt_estimate(fun["success"]), fun["success"]["n"]),
        ("skill-call legality", fmt_estimate(fun["skill_legality"]), fun["skill_legality"]["n"]),
        ("goal consistency", fmt_estimate(fun["goal_consistency"]),
         fun["goal_consistency"]["n"]),
    ], (2,)))
    if fun["violations"]:
        parts.append(_table(["feasibility violation", "total", "episodes", "episode rate"], [
            (k, v["total"], v["episodes"], fmt_estimate(v["episode_rate"]))
            for k, v in fun["violations"].items()], (1, 2)))
    parts += _failure_section(report, frames)
    # Generalization.
    gen = agg[C.DIM_GENERALIZATION]
    parts.append("<h2>Generalization</h2>")
    if gen["tasks"]:
        parts.append(_table(["task", "in-distribution", "held-out", "ratio"], [
            (t, fmt_estimate(v["in_distribution"]), fmt_estimate(v["held_out"]),
             fmt_estimate(v["ratio"])) for t, v in gen["tasks"].items()]))
        parts.append(_table(["held-out template", "success", "ratio", "main failure stage"], [
            (k, fmt_estimate(v["success"]), fmt_estimate(v["ratio"]),
             v["dominant_failure_stage"] or "-") for k, v in gen["templates"].items()]))
    else:
        parts.append("<p>No held-out templates in this suite.</p>")
    # Preference.
    pref = agg[C.DIM_PREFERENCE]
    parts.append("<h2>Human preference</h2>")
    units = {"jerk_rms": "m/s^3", "hesitation_count": "per episode", "hesitation_s": "s",
             "rhythm_entropy": "0..1", "approach_speed": "m/s"}
    parts.append(_table(["metric", "unit", "mean [95% CI]", "n"], [
        (k, units[k], fmt_estimate(v), v["n"]) for k, v in pref["motion"].items()]
        + [("comfort score", "0..1", fmt_estimate(pref["comfort"]), pref["comfort"]["n"]),
           ("recovery speed slope", "1/s", fmt_estimate(pref["recovery"]["slope"]),
            pref["recovery"]["slope"]["n"])], (3,)))
    if pref["judgments"]:
        bt = pref["judgments"]
        parts.append(f"<p>Bradley-Terry fit of {bt['n']} pairwise judgments (ridge "
                     f"{bt['ridge']:g}):</p>")
        parts.append(_table(["rank", "item", "score [95% CI]", "wins", "comparisons"], [
            (s["rank"], s["item"], f"{s['score']:+.3f} [{s['ci'][0]:+.3f}, {s['ci'][1]:+.3f}]",
             s["wins"], s["comparisons"]) for s in bt["scores"]], (0, 3, 4)))
        if pref.get("policy"):
            part = pref["policy"]
            parts.append(f"<p>This policy ({html.escape(part['item'])}) is preferred over the "
                         f"other judged items with mean probability "
                         f"{fmt_estimate(part['judged'])} ({part['judged']['n']} judgments); "
                         f"preference score = {1 - part['weight']:g} x comfort + "
                         f"{part['weight']:g} x that = {fmt_estimate(part['score'])}.</p>")
    # Gaps.
    parts.append("<h2>Capability gaps (ranked)</h2>")
    if report["gaps"]:
        parts.append(_table(["rank", "condition", "capability", "deviation", "significant",
                             "evidence"], [
            (g["rank"], g["condition"], g["capability"], _num(g["deviation"], ".2f"),
             "yes" if g["significant"] else "no", g["evidence"]) for g in report["gaps"]],
            (0, 3)))
    else:
        parts.append("<p>No gaps.</p>")
    # History.
    hist = plot_history(report["history"])
    if hist:
        parts.append("<h2>Iteration history</h2><div class=\"plots\">")
        parts.append(_img(hist, "iteration history", "Scores per loop iteration, 95% CIs"))
        parts.append("</div>")
    # Episodes.
    parts.append(f"<h2>Episodes</h2><details><summary>{report['n_episodes']} episodes"
                 "</summary>")
    parts.append(_table(["#", "seed", "task", "template", "split", "family", "intensity",
                         "success", "stopped at", "duration (s)"], [
        (e["index"], e["seed"], e["task"], e["template"], e["split"], e["family"],
         e["intensity"], "yes" if e["success"] else "no", e["failed_stage"] or "-",
         _num(e["duration_s"], ".2f")) for e in report["per_episode"]], (0, 1, 6, 9)))
    parts.append("</details></body></html>\n")
    return "\n".join(parts)
