"""ros_io.spin: a callback that fails because Ctrl-C / SIGTERM shut the context down while it
ran is a clean stop (exit 0); the same failure while the context is up is a fault (raised)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from test.conftest import ROOT

pytestmark = pytest.mark.ros

_NODE = """
import sys
sys.path.insert(0, {root!r})
import rclpy
from rclpy.node import Node
from std_msgs.msg import String
from clawgym_ros.ros_io.spin import spin


class Racing(Node):
    def __init__(self):
        super().__init__("racing")
        self.pub = self.create_publisher(String, "racing", 1)
        self.create_timer(0.05, self.tick)

    def tick(self):
        if {shutdown}:
            rclpy.shutdown()          # what the signal handler does mid-callback
        raise RuntimeError("publisher's context is invalid")   # what the next publish raises


sys.exit(spin(Racing, ["racing"]))
"""


def _run(shutdown: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _NODE.format(root=str(ROOT),
                                                              shutdown=shutdown)],
                          capture_output=True, text=True, timeout=60)


def test_a_callback_failing_during_shutdown_is_a_clean_stop():
    result = _run(shutdown=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_a_callback_failing_while_running_is_still_an_error():
    result = _run(shutdown=False)
    assert result.returncode == 1
    assert "publisher's context is invalid" in result.stderr
