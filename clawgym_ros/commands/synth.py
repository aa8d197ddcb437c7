"""`clawgym synth`: synthesize validated demonstrations into a dataset artifact.

Prints the dataset id on the first line and a JSON summary (accepted, rejected by reason,
yield, wall time) on the second.
"""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("synth", help="synthesize demonstrations; prints the dataset id")
    parser.add_argument("--task", default="", help="task name (e.g. pick_place)")
    parser.add_argument("--episodes", type=int, default=None,
                        help="episodes to generate (with --from-report: default one per "
                             "failure state)")
    parser.add_argument("--seed", type=int, required=True, help="run seed")
    parser.add_argument("--workers", type=int, default=0, help="processes (0 = one per core)")
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory")
    parser.add_argument("--mixture", metavar="FILE",
                        help="mixture YAML (task, template, family, intensity, difficulty, "
                             "weight); overrides --task")
    parser.add_argument("--images", action="store_true", help="record wrist camera frames")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="expert option for every episode (part of the dataset id): "
                             "timing=quintic|optimal, acceleration_scale=X (with optimal), "
                             "velocity_scale=X, planning=auto|ompl")
    parser.add_argument("--from-report", metavar="REPORT_ID", default="",
                        help="recovery demonstrations: restart the experts from the failure "
                             "states of this evaluation report (in --out's store)")
    from clawgym_ros.calibration.options import add_calibration_argument
    from clawgym_ros.ray_executor import add_executor_args

    add_calibration_argument(parser)
    add_executor_args(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.ray_executor import executor_scope
    from clawgym_ros.synthesis.pool import default_workers

    with executor_scope(args.executor, args.ray_address, args.workers or default_workers()):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from clawgym_ros.calibration.apply import use_calibration
    from clawgym_ros.errors import ClawgymError
    from clawgym_ros.orchestration.synthesis import SynthRequest, synthesize

    calibration = use_calibration(args.out, args.calibration)
    if args.from_report:
        from clawgym_ros.orchestration.synthesis import synthesize_recovery

        if calibration is not None:
            raise ClawgymError("--from-report restarts the report's own simulator states: "
                               "leave out --calibration")
        if args.task or args.mixture or args.images:
            raise ClawgymError("--from-report takes its tasks and cells from the report: "
                               "leave out --task, --mixture and --images")
        artifact, summary = synthesize_recovery(args.out, args.from_report,
                                                args.episodes or 0, args.seed, args.workers,
                                                options=expert_options(args.option))
        print(artifact.id if artifact is not None else "")
        print(json.dumps(summary.to_dict(), sort_keys=True))
        return 0
    if not args.task and not args.mixture:
        raise ClawgymError("give --task or --mixture (or --from-report)")
    if args.episodes is None:
        raise ClawgymError("give --episodes")
    request = SynthRequest.from_args(args.out, args.episodes, args.seed, task=args.task,
                                     mixture_path=args.mixture, workers=args.workers,
                                     images=args.images)
    if args.option:
        import dataclasses

        request = dataclasses.replace(request, options=expert_options(args.option))
    artifact, summary = synthesize(request)
    print(artifact.id if artifact is not None else "")
    print(json.dumps(summary.to_dict(), sort_keys=True))
    return 0


def expert_options(items: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` strings -> generator options (numbers parsed), checked by name and value
    (:func:`~clawgym_ros.tasks.expert.check_expert_options`).

    Raises:
        ConfigError: a malformed item, an unknown name or a value out of range.
    """
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.tasks.expert import check_expert_options

    options: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--option", item, "KEY=VALUE")
        options[key] = value
    return check_expert_options(options, "--option ")
