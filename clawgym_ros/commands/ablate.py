"""`clawgym ablate`: closed loop vs uniform-mixture open loop, equal budget, K seeds.

Both arms run the same loop config (iterations, episodes and training steps per iteration,
evaluation suite and evaluation seed) through one ROS graph; only ``mode`` differs. Prints the
paired differences of the final scores per dimension with t and bootstrap intervals and writes
``<out>/ablation.json``. Resumable like `clawgym loop` (each arm has its own run directory).

``--compare rl``: both arms are closed loops of the config; ``bc+rl`` as given (its ``rl``
lever on), ``bc`` with ``rl.share: 0`` (every episode synthesized). The fine-tuning steps of
``bc+rl`` are the simulated steps of the episodes it did not synthesize, so both arms spend
the same simulated steps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C

#: comparison -> its two arms (label, loop mode); the first is the treatment.
COMPARISONS = {"loop": (("closed", "closed"), ("open", "open")),
               "rl": (("bc+rl", "closed"), ("bc", "closed"))}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ablate", help="closed loop vs open loop at equal budget over "
                            "seeds; differences per dimension with intervals")
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="loop config YAML or a name in config/loop/")
    parser.add_argument("--seeds", type=int, default=3, metavar="K",
                        help="number of seeds (paired runs per arm; default 3)")
    parser.add_argument("--first-seed", type=int, default=0, metavar="S",
                        help="seeds are S, S+1, ..., S+K-1 (default 0)")
    parser.add_argument("--iterations", type=int, default=None, metavar="N",
                        help="iterations per loop (default: the config's)")
    parser.add_argument("--out", default="runs/ablate", metavar="DIR",
                        help="output folder (default: runs/ablate)")
    parser.add_argument("--final-episodes", type=int, default=C.ABLATION_FINAL_EPISODES,
                        metavar="N",
                        help="episodes per cell of the final evaluation of both arms' last "
                             f"checkpoints (default {C.ABLATION_FINAL_EPISODES}; 0 = skip it)")
    parser.add_argument("--final-held-out-episodes", type=int, default=0, metavar="N",
                        help="episodes of each held-out template cell in the final evaluation "
                             "(default: --final-episodes); the first --final-episodes of them "
                             "are the same episodes")
    parser.add_argument("--final-seed", type=int, default=C.ABLATION_FINAL_SEED, metavar="S",
                        help="suite seed of the final evaluation (default "
                             f"{C.ABLATION_FINAL_SEED})")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="loops run at the same time, each its own ROS graph pinned to "
                             "its share of the CPUs (default 1; at most one per CPU): the same "
                             "results, sooner on a machine with cores to spare")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="loop",
                        help="loop: closed vs open loop (default); rl: closed loop with the "
                             "config's RL lever (bc+rl) vs without it (bc), equal simulated "
                             "steps")
    parser.set_defaults(handler=run)


def _calibration(out: Path, ref: str, source: Path):
    """The config's calibration artifact, from ``--out``'s store (None without one).

    Raises:
        ConfigError: it is not there.
    """
    if not ref:
        return None
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.errors import ArtifactError, ConfigError

    try:
        return ArtifactStore(out).resolve(ref, C.KIND_CALIBRATION)
    except ArtifactError as err:
        raise ConfigError("calibration", ref, f"a calibration of --out's run directory {out} "
                          f"(clawgym calibrate --out {out}): {err}", str(source)) from None


def _copy_artifact(artifact, run_dir: Path) -> None:
    """Commit the same artifact (same files, hence the same id) into ``run_dir``'s store."""
    from clawgym_ros.artifacts import ArtifactStore

    man = artifact.manifest
    files = {rel: artifact.file(rel).read_bytes() for rel in man.files}
    copied = ArtifactStore(run_dir).put_files(man.kind, files, config=man.config,
                                              seeds=man.seeds, summary=man.summary)
    if copied.id != artifact.id:
        from clawgym_ros.errors import ArtifactError

        raise ArtifactError(f"{man.kind} {artifact.id[:12]} copied into {run_dir} as "
                            f"{copied.id[:12]}: its files changed")


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.commands.loop import workers_for
    from clawgym_ros.coordinator.ablation import (
        cell_counts,
        design_figures,
        final_suite_yaml,
        format_design_figures,
        format_table,
        paired_differences,
    )
    from clawgym_ros.coordinator.config import load_loop_config
    from clawgym_ros.coordinator.graph import find_loop_config
    from clawgym_ros.coordinator.runner import evaluated_checkpoint
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.procs import cpu_slices

    if args.seeds < 1:
        raise ConfigError("--seeds", args.seeds, "an integer >= 1")
    if args.final_episodes < 0:
        raise ConfigError("--final-episodes", args.final_episodes, "an integer >= 0")
    cpu_slices(args.jobs)                           # --jobs within the CPUs, before anything
    if args.final_held_out_episodes and not args.final_episodes:
        raise ConfigError("--final-held-out-episodes", args.final_held_out_episodes,
                          "0 when --final-episodes is 0 (no final evaluation)")
    path = find_loop_config(args.config)
    cfg = load_loop_config(path, iterations=args.iterations)
    final_suite = (final_suite_yaml(cfg.eval_suite, args.final_episodes,
                                    args.final_held_out_episodes)
                   if args.final_episodes else None)   # a bad suite fails before any loop
    arms = COMPARISONS[args.compare]
    labels = tuple(label for label, _ in arms)
    if args.compare == "rl" and not cfg.rl.enabled:
        raise ConfigError("rl.share", cfg.rl.share, "> 0 for --compare rl (the config's RL "
                          "lever is the treatment)", str(path))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    configs = {label: path for label in labels}
    if args.compare == "rl":
        configs["bc"] = _without_rl(path, out / "loop_bc.yaml")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    calibration = _calibration(out, cfg.calibration, path)
    done: dict[tuple[int, str], dict[str, Any]] = {}

    def run_one(graph: Any, seed: int, label: str, mode: str, progress: Any = None) -> None:
        from clawgym_ros.commands.loop import StatusView

        run_dir = out / f"seed{seed}" / label
        if calibration is not None:     # each arm's simulators run at it
            _copy_artifact(calibration, run_dir)
        with StatusView(f"{cfg.name} seed {seed} {label}", progress) as view:
            done[seed, label] = graph.run_loop(configs[label], run_dir, view,
                                               iterations=args.iterations, seed=seed,
                                               mode=mode)

    _run_loops([(seed, label, mode) for seed in seeds for label, mode in arms], run_one, out,
               workers_for(cfg), args.jobs)
    # In seed order, whatever order the loops finished in.
    finals = {label: {seed: done[seed, label]["history"][-1]["scores"] for seed in seeds}
              for label in labels}
    checkpoints = {label: {seed: evaluated_checkpoint(done[seed, label]["iterations"][-1])
                           for seed in seeds} for label in labels}
    budgets = {label: {seed: _budget(done[seed, label]) for seed in seeds} for label in labels}
    result = paired_differences(finals[labels[0]], finals[labels[1]])
    data: dict[str, Any] = {"config": str(path), "loop": cfg.to_dict(), "seeds": seeds,
                            "compare": args.compare, "arms": list(labels),
                            "budgets": budgets, "scores": finals, "differences": result}
    from clawgym_ros.artifacts import atomic_write_json, atomic_write_text

    print(f"{labels[0]} - {labels[1]}, {len(seeds)} seed(s), equal budget "
          f"({cfg.iterations} x {cfg.episodes_per_iteration} episodes, "
          f"{cfg.iterations} x {cfg.train_steps} steps)")
    print(f"loops' last reports (suite {Path(cfg.eval_suite).name}, the one the closed loop "
          "steered by):")
    print("\n".join(format_table(result, labels)))
    if final_suite is not None:
        suite_path = out / "final_suite.yaml"
        atomic_write_text(suite_path, final_suite)
        reports = {mode: {seed: _final_report(out / f"seed{seed}" / mode, ckpt, suite_path,
                                              args.final_seed, cfg.workers)
                          for seed, ckpt in checkpoints[mode].items()}
                   for mode in labels}
        scores = {mode: {seed: r["scores"] for seed, r in by_seed.items()}
                  for mode, by_seed in reports.items()}
        final = paired_differences(scores[labels[0]], scores[labels[1]])
        data["final"] = {"suite": str(suite_path), "seed": args.final_seed,
                         "episodes_per_cell": args.final_episodes,
                         "held_out_episodes_per_cell": (args.final_held_out_episodes
                                                        or args.final_episodes),
                         "checkpoints": checkpoints,
                         "scores": scores, "differences": final}
        held_out = (f", {args.final_held_out_episodes} per held-out template cell"
                    if args.final_held_out_episodes else "")
        print(f"final evaluation of the last checkpoints ({args.final_episodes} episodes per "
              f"cell{held_out}, suite seed {args.final_seed}):")
        print("\n".join(format_table(final, labels)))
        if args.compare == "loop":
            counts = {mode: {seed: cell_counts(r["per_episode"]) for seed, r in by_seed.items()}
                      for mode, by_seed in reports.items()}
            figures = design_figures(counts["closed"], counts["open"])
            data["final"]["design_figures"] = figures
            print("the design's figures on the final evaluation (pooled over seeds, bootstrap "
                  "over seeds):")
            print("\n".join(format_design_figures(figures)))
    atomic_write_json(out / "ablation.json", data)
    print(out / "ablation.json")
    return 0


