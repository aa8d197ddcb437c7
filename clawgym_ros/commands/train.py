"""`clawgym train`: behaviour cloning on dataset artifacts, or RL fine-tuning of a BC
checkpoint (``--finetune rl --from ID``); prints the checkpoint id.

Runs the training core in this process (same core as trainer_node's Train action). Re-running
an interrupted BC command with the same arguments resumes from its newest step folder; an
interrupted fine-tuning run starts again and commits the same checkpoint id.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("train", help="train a policy on datasets; prints the checkpoint id")
    parser.add_argument("--dataset", action="append", metavar="ID",
                        help="dataset artifact id (repeat for several); required for BC")
    parser.add_argument("--steps", type=int, required=True,
                        help="optimizer steps, [1, 10000000] (with --finetune rl: simulated "
                             "environment steps)")
    parser.add_argument("--seed", type=int, required=True, help="training seed")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="run directory holding the datasets; the checkpoint goes there")
    parser.add_argument("--weights", metavar="FILE",
                        help="YAML/JSON mapping group -> loss weight (others weigh 1)")
    parser.add_argument("--freeze", action="append", default=[], metavar="GROUP",
                        help="parameter group to freeze: encoder, trunk, head (repeatable)")
    parser.add_argument("--policy", default=None,
                        help="policy type: mlp (default), cnn, or one registered by a package "
                             "(docs/extending.md)")
    parser.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the policy type (value read as YAML; repeatable)")
    parser.add_argument("--batch-size", type=int, default=None, help="samples per step")
    parser.add_argument("--lr", type=float, default=None, help="learning rate")
    parser.add_argument("--lr-schedule", default=None,
                        help="learning-rate schedule: cosine (default) or constant")
    parser.add_argument("--chunk", type=int, default=None, help="actions predicted per step")
    parser.add_argument("--add-feature", action="append", default=[], metavar="NAME",
                        help="derived feature added to the default set (repeatable), e.g. "
                             "object_rel_first for peg_insert (README, Policy)")
    parser.add_argument("--hardening-share", type=float, default=None,
                        help="share of each batch with perturbed observations, [0, 1]")
    parser.add_argument("--hardening-intensity", type=float, default=None,
                        help="sensor-noise intensity the perturbed rows draw up to, [0, 1] "
                             "(default 0.3)")
    parser.add_argument("--patience", type=int, default=None,
                        help="early stopping: validation checks without improvement (0 = off)")
    parser.add_argument("--init-checkpoint", default=None, metavar="ID",
                        help="warm start from this checkpoint's weights")
    parser.add_argument("--no-resume", action="store_true",
                        help="start from scratch even if an earlier run can be resumed")
    rl = parser.add_argument_group("RL fine-tuning (PPO on the BC checkpoint's network, or "
                                   "residual PPO over it with --rl-option mode=residual)")
    rl.add_argument("--finetune", choices=("rl",), default=None,
                    help="fine-tune the --from checkpoint with RL instead of behaviour cloning")
    rl.add_argument("--from", dest="from_checkpoint", metavar="ID",
                    help="the BC checkpoint to fine-tune (in --out's run directory)")
    rl.add_argument("--task", default=None, help="task of the fine-tuning episodes "
                    "(default pick_place)")
    rl.add_argument("--workers", type=int, default=None,
                    help="environment processes, [1, 64] (default 1)")
    rl.add_argument("--rl-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a fine-tuning setting, e.g. lr=3e-6, mode=residual, exploration=chunk "
                         "(repeatable; docs/notes/rl_finetune.md)")
    rl.add_argument("--progress", action="store_true", help="show a progress bar")
    rl.add_argument("--calibration", metavar="ID", default="",
                    help="fine-tune in the simulator at this calibration's fitted values (in "
                         "--out's store); joins the checkpoint's id")
    seq = parser.add_argument_group(
        "incremental learning (one task-conditioned policy trained task after task)")
    seq.add_argument("--sequence", metavar="TASKS", default=None,
                     help="comma-separated tasks in training order, each once, one --dataset "
                          "per task in the same order; --steps is per stage. Trains naive "
                          "sequential fine-tuning, consolidation (rehearsal, EWC, "
                          "sensitivity-based freezing) and joint training, evaluates every "
                          "task after every stage, prints the report id")
    seq.add_argument("--sequence-option", action="append", default=[], metavar="KEY=VALUE",
                     help="a sequence setting, e.g. eval_episodes=30, ewc_lambda=1, "
                          "methods=naive,consolidated (repeatable; "
                          "clawgym_ros/training/sequence.py)")
    parser.set_defaults(handler=run)


def with_added_features(added: list[str]) -> tuple[str, ...]:
    """The default derived features followed by ``--add-feature``'s names (repeats and
    defaults named again are left out; unknown names are the config's to refuse)."""
    from clawgym_ros.training.config import DEFAULT_FEATURES

    return DEFAULT_FEATURES + tuple(f for f in dict.fromkeys(added) if f not in DEFAULT_FEATURES)


