"""`clawgym judge`: a local web page for pairwise human judgments of two policies.

Runs the first ``--pairs`` episodes of a suite with both policies (in this process, as
``clawgym eval`` does), renders a strip of scene-camera frames of each episode headless, and
serves a page on 127.0.0.1 that shows each pair side by side and takes a choice (a / b / tie)
and an optional reason tag. Judgments go into the run's preference store; ``clawgym prefs
show`` and the next evaluation's report fit them.
"""

from __future__ import annotations

import argparse
import sys

from clawgym_ros.commands import add_run_dir

#: With --exit-when-done, how long the page is still served after the last judgment.
DONE_GRACE_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("judge", help="serve a local page to judge two policies' episodes "
                            "side by side; judgments go into the run's preference store")
    parser.add_argument("--a", required=True, metavar="POLICY", dest="policy_a",
                        help="a checkpoint id in --run-dir, or scripted:<task>[:name=value,...]")
    parser.add_argument("--b", required=True, metavar="POLICY", dest="policy_b",
                        help="the other policy (same forms as --a)")
    parser.add_argument("--suite", required=True, help="suite name (config/suites) or path: "
                        "its first --pairs episodes are shown")
    parser.add_argument("--seed", type=int, default=None,
                        help="suite seed (default: the suite's); also draws which policy is A")
    parser.add_argument("--pairs", type=int, default=5, help="episodes to judge (default 5)")
    parser.add_argument("--frames", type=int, default=8, help="frames per episode (default 8)")
    parser.add_argument("--size", default="160x120", metavar="WxH",
                        help="frame size in pixels (default 160x120)")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="control steps per episode (0 = the env's limit)")
    parser.add_argument("--port", type=int, default=8765,
                        help="port on 127.0.0.1 (default 8765; 0 = any free port)")
    parser.add_argument("--exit-when-done", action="store_true",
                        help=f"stop serving {DONE_GRACE_S:g} s after every pair is judged (the "
                             "page then shows the scores)")
    add_run_dir(parser)
    parser.set_defaults(handler=run)


def _size(text: str) -> tuple[int, int]:
    from clawgym_ros.errors import ConfigError

    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit():
        raise ConfigError("--size", text, "WIDTHxHEIGHT in pixels, e.g. 160x120")
    return int(w), int(h)


def run(args: argparse.Namespace) -> int:
    import threading

    from clawgym_ros.config import check_int
    from clawgym_ros.evaluation.judge import build_pairs, pick_specs
    from clawgym_ros.evaluation.rollout import PolicySource
    from clawgym_ros.evaluation.suites import expand, load_suite
    from clawgym_ros.report.judge_page import JudgeServer, JudgeSession

    width, height = _size(args.size)
    check_int("--port", args.port, 0, 65535)
    check_int("--max-steps", args.max_steps, 0, 1_000_000)
    suite = load_suite(args.suite)
    specs = pick_specs(expand(suite, args.seed), args.pairs)
    sources = []
    for text in (args.policy_a, args.policy_b):
        source = PolicySource.parse(text, args.run_dir)
        if source.kind == "checkpoint":
            import dataclasses

            from clawgym_ros.artifacts import ArtifactStore

            # unknown ids fail before rollouts; judgments name the full id, as reports do
            full = ArtifactStore(args.run_dir).resolve(source.ref).id
            source = dataclasses.replace(source, ref=full)
        sources.append(source)
    first, second = sources
    seed = suite.seed if args.seed is None else args.seed
    max_steps = args.max_steps or suite.max_steps

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    pairs = build_pairs(first, second, specs, seed, max_steps, args.frames, width, height,
                        progress)
    session = JudgeSession(args.run_dir, pairs)
    try:
        server = JudgeServer(session, args.port)
    except OSError as err:
        from clawgym_ros.errors import ConfigError

        raise ConfigError("--port", args.port, f"a free port on 127.0.0.1 ({err.strerror}); "
                          "0 picks one") from None
    print(f"judge page: {server.url} ({len(pairs)} pairs; Ctrl-C to stop)", flush=True)
    thread = threading.Thread(target=server.serve_forever, name="judge-http", daemon=True)
    thread.start()
    try:
        if args.exit_when_done:
            while not session.done.wait(0.5):
                pass
            threading.Event().wait(DONE_GRACE_S)
        else:
            thread.join()
    finally:
        server.shutdown()
        server.server_close()
    print(f"{len(session.judged)} of {len(pairs)} pairs judged in this session")
    return 0