def _budget(state: dict[str, Any]) -> dict[str, Any]:
    """What a finished loop spent (its state.json) and how it ended."""
    return {"iterations": len(state["history"]),
            "rl_steps": sum(it.get("rl_steps", 0) for it in state["iterations"]),
            "episodes": state["episodes_used"], "train_steps": state["steps_used"],
            "final_report_id": state["final_report_id"], "stop_reason": state["stop_reason"]}


def _run_loops(tasks: list[tuple[int, str, str]], run_one: Callable[..., None], out: Path,
               nodes: tuple[str, ...], jobs: int) -> None:
    """Run every ``(seed, label, mode)`` loop through ``run_one(graph, seed, label, mode,
    progress)``, ``jobs`` at a time.

    One job: one graph (logs in ``out/logs``), the loops in order. More: a graph per job in
    its own ROS domain, its nodes pinned to the job's share of the CPUs (logs in
    ``out/logs/job<j>``), each job taking the next loop when its last one is done. A loop's
    results do not depend on what runs beside it. The first failure stops every graph (what
    the loops completed is saved: a rerun resumes) and is raised.
    """
    from clawgym_ros.commands.loop import shared_progress
    from clawgym_ros.coordinator.graph import LoopGraph
    from clawgym_ros.procs import cpu_slices

    jobs = min(jobs, len(tasks))
    if jobs == 1:
        with LoopGraph(out / "logs") as graph:
            graph.start_workers(out, nodes)
            for task in tasks:
                run_one(graph, *task)
        return
    todo = list(reversed(tasks))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(graph: LoopGraph, progress: Any) -> None:
        try:
            graph.start_workers(out, nodes)
            while True:
                with lock:
                    if errors or not todo:
                        return
                    task = todo.pop()
                run_one(graph, *task, progress)
        except BaseException as err:  # noqa: BLE001 (handed to the main thread, raised there)
            with lock:
                errors.append(err)

    with contextlib.ExitStack() as stack:
        progress = stack.enter_context(shared_progress())
        graphs = [stack.enter_context(LoopGraph(out / "logs" / f"job{j}", cpus=cpus))
                  for j, cpus in enumerate(cpu_slices(jobs))]
        threads = [threading.Thread(target=work, args=(graph, progress), daemon=True,
                                    name=f"ablate-job{j}") for j, graph in enumerate(graphs)]
        for thread in threads:
            thread.start()
        while not errors and any(thread.is_alive() for thread in threads):
            time.sleep(0.25)
        # Leaving the block stops every graph's nodes: after a failure the other loops end too.
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _without_rl(config: Path, out: Path) -> Path:
    """Write the loop config ``config`` with its RL lever off (``rl.share: 0``) to ``out``
    (atomically; relative suite paths made absolute) and return ``out``."""
    import yaml

    from clawgym_ros.artifacts import atomic_write_text
    from clawgym_ros.coordinator.config import load_loop_config

    data = load_loop_config(config).to_dict()
    data.pop("rl", None)
    atomic_write_text(out, yaml.safe_dump({"loop": data}, sort_keys=True))
    load_loop_config(out)                                   # it reads back
    return out


