"""The `clawgym` CLI: help lists subcommands, errors are one clear line without traceback."""

from __future__ import annotations

import subprocess
import sys

from clawgym_ros.cli import COMMANDS


def clawgym(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_help_lists_every_subcommand():
    result = clawgym("--help")
    assert result.returncode == 0
    for name in COMMANDS:
        assert name in result.stdout


def test_building_the_parser_imports_no_heavy_library():
    """`clawgym --help` and a refused option (argparse errors) pay only for the parser: no
    numpy, MuJoCo, torch, Gymnasium, rclpy or SciPy is imported until a handler runs (each
    test and user invocation of the CLI paid ~1 s for the simulator's import before)."""
    heavy = ("numpy", "mujoco", "torch", "gymnasium", "rclpy", "scipy")
    code = ("import sys; from clawgym_ros.cli import build_parser; build_parser(); "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [], result.stdout


def test_lineage_of_a_malformed_id_is_one_clear_line(tmp_path):
    result = clawgym("lineage", "not-an-id", "--run-dir", str(tmp_path))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "not-an-id" in lines[0] and "malformed" in lines[0] and "hex" in lines[0]
    assert "Traceback" not in result.stderr


def test_lineage_of_an_unknown_id_names_the_run_dir(tmp_path):
    result = clawgym("lineage", "ab" * 32, "--run-dir", str(tmp_path))
    assert result.returncode == 2
    assert str(tmp_path) in result.stderr and "unknown" in result.stderr
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(tmp_path):
    result = clawgym("--debug", "lineage", "not-an-id", "--run-dir", str(tmp_path))
    assert result.returncode != 0
    assert "Traceback" in result.stderr


def test_lineage_prints_the_chain(tmp_path):
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore

    store = ArtifactStore(tmp_path)
    cfg = store.put_files(C.KIND_CONFIG, {"c.yaml": b"a: 1"}, seeds={"run": 5})
    rep = store.put_files(C.KIND_REPORT, {"r.json": b"{}"}, parents=[cfg.id])
    result = clawgym("lineage", rep.id[:10], "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert cfg.id in result.stdout and "run=5" in result.stdout
