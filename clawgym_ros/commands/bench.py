"""`clawgym bench AREA --json`: one benchmark area, one JSON object on stdout."""

from __future__ import annotations

import argparse
import json

from clawgym_ros.bench import AREAS


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="run a benchmark area and print one JSON object")
    parser.add_argument("area", choices=sorted(AREAS), help="what to measure")
    parser.add_argument("--json", action="store_true",
                        help="print only the JSON object (default: JSON plus a short summary)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (for smoke tests)")
    parser.add_argument("--seed", type=int, default=0, help="seed for random problems")
    parser.add_argument("--checkpoint", default="",
                        help="eval: the torch checkpoint to time; rl: the BC checkpoint to "
                             "fine-tune (default: one trained there)")
    parser.add_argument("--run-dir", default=None,
                        help="eval, rl: run directory holding --checkpoint")
    from clawgym_ros.ray_executor import add_executor_args

    add_executor_args(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.bench import run_area
    from clawgym_ros.errors import ConfigError

    options = {}
    if args.checkpoint or args.run_dir:
        if args.area not in ("eval", "rl"):
            raise ConfigError("--checkpoint", args.checkpoint or args.run_dir,
                              "only with the eval and rl areas")
        if not args.checkpoint or not args.run_dir:
            raise ConfigError("--checkpoint", args.checkpoint,
                              "given together with --run-dir")
        options = {"checkpoint": args.checkpoint, "run_dir": args.run_dir}
    if args.executor == "ray":
        from clawgym_ros.bench.ray_scaling import bench_ray

        if options:
            raise ConfigError("--checkpoint", args.checkpoint, "not with --executor ray")
        result = bench_ray(args.area, args.quick, args.seed, args.ray_address)
    elif args.ray_address:
        raise ConfigError("--ray-address", args.ray_address, "only with --executor ray")
    else:
        result = run_area(args.area, quick=args.quick, seed=args.seed, **options)
    print(json.dumps(result, sort_keys=True))
    return 0