def build_config(args: argparse.Namespace):
    """The TrainConfig of the command line (validated; ConfigError names the bad field)."""
    from clawgym_ros.training.config import TrainConfig, load_group_weights

    values = {"steps": args.steps, "seed": args.seed, "frozen_groups": tuple(args.freeze)}
    if args.weights:
        values["group_weights"] = load_group_weights(args.weights)
    if args.policy_option:
        values["policy_options"] = parse_policy_options(args.policy_option)
    if args.add_feature:
        values["features"] = with_added_features(args.add_feature)
    for name in ("policy", "batch_size", "lr", "lr_schedule", "chunk", "hardening_share",
                 "hardening_intensity", "patience"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    return TrainConfig(**values)


def parse_policy_options(items: list[str]) -> dict:
    """``["key=value", ...]`` -> ``{key: value}`` (values read as YAML scalars: numbers, bools).

    Raises:
        ConfigError: an item without ``=`` or with an empty key.
    """
    import yaml

    from clawgym_ros.errors import ConfigError
    from clawgym_ros.safe_load import load_scalar

    options = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--policy-option", item, "KEY=VALUE")
        try:
            options[key.strip()] = load_scalar(text)
        except yaml.YAMLError:
            options[key.strip()] = text
    return options


def build_finetune_config(args: argparse.Namespace):
    """The FinetuneConfig of the command line (validated; ConfigError names the bad field)."""
    from clawgym_ros.config import check_option_names
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.training.rl import FinetuneConfig

    if not args.from_checkpoint:
        raise ConfigError("--from", None, "the checkpoint id to fine-tune (with --finetune rl)")
    if args.dataset:
        raise ConfigError("--dataset", args.dataset, "none with --finetune rl (it trains in "
                          "simulation from the --from checkpoint)")
    options = parse_policy_options(args.rl_option)
    check_option_names(options, FinetuneConfig.option_names(), "--rl-option ")
    values = {"base_checkpoint": args.from_checkpoint, "steps": args.steps, "seed": args.seed,
              **options}
    if args.task is not None:
        from clawgym_ros.tasks.registry import TASKS

        if args.task not in TASKS:
            raise ConfigError("--task", args.task, "one of " + ", ".join(TASKS))
        values["task"] = args.task
    if args.workers is not None:
        values["workers"] = args.workers
    if args.calibration:
        from clawgym_ros.calibration.apply import use_calibration

        values["calibration"] = use_calibration(args.out, args.calibration).to_dict()
    try:
        return FinetuneConfig(**values)
    except TypeError as err:
        raise ConfigError("--rl-option", options, f"values of the right type ({err})") from None


def run_finetune(args: argparse.Namespace) -> int:
    from clawgym_ros.training.rl import finetune

    cfg = build_finetune_config(args)
    result = finetune(args.out, cfg, progress_bar=args.progress)
    print(result.checkpoint_id)
    return 0


def build_sequence_config(args: argparse.Namespace):
    """The SequenceConfig of the command line (validated; ConfigError names the bad field)."""
    from clawgym_ros.config import check_option_names
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.training.sequence import SequenceConfig, check_tasks

    for flag, value in (("--finetune", args.finetune), ("--weights", args.weights),
                        ("--freeze", args.freeze), ("--policy", args.policy),
                        ("--init-checkpoint", args.init_checkpoint),
                        ("--hardening-share", args.hardening_share),
                        ("--patience", args.patience), ("--lr-schedule", args.lr_schedule)):
        if value:
            raise ConfigError(flag, value, "not with --sequence (see --sequence-option)")
    tasks = check_tasks([t.strip() for t in args.sequence.split(",")], "--sequence")
    options = parse_policy_options(args.sequence_option)
    check_option_names(options, SequenceConfig.option_names(), "--sequence-option ")
    values = {"tasks": tasks, "steps": args.steps, "seed": args.seed, **options}
    if args.add_feature:
        if "features" in options:
            raise ConfigError("--add-feature", args.add_feature,
                              "not with --sequence-option features=... (name the set once)")
        values["features"] = with_added_features(args.add_feature)
    for name in ("batch_size", "lr", "chunk"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if isinstance(values.get("hidden"), int):
        values["hidden"] = (values["hidden"],)
    try:
        return SequenceConfig(**values)
    except TypeError as err:
        raise ConfigError("--sequence-option", options, f"values of the right type ({err})") \
            from None


def run_sequence(args: argparse.Namespace) -> int:
    import sys

    from clawgym_ros.training.sequence import run_sequence as train_sequence

    cfg = build_sequence_config(args)
    result = train_sequence(args.out, cfg, args.dataset or [],
                            log=lambda line: print(line, file=sys.stderr, flush=True))
    print(result.report_id)
    return 0


def run(args: argparse.Namespace) -> int:
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.errors import ConfigError

    if args.sequence is not None:
        return run_sequence(args)
    if args.sequence_option:
        raise ConfigError("--sequence-option", args.sequence_option, "only with --sequence")
    if args.finetune:
        return run_finetune(args)
    if args.calibration:
        raise ConfigError("--calibration", args.calibration, "only with --finetune rl "
                          "(behaviour cloning learns from datasets, which name their own)")
    for name in ("from_checkpoint", "task", "workers"):
        if getattr(args, name) is not None or args.rl_option:
            flag = "--rl-option" if args.rl_option else "--" + name.replace("_checkpoint", "")
            raise ConfigError(flag, getattr(args, name) or args.rl_option,
                              "only with --finetune rl")
    if not args.dataset:
        raise ConfigError("--dataset", None, "at least one dataset id (behaviour cloning)")
    cfg = build_config(args)
    store = ArtifactStore(args.out)
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.data import open_training_table

    if cfg.group_weights:
        _check_weight_groups(store, args.dataset, cfg.group_weights, args.weights)
    table = open_training_table(store, args.dataset)
    try:
        result = train(table, cfg, store, dataset_ids=[store.resolve(d).id for d in args.dataset],
                       init_checkpoint=args.init_checkpoint, resume=not args.no_resume)
    except ConfigError as err:
        if args.weights and err.field.startswith("group_weights"):
            raise ConfigError(err.field, err.value, err.allowed, args.weights) from None
        raise
    print(result.checkpoint_id)
    return 0


def _check_weight_groups(store, dataset_refs, weights: dict, source: str) -> None:
    """A --weights group the datasets do not have fails before the training table is built
    (which reads every episode: minutes for thousands)."""
    from clawgym_ros.training.config import validate_group_weights
    from clawgym_ros.training.data import episode_group_names

    groups = episode_group_names(store, dataset_refs)
    if groups is not None:
        validate_group_weights(weights, allowed=groups, source=source)
