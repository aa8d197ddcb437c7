"""`clawgym demo`: the closed loop on pick_place, end to end (what `make demo` runs).

Starts the ROS graph (synthesis, trainer, evaluator and coordinator nodes), runs the
``config/loop/pick_place.yaml`` loop (3 iterations of synthesize -> train -> evaluate -> decide)
and writes ``<out>/report.html`` and ``<out>/report.json`` (all four dimensions, with the
iteration history). Running it again resumes (or, when finished, just prints the result).
"""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="run the closed loop on pick_place end to end")
    parser.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    parser.add_argument("--seed", type=int, default=None,
                        help="loop seed (default: the config's, 0)")
    parser.add_argument("--config", default="pick_place",
                        help="loop config (default: pick_place)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from clawgym_ros import constants as C
    from clawgym_ros.commands.loop import run_loop_command

    start = time.perf_counter()
    state = run_loop_command(args.config, args.out, seed=args.seed)
    out = Path(args.out)
    print(f"demo: {len(state['history'])} iteration(s), {state['stop_reason']} "
          f"({time.perf_counter() - start:.0f} s)")
    for entry in state["history"]:
        scores = ", ".join(f"{d} {s['value']:.3f}" if s.get("value") is not None else f"{d} n/a"
                           for d, s in entry["scores"].items())
        print(f"  iteration {entry['iteration']}: {scores}")
    print(f"final report {state['final_report_id']}")
    print(out / C.FILE_REPORT_HTML)
    print(out / C.FILE_REPORT_JSON)
    print(f"lineage: clawgym lineage {state['final_report_id'][:16]} --run-dir {out}")
    return 0
