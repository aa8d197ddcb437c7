"""`clawgym eval`: evaluate a checkpoint (or the scripted baseline) on a suite; prints the
report id and the paths of report.json and report.html.

``--mode in_process`` (default) runs worker processes over the Gymnasium envs; ``--mode ros``
starts sim_node (lockstep), the needed perturbation nodes and policy_node as child processes in
an isolated ROS domain, drives them, and stops them all on exit or Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("eval", help="evaluate a policy on a suite; prints the report id")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--checkpoint", metavar="ID", help="checkpoint artifact id in --out")
    who.add_argument("--policy", metavar="SPEC",
                     help="scripted:<task>[:name=value,...] (scripted pick-and-lift baseline)")
    parser.add_argument("--suite", required=True, help="suite name (config/suites) or path")
    parser.add_argument("--seed", type=int, required=True, help="suite seed")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="run directory: holds the checkpoint; the report goes there")
    parser.add_argument("--mode", default="in_process", help="in_process (default) or ros")
    parser.add_argument("--workers", type=int, default=0,
                        help="in_process worker processes (0 = one per core)")
    parser.add_argument("--world", default="auto",
                        help="auto (task env when installed), task, or scene (bare scene, the "
                             "world sim_node simulates; ros mode)")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="control steps per episode (0 = the env's limit)")
    parser.add_argument("--image-size", type=int, default=0,
                        help="camera image side in pixels for a policy that reads images "
                             "(0 = the size it was trained on; another size is refused)")
    from clawgym_ros.calibration.options import add_calibration_argument
    from clawgym_ros.ray_executor import add_executor_args

    add_calibration_argument(parser)
    add_executor_args(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.evaluation.workers import default_workers
    from clawgym_ros.ray_executor import executor_scope

    if args.executor == "ray" and args.mode != "in_process":
        raise ConfigError("--executor", args.executor, "local with --mode ros (the ROS graph "
                          "runs its own processes)")
    with executor_scope(args.executor, args.ray_address, args.workers or default_workers()):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from clawgym_ros.calibration.apply import use_calibration
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.workers import default_workers
    from clawgym_ros.orchestration.evaluation import run_evaluation

    workers = args.workers or default_workers()
    # workers, and sim_node in ros mode, run at the calibration; its id joins the report's
    use_calibration(args.out, args.calibration)
    cfg = EvalConfig(suite=args.suite, seed=args.seed, mode=args.mode, workers=workers,
                     checkpoint_id=args.checkpoint or "")
    source = (PolicySource.parse(args.checkpoint, args.out) if args.checkpoint
              else PolicySource.parse(args.policy, args.out))
    options = RolloutOptions(world=args.world, max_steps=args.max_steps,
                             image_size=args.image_size)

    def progress(done: int, total: int, ok: int) -> None:
        print(f"\r{done}/{total} episodes, {ok} successes", end="", file=sys.stderr,
              flush=True)

    outcome = run_evaluation(cfg, source, args.out, options, progress)
    print(file=sys.stderr)
    print(outcome.report_id)
    print(f"json: {outcome.json_path}")
    print(f"html: {outcome.html_path}")
    return 0
