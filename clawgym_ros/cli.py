"""`clawgym`: the command-line entry point. Thin: parses, then calls cores or starts nodes.

Each subcommand lives in ``clawgym_ros.commands.<name>`` with ``register(subparsers)``; heavy
imports happen inside the handlers so that ``clawgym --help`` stays fast. Errors print one line
(what, where, allowed values) and exit non-zero; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from clawgym_ros import __version__
from clawgym_ros.errors import ClawgymError, ConfigError, one_line

#: Subcommand modules under clawgym_ros.commands, in --help order.
COMMANDS: tuple[str, ...] = (
    "demo",
    "lineage",
    "artifacts",
    "bench",
    "report",
    "prefs",
    "judge",
    "view",
    "export",
    "train",
    "eval",
    "synth",
    "loop",
    "ablate",
    "calibrate",
)

EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 1
EXIT_INTERRUPTED = 130
#: Exit code after SIGTERM / SIGHUP (128 + SIGTERM, as a shell reports a terminated job).
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C, so every ``with`` block closes its child
    processes (``kill <clawgym pid>`` must not leave a loop's nodes running)."""


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def _install_termination_handlers() -> dict[int, object]:
    """Route SIGTERM / SIGHUP to :class:`Terminated` where they would kill the process
    outright; returns the handlers replaced (restored when :func:`main` returns)."""
    if threading.current_thread() is not threading.main_thread():
        return {}   # main() called from a worker thread (tests): signals stay as they are
    replaced = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            replaced[sig] = signal.signal(sig, _terminate)
    return replaced


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors keep the one-line contract (no usage block; values cut
    like every other error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {one_line(message, 1000)} (see "
                                   f"{self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="clawgym",
        description="ClawGym: closed-loop synthesis, training and evaluation of claw agents.",
    )
    parser.add_argument("--version", action="version", version=f"clawgym {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"clawgym_ros.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also used by the console script)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    replaced = _install_termination_handlers()
    try:
        return _run(args)
    finally:
        for sig, handler in replaced.items():
            signal.signal(sig, handler)


def check_common_args(args: argparse.Namespace) -> None:
    """Checks of options many subcommands share, before any handler runs.

    Raises:
        ConfigError: an empty run directory (``--out ''`` wrote into the current directory)
            or one with a NUL byte.
    """
    for name in ("out", "run_dir"):
        value = getattr(args, name, None)
        if isinstance(value, str) and (not value.strip() or "\0" in value):
            raise ConfigError(f"--{name.replace('_', '-')}", value,
                              "a directory path (not empty; '.' for the current directory)")


def os_error_line(err: OSError, args: argparse.Namespace | None = None) -> str:
    """One line for an OS error: the errno's meaning and name, then the path (or the run
    directory when the error names none, as a full disk often does).

    OS errors are the environment's, not the program's (a read-only or full disk, a path too
    long, a permission), so they exit 2 like other problems the user can fix.
    """
    name = errno.errorcode.get(err.errno, str(err.errno))
    what = f"{os.strerror(err.errno)} ({name})"
    paths = [_short_path(p) for p in (err.filename, err.filename2) if p is not None]
    if paths:
        return one_line(what + ": " + " -> ".join(paths))
    run_dir = getattr(args, "out", None) or getattr(args, "run_dir", None)
    return one_line(what + (f" (under the run directory {_short_path(run_dir)})" if run_dir
                            else ""))


def _short_path(path: object, limit: int = 300) -> str:
    """A path as text, its middle elided past ``limit`` characters (the end names the file)."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    if len(text) <= limit:
        return text
    return f"{text[:limit // 2]}...({len(text)} chars)...{text[-limit // 2:]}"


def _run(args: argparse.Namespace) -> int:
    try:
        check_common_args(args)
        result = args.handler(args)
    except ClawgymError as err:
        if args.debug:
            raise
        print(f"clawgym {args.command}: error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Terminated as err:
        print(f"clawgym {args.command}: terminated ({err}); child processes stopped",
              file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print(f"clawgym {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as err:
        if args.debug or not err.errno:
            raise
        print(f"clawgym {args.command}: error: {os_error_line(err, args)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as err:  # noqa: BLE001 (last line of defence: one line, not a traceback)
        if args.debug:
            raise
        print(f"clawgym {args.command}: internal error: {type(err).__name__}: "
              f"{one_line(str(err))} (run with --debug for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
