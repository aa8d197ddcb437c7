"""Test set-up: ROS isolation per test process, process cleanup, temporary run dirs."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawgym_ros.procs import ProcessGroup, isolated_ros_env, reserve_domain_id  # noqa: E402

# Set before anything initialises rclpy: a distinct domain per test process, localhost only,
# held for the process's life (no loop or evaluation graph on this host takes it meanwhile).
_DOMAIN = reserve_domain_id()
os.environ.update(isolated_ros_env(_DOMAIN.domain_id))
os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture
def procs(tmp_path):
    """Child processes in this test's ROS domain; all stopped (group-killed) after the test."""
    group = ProcessGroup(env=dict(os.environ), log_dir=tmp_path / "logs")
    yield group
    group.close()


@pytest.fixture
def rclpy_context():
    """A private rclpy context, shut down after the test."""
    rclpy = pytest.importorskip("rclpy")
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)


def read_logs(tmp_path: Path) -> str:
    """All child logs of a test, for assertion messages."""
    logs = sorted((tmp_path / "logs").glob("*.log"))
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


def spin_until(executor, predicate, timeout: float, period: float = 0.05) -> bool:
    """Spin ``executor`` until ``predicate()`` holds (True) or ``timeout`` s pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=period)
        if predicate():
            return True
    return False


def configure_and_activate(node, executor, target: str, tmp_path: Path,
                           timeout: float = 60.0) -> None:
    """Drive lifecycle node ``target`` through configure and activate from helper ``node``
    (spun by ``executor``); assertion messages carry the children's logs."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    change = node.create_client(ChangeState, f"/{target}/change_state")
    assert change.wait_for_service(timeout_sec=30.0), read_logs(tmp_path)
    for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
        future = change.call_async(ChangeState.Request(transition=Transition(id=transition)))
        assert spin_until(executor, future.done, timeout), read_logs(tmp_path)
        assert future.result().success, read_logs(tmp_path)
