"""ruff is clean over the package, tests and launch files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = Path(sys.executable).parent / "ruff"
    exe = str(ruff) if ruff.exists() else shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed (it is pinned in requirements.txt)")
    result = subprocess.run([exe, "check", "clawgym_ros", "test", "launch", "setup.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
