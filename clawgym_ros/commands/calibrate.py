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

from clawgym_ros.calibration.job import ARM_SCENES


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "calibrate", help="fit simulator parameters to a recorded robot log (MCAP or rosbag2); "
        "prints the calibration id")
    parser.add_argument("--bag", default="", metavar="PATH",
                        help="an .mcap file or a rosbag2 folder with joint_states and "
                             "joint_trajectory (object_poses optional)")
    parser.add_argument("--write-excitation", default="", metavar="FILE.json",
                        help="instead of fitting: write the seeded excitation to send the robot "
                             "while recording (t, arm joint positions and velocities)")
    parser.add_argument("--write-twin", default="", metavar="FILE.mcap",
                        help="instead of fitting: record the stand-in robot (hidden values "
                             "drawn from --seed) driven by the excitation, to try the fit on")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="excitation length, s (--write-excitation / --write-twin)")
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
    parser.add_argument("--out", default=None, metavar="DIR", help="run directory (with --bag)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.calibration.job import MAX_STARTS, CalibrateRequest, run_calibration
    from clawgym_ros.config import check_choice, check_int
    from clawgym_ros.errors import ClawgymError

    check_int("--seed", args.seed, 0, 2**32 - 1)
    check_int("--starts", args.starts, 1, MAX_STARTS)
    check_choice("--scene", args.scene, ARM_SCENES)
    modes = [m for m in ("bag", "write_excitation", "write_twin") if getattr(args, m)]
    if len(modes) != 1:
        raise ClawgymError("give exactly one of --bag (fit a log), --write-excitation or "
                           "--write-twin")
    if not args.bag:
        return _write(args)
    if not args.out:
        raise ClawgymError("--bag needs --out DIR (the run directory of the artifact)")
    bounds: dict = {}
    if args.bounds:
        from clawgym_ros.config import load_yaml
        from clawgym_ros.errors import ConfigError

        bounds = load_yaml(args.bounds)
        if not isinstance(bounds, dict):
            raise ConfigError("bounds", type(bounds).__name__, "a mapping name: [low, high]",
                              args.bounds)
    request = CalibrateRequest(
        bag=args.bag, params=tuple(args.params.split(",")) if args.params else (),
        bounds=bounds, seed=args.seed, starts=args.starts, scene=args.scene,
        source=args.bounds or None)
    request.fit_config()                 # names and bounds checked before the log is read
    tty = sys.stderr.isatty()
    artifact, summary = run_calibration(
        args.out, request, (lambda m: print(m, file=sys.stderr)) if tty else None)
    print(artifact.id)
    print(json.dumps(summary, sort_keys=True))
    return 0


def _write(args: argparse.Namespace) -> int:
    from pathlib import Path

    from clawgym_ros.artifacts import atomic_write_bytes, atomic_write_json
    from clawgym_ros.calibration.excitation import ExcitationConfig, make_excitation
    from clawgym_ros.calibration.twin import draw_truth, record
    from clawgym_ros.config import check_range
    from clawgym_ros.constants import ARM_JOINTS

    check_range("--duration", args.duration, 5.0, 3600.0)
    excitation = make_excitation(ExcitationConfig(seed=args.seed, duration_s=args.duration,
                                                  scene=args.scene))
    if args.write_excitation:
        atomic_write_json(args.write_excitation, {
            "joint_names": list(ARM_JOINTS), "t": excitation.t.tolist(),
            "positions": excitation.position.tolist(),
            "velocities": excitation.velocity.tolist(), "config": excitation.config})
        print(Path(args.write_excitation))
        return 0
    rec = record(excitation, draw_truth(args.seed), seed=args.seed, scene=args.scene)
    atomic_write_bytes(args.write_twin, rec.mcap)
    print(Path(args.write_twin))
    return 0
