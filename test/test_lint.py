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


def test_no_deprecated_or_severity_switching_logger_calls():
    """rclpy loggers: ``.warn`` is deprecated (Kilted), and a call site keeps its first
    severity (Jazzy raises ``ValueError: Logger severity cannot be changed between calls``), so
    a logger method must be called where it is named, not picked into a variable first."""
    import re

    deprecated = re.compile(r"\.warn\(")
    picked = re.compile(r"=\s*[^=\n]*get_logger\(\)\.(debug|info|warning|error|fatal)\b(?!\()")
    found = []
    for path in sorted([*ROOT.glob("clawgym_ros/**/*.py"), *ROOT.glob("launch/*.py")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if deprecated.search(line) or picked.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
