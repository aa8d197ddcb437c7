"""`clawgym demo`: the main job on the embedded default, end to end.

Until the closed loop lands, this runs the most complete real pipeline available and records
its result as artifacts with lineage in the run directory.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="run the main job end to end on the embedded default")
    parser.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (default: 0)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.artifacts.store import format_lineage
    from clawgym_ros.bench import run_area

    out = Path(args.out)
    store = ArtifactStore(out)
    start = time.perf_counter()
    config = {"pipeline": "artifact-store", "seed": args.seed}
    cfg = store.put_files(C.KIND_CONFIG, {"demo.json": json.dumps(config).encode()},
                          config=config, seeds={"run": args.seed})
    bench = run_area("artifacts", quick=True, seed=args.seed)
    report = store.put_files(
        C.KIND_REPORT, {C.FILE_REPORT_JSON: json.dumps(bench, sort_keys=True).encode()},
        config=config, seeds={"run": args.seed}, parents=[cfg.id], summary=bench,
    )
    print(f"demo: report {report.id} in {out} ({time.perf_counter() - start:.1f} s)")
    print("\n".join(format_lineage(store.lineage(report.id))))
    return 0
