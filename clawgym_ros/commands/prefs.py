"""`clawgym prefs`: add pairwise human judgments to a run and show the fitted scores."""

from __future__ import annotations

import argparse

from clawgym_ros.commands import add_run_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("prefs", help="human preference judgments (ingest, show)")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    ingest = verbs.add_parser("ingest", help="validate a judgments file (CSV or JSON) and add "
                              "it to the run's preference store; prints the fitted scores")
    ingest.add_argument("file", help="judgments file: columns item_a,item_b,preferred"
                        "[,rater,context]; preferred is a, b or tie")
    add_run_dir(ingest)
    ingest.set_defaults(handler=run_ingest)
    show = verbs.add_parser("show", help="print the Bradley-Terry scores of the run's store")
    add_run_dir(show)
    show.set_defaults(handler=run_show)


def _print_scores(run_dir: str) -> None:
    from clawgym_ros.evaluation.metrics import MetricsConfig
    from clawgym_ros.evaluation.preference import fit_bradley_terry, format_scores, read_store

    judgments = read_store(run_dir)
    if not judgments:
        print("no judgments in this run yet")
        return
    fit = fit_bradley_terry(judgments, ridge=MetricsConfig().bt_ridge)
    print("\n".join(format_scores(fit)))


def run_ingest(args: argparse.Namespace) -> int:
    from clawgym_ros.evaluation.preference import ingest, store_path

    added, total = ingest(args.run_dir, args.file)
    if added:
        print(f"added {added} judgments to {store_path(args.run_dir)} ({total} in total)")
    else:
        print(f"{args.file} was ingested before (same content); nothing added ({total} in "
              "total)")
    _print_scores(args.run_dir)
    return 0


def run_show(args: argparse.Namespace) -> int:
    _print_scores(args.run_dir)
    return 0
