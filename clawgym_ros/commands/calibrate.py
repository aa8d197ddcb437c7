"""`clawgym calibrate`: fit the simulator's physical parameters to a recorded robot log.

Prints the calibration artifact's id on the first line and a JSON summary (values, intervals,
RMSE before/after, warnings) on the second. Everything the fit needs (parameter names,
bounds, the log's topics, stamps and joint names) is checked before any file is written; a
problem is one line, exit 2, nothing committed.
"""

from __future__ import annotations

import argparse
import json
import sys

#: scenes with an arm (what the calibration models)
ARM_SCENES = ("tabletop",)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "calibrate", help="fit simulator parameters to a recorded robot log (MCAP or rosbag2); "
        "prints the calibration id")
    parser.add_argument("--bag", required=True, metavar="PATH",
                        help="an .mcap file or a rosbag2 folder with joint_states and "
                             "joint_trajectory (object_poses optional)")
    parser.add_argument("--params", default="", metavar="NAME,NAME,...",
                        help="parameters to fit (default: all): joint_friction, damping_scale, "
                             "armature_scale, actuator_gain_scale, object_mass_scale, "
                             "command_latency_s, encoder_bias (or encoder_bias:<arm joint>)")
    parser.add_argument("--bounds", metavar="FILE", default="",
                        help="YAML/JSON {name: [low, high]} replacing default bounds (each "
                             "must contain the nominal value)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the extra starts")
    parser.add_argument("--starts", type=int, default=3, help="optimizer starts, [1, 20]")
    parser.add_argument("--scene", default="tabletop",
                        help="scene the robot is modelled in (an arm scene: tabletop)")
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.calibration import params as P
    from clawgym_ros.calibration.artifact import commit_calibration
    from clawgym_ros.calibration.fit import FitConfig, calibrate
    from clawgym_ros.calibration.log import read_log
    from clawgym_ros.config import check_choice, check_int

    check_int("--seed", args.seed, 0, 2**32 - 1)
    check_int("--starts", args.starts, 1, 20)
    check_choice("--scene", args.scene, ARM_SCENES)
    names = P.expand_names(args.params.split(",") if args.params else P.DEFAULT_PARAMS)
    bounds = (P.load_bounds(args.bounds, names) if args.bounds else P.resolve_bounds(names))
    log = read_log(args.bag)
    config = FitConfig(params=names, bounds=bounds, seed=args.seed, starts=args.starts,
                       scene=args.scene)
    tty = sys.stderr.isatty()
    result = calibrate(log, config, (lambda m: print(m, file=sys.stderr)) if tty else None)
    artifact = commit_calibration(ArtifactStore(args.out), result, config, args.bag)
    print(artifact.id)
    print(json.dumps({
        "values": {p.name: p.value for p in result.params},
        "intervals": {p.name: [p.ci_low, p.ci_high] for p in result.params},
        "not_identifiable": [p.name for p in result.params if not p.identifiable],
        "position_rmse_before": result.summary_rmse("before"),
        "position_rmse_after": result.summary_rmse("after"),
        "warnings": result.warnings, "wall_s": round(result.wall_s, 2),
        "html": str(artifact.file("calibration.html"))}, sort_keys=True))
    return 0