def _final_report(run_dir: Path, checkpoint_id: str, suite: Path, seed: int,
                  workers: int) -> dict:
    """The report of ``checkpoint_id`` on the final suite (in process; a report of the same
    checkpoint, suite content and seed already in ``run_dir`` is reused, so a rerun resumes,
    and a rerun with other final episode counts evaluates again)."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.coordinator.runner import EvaluateGoal, find_report, read_report
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import PolicySource
    from clawgym_ros.evaluation.workers import default_workers
    from clawgym_ros.orchestration.evaluation import run_evaluation

    store = ArtifactStore(run_dir)
    goal = EvaluateGoal(checkpoint_id=checkpoint_id, suite=str(suite), seed=seed,
                        mode=C.EVAL_MODES[0], workers=workers, run_dir=str(run_dir))
    report_id = find_report(store, goal)
    if report_id is None:
        cfg = EvalConfig(suite=str(suite), seed=seed, workers=workers or default_workers(),
                         checkpoint_id=checkpoint_id)
        print(f"final evaluation: {run_dir.parent.name} {run_dir.name} "
              f"checkpoint {checkpoint_id[:12]}", file=sys.stderr)
        report_id = run_evaluation(cfg, PolicySource.parse(checkpoint_id, str(run_dir)),
                                   run_dir).report_id
    return read_report(store, report_id)


def load_ablation(path: str | Path) -> dict:
    """Read an ablation.json back."""
    return json.loads(Path(path).read_text())
