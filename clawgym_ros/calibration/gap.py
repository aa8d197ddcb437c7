"""How much of the sim-to-real gap a calibration closes, measured on the stand-in robot.

One run (:func:`measure_gap`), every random choice from ``seed``:

1. a twin with hidden physical values (:func:`~clawgym_ros.calibration.twin.draw_truth`'s
   physics: friction, damping, armature, servo gain, object mass, latency; its encoder bias is
   left out, as a robot's driver would correct a known one) records a log of the excitation;
   ``clawgym calibrate``'s fit turns the log into a calibration artifact (it reads the log
   only);
2. two pick_place datasets of the same episodes, one synthesized in the nominal simulator and
   one at the calibration (``--calibration``), and one behaviour-cloning checkpoint of each
   (same recipe, steps and seed);
3. each checkpoint is scored in its own simulator (in process, the calibrated one at the
   calibration) and on the twin: free-running through ROS (sim_node in real time at the hidden
   values, policy_node on its 50 Hz timer, the evaluator watching), the same held-out episodes.

The gap of a policy is its own-simulator success minus its success on the twin.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

#: held-out episode seeds come from this suite seed (synthesis uses the run seed)
SUITE_SEED_OFFSET = 1000


@dataclasses.dataclass(frozen=True)
class GapConfig:
    """Sizes of a gap measurement (defaults: the documented run)."""

    seed: int = 0
    demos: int = 120
    train_steps: int = 6000
    episodes: int = 40
    max_steps: int = 500
    log_s: float = 30.0
    workers: int = 2
    #: the twin's hidden values (name -> value, physical parameters); empty = drawn from seed
    hidden: tuple[tuple[str, float], ...] = ()
    #: a nominal checkpoint already trained in ``out`` by this recipe (skips its synthesis
    #: and training: they do not depend on the twin)
    nominal_checkpoint: str = ""

    @classmethod
    def quick(cls, seed: int = 0) -> GapConfig:
        """A smoke-sized run (minutes)."""
        return cls(seed=seed, demos=4, train_steps=100, episodes=3, max_steps=120, log_s=10.0)


def _rate(results: list[Any]) -> dict[str, Any]:
    from clawgym_ros.evaluation.stats import wilson

    k = sum(bool(r.success) for r in results)
    est = wilson(k, len(results))
    return {"successes": k, "episodes": len(results), "rate": round(est.value, 3),
            "ci95": [round(est.low, 3), round(est.high, 3)]}


def measure_gap(out: str | Path, cfg: GapConfig | None = None,
                say: Any = print) -> dict[str, Any]:
    """Run the measurement in run directory ``out`` (module docstring); the summary dict."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.calibration.apply import load_calibration
    from clawgym_ros.calibration.artifact import commit_calibration
    from clawgym_ros.calibration.excitation import ExcitationConfig, make_excitation
    from clawgym_ros.calibration.fit import FitConfig, calibrate
    from clawgym_ros.calibration.log import read_log
    from clawgym_ros.calibration.twin import draw_truth, record
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.suites import expand, parse_suite
    from clawgym_ros.evaluation.workers import run_specs
    from clawgym_ros.orchestration.synthesis import SynthRequest, synthesize
    from clawgym_ros.ros_io.eval_free import run_free_graph
    from clawgym_ros.sim import calibration_params as P
    from clawgym_ros.sim.active_calibration import (
        OPTION_KEY,
        TWIN_ID,
        SimCalibration,
        activate,
        split_values,
    )
    from clawgym_ros.tasks.registry import get_task
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig
    from clawgym_ros.training.data import open_training_table

    cfg = cfg or GapConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = ArtifactStore(out)
    summary: dict[str, Any] = {"config": dataclasses.asdict(cfg),
                               "load_before": round(os.getloadavg()[0], 2)}
    wall = time.perf_counter()
    activate(None)

    # 1. the twin and its calibration
    hidden = dict(cfg.hidden) or {k: v for k, v in draw_truth(cfg.seed).items()
                                  if not k.startswith(P.BIAS_PREFIX)}
    physical = tuple(split_values(hidden)[0]) + ("command_latency_s",)
    excitation = make_excitation(ExcitationConfig(seed=cfg.seed, duration_s=cfg.log_s))
    log_path = out / "twin_log.mcap"
    log_path.write_bytes(record(excitation, hidden, seed=cfg.seed).mcap)
    t0 = time.perf_counter()
    names = P.expand_names(list(physical))
    fit_cfg = FitConfig(params=names, bounds=P.resolve_bounds(names), seed=cfg.seed)
    result = calibrate(read_log(log_path), fit_cfg)
    cal = load_calibration(store, commit_calibration(store, result, fit_cfg, log_path).id)
    summary["calibration"] = {
        "id": cal.id, "fit_s": round(time.perf_counter() - t0, 1),
        "hidden": {k: round(v, 4) for k, v in hidden.items()},
        "fitted": {k: round(v, 4) for k, v in cal.values.items()},
        "position_rmse_before": result.summary_rmse("before"),
        "position_rmse_after": result.summary_rmse("after")}
    say(f"calibration {cal.id[:12]}: {summary['calibration']}")

    # 2. datasets and checkpoints, nominal and calibrated
    checkpoints: dict[str, str] = {}
    for name, options in (("nominal", {}), ("calibrated", {OPTION_KEY: cal.to_dict()})):
        if name == "nominal" and cfg.nominal_checkpoint:
            checkpoints[name] = store.resolve(cfg.nominal_checkpoint).id
            summary[name] = {"checkpoint": checkpoints[name], "reused": True}
            continue
        t0 = time.perf_counter()
        request = dataclasses.replace(
            SynthRequest(out=str(out), episodes=cfg.demos, seed=cfg.seed, task="pick_place",
                         workers=cfg.workers), options=options)
        dataset, synth = synthesize(request)
        if dataset is None:
            raise RuntimeError(f"{name}: no demonstration accepted")
        trained = train(open_training_table(store, [dataset.id]),
                        TrainConfig(steps=cfg.train_steps, seed=cfg.seed), store,
                        dataset_ids=[dataset.id], tensorboard=False)
        checkpoints[name] = trained.checkpoint_id
        summary[name] = {"dataset": dataset.id, "accepted": synth.accepted,
                         "checkpoint": trained.checkpoint_id,
                         "prepare_s": round(time.perf_counter() - t0, 1)}
        say(f"{name}: {summary[name]}")

    # 3. own simulator vs the twin, same held-out episodes
    suite = parse_suite({"name": "calibration_gap", "seed": cfg.seed + SUITE_SEED_OFFSET,
                         "episodes_per_cell": cfg.episodes,
                         "tasks": [{"task": "pick_place", "templates": list(
                             get_task("pick_place").training_templates)}],
                         "cells": {"nominal": True}}, "gap")
    specs = expand(suite, cfg.seed + SUITE_SEED_OFFSET)
    options = RolloutOptions(world="task", max_steps=cfg.max_steps, failure_states=False)
    for name, own in (("nominal", None), ("calibrated", cal)):
        t0 = time.perf_counter()
        activate(own)
        sim = run_specs(PolicySource.parse(checkpoints[name], str(out)), specs, cfg.workers,
                        options)
        activate(SimCalibration(TWIN_ID, hidden))   # sim_node (a child) runs as the twin
        try:
            twin, info = run_free_graph(specs, checkpoints[name], str(out), cfg.max_steps,
                                        log_dir=out / "logs" / f"twin_{name}", world="task")
        finally:
            activate(None)
        summary[name].update({"own_sim": _rate(sim), "twin_free_ros": _rate(twin),
                              "latency": info.get("latency"),
                              "eval_s": round(time.perf_counter() - t0, 1)})
        summary[name]["loss"] = round(summary[name]["own_sim"]["rate"]
                                      - summary[name]["twin_free_ros"]["rate"], 3)
        say(f"{name}: own {summary[name]['own_sim']} twin {summary[name]['twin_free_ros']}")
    summary["wall_s"] = round(time.perf_counter() - wall, 1)
    summary["load_after"] = round(os.getloadavg()[0], 2)
    (out / "gap.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m clawgym_ros.calibration.gap --out DIR [--seed N] [--quick]``."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--hidden", metavar="FILE", default=None,
                        help="YAML/JSON of the twin's hidden values (default: drawn from --seed)")
    for field in dataclasses.fields(GapConfig):
        if field.name not in ("seed", "hidden"):
            parser.add_argument("--" + field.name.replace("_", "-"), type=type(field.default),
                                default=None)
    args = parser.parse_args(argv)
    cfg = GapConfig.quick(args.seed) if args.quick else GapConfig(seed=args.seed)
    changes: dict[str, Any] = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(GapConfig)
        if f.name not in ("seed", "hidden") and getattr(args, f.name) is not None}
    if args.hidden:
        from clawgym_ros.sim.active_calibration import load_twin_file

        changes["hidden"] = tuple(sorted(load_twin_file(args.hidden).items()))
    summary = measure_gap(args.out, dataclasses.replace(cfg, **changes))
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
