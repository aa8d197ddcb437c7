"""`clawgym ablate`: closed loop vs uniform-mixture open loop, equal budget, K seeds.

Both arms run the same loop config (iterations, episodes and training steps per iteration,
evaluation suite and evaluation seed) through one ROS graph; only ``mode`` differs. Prints the
paired differences of the final scores per dimension with t and bootstrap intervals and writes
``<out>/ablation.json``. Resumable like `clawgym loop` (each arm has its own run directory).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.commands.loop import StatusView
    from clawgym_ros.coordinator.ablation import format_table, paired_differences
    from clawgym_ros.coordinator.config import load_loop_config
    from clawgym_ros.coordinator.graph import LoopGraph, find_loop_config
    from clawgym_ros.errors import ConfigError

    if args.seeds < 1:
        raise ConfigError("--seeds", args.seeds, "an integer >= 1")
    path = find_loop_config(args.config)
    cfg = load_loop_config(path, iterations=args.iterations)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    finals: dict[str, dict[int, dict]] = {"closed": {}, "open": {}}
    budgets: dict[str, dict[int, dict]] = {"closed": {}, "open": {}}
    with LoopGraph(out / "logs") as graph:
        graph.start_workers(out)
        for seed in seeds:
            for mode in ("closed", "open"):
                run_dir = out / f"seed{seed}" / mode
                with StatusView(f"{cfg.name} seed {seed} {mode}") as view:
                    state = graph.run_loop(path, run_dir, view, iterations=args.iterations,
                                           seed=seed, mode=mode)
                finals[mode][seed] = state["history"][-1]["scores"]
                budgets[mode][seed] = {"iterations": len(state["history"]),
                                       "episodes": state["episodes_used"],
                                       "train_steps": state["steps_used"],
                                       "final_report_id": state["final_report_id"],
                                       "stop_reason": state["stop_reason"]}
    result = paired_differences(finals["closed"], finals["open"])
    data = {"config": str(path), "loop": cfg.to_dict(), "seeds": seeds, "budgets": budgets,
            "scores": finals, "differences": result}
    from clawgym_ros.artifacts import atomic_write_json

    atomic_write_json(out / "ablation.json", data)
    print(f"closed loop - open loop, {len(seeds)} seed(s), equal budget "
          f"({cfg.iterations} x {cfg.episodes_per_iteration} episodes, "
          f"{cfg.iterations} x {cfg.train_steps} steps), suite {Path(cfg.eval_suite).name}:")
    print("\n".join(format_table(result)))
    print(out / "ablation.json")
    return 0


def load_ablation(path: str | Path) -> dict:
    """Read an ablation.json back."""
    return json.loads(Path(path).read_text())
