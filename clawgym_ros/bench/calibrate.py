"""`clawgym bench calibrate`: calibration on the stand-in robot (the twin), scored against its
hidden values.

Per seed: an excitation (seeded), hidden values drawn by ``twin.draw_truth(seed)``, the twin's
log written to an MCAP file and read back, ``calibrate`` with every parameter from 3 starts.
Reported: the share of hidden values inside their reported 95% intervals (all parameters;
those the log identifies; the parameters the twin offsets from nominal; the offset physical
ones the log identifies, with their relative errors), joint position RMSE
after / before, wall time of the fit (and of the twin's recording) and the machine's load
average (the machine may be shared: wall times are noisy). Full: 5 seeds x 60 s logs;
quick: 1 seed x 20 s.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def bench_calibrate(quick: bool = False, seed: int = 0,
                    twin_timestep: float | None = None) -> dict[str, Any]:
    from clawgym_ros.calibration.fit import FitConfig, calibrate
    from clawgym_ros.calibration.log import read_log
    from clawgym_ros.calibration.twin import write_twin_log
    from clawgym_ros.sim import calibration_params as P

    seeds = [seed] if quick else [seed + k for k in range(5)]
    duration = 20.0 if quick else 60.0
    names = P.expand_names(P.DEFAULT_PARAMS)
    rows = []
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-calibrate-") as tmp:
        for s in seeds:
            path = Path(tmp) / f"twin_{s}.mcap"
            t0 = time.perf_counter()
            truth = write_twin_log(path, s, duration, timestep=twin_timestep)
            record_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            log = read_log(path)
            config = FitConfig(params=names, bounds=P.resolve_bounds(names), seed=s)
            result = calibrate(log, config)
            fit_s = time.perf_counter() - t0
            params = []
            for p in result.params:
                true = truth[p.name]
                params.append({
                    "name": p.name, "true": true, "fitted": p.value, "ci": [p.ci_low, p.ci_high],
                    "sd": p.sd, "inside": bool(p.ci_low <= true <= p.ci_high),
                    "identifiable": p.identifiable,
                    "offset": bool(true != P.PARAMS[p.name].nominal)})
            rows.append({
                "seed": s, "log_s": log.duration, "record_s": round(record_s, 2),
                "fit_and_read_s": round(fit_s, 2), "rollouts": result.rollouts,
                "position_rmse_before": result.summary_rmse("before"),
                "position_rmse_after": result.summary_rmse("after"),
                "rmse_ratio": result.summary_rmse("after") / result.summary_rmse("before"),
                "params": params, "warnings": result.warnings})
    every = [p for r in rows for p in r["params"]]

    def share(items: list[dict[str, Any]]) -> dict[str, Any]:
        inside = sum(p["inside"] for p in items)
        return {"inside": inside, "total": len(items),
                "share": round(inside / len(items), 4) if items else None}

    ratios = [r["rmse_ratio"] for r in rows]
    offset_physics = [p for p in every if p["offset"] and p["identifiable"]
                      and not p["name"].startswith(P.BIAS_PREFIX)]
    rel = [abs(p["fitted"] - p["true"]) / abs(p["true"]) for p in offset_physics]
    walls = [r["fit_and_read_s"] for r in rows]
    return {
        "seeds": seeds, "log_s": duration, "twin_timestep": twin_timestep,
        "coverage_all": share(every),
        "coverage_identifiable": share([p for p in every if p["identifiable"]]),
        "coverage_offset": share([p for p in every if p["offset"]]),
        "coverage_offset_physics": share(offset_physics),
        "relative_error_offset_physics": {"max": max(rel), "median": float(np.median(rel))},
        "rmse_ratio_max": max(ratios), "rmse_ratio_mean": float(np.mean(ratios)),
        "fit_wall_s_max": max(walls), "fit_wall_s_mean": float(np.mean(walls)),
        "targets": {"coverage": 0.80, "rmse_ratio": 0.30, "fit_wall_s_60s_log": 300.0},
        "load_average": {"start": [round(x, 2) for x in load_start],
                         "end": [round(x, 2) for x in os.getloadavg()]},
        "runs": rows}
