"""Test set-up: ROS isolation per test process, process cleanup, temporary run dirs."""

from __future__ import annotations

import contextlib
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


def send_goal_answered(executor, client, goal, timeout: float = 30.0, tries: int = 3):
    """Send ``goal`` until the server answers it (accepted or rejected): the goal future, or
    None after ``tries`` sends of ``timeout / tries`` s each.

    Just after discovery a server may answer before it matched the client's reply reader, and
    the answer is lost (the server logs "failed to send response (timeout)"; CI once failed on
    it). The goal is then sent again, so use this only where running a goal twice is harmless
    (e.g. one that is refused or aborted).
    """
    for _ in range(tries):
        sent = client.send_goal_async(goal)
        if spin_until(executor, sent.done, timeout / tries):
            return sent
    return None


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


@contextlib.contextmanager
def trainer_action(procs, rclpy_context, tmp_path: Path, client_name: str,
                   node_args: list[str] | None = None, pythonpath: str = ""):
    """trainer_node started in this test's domain (``node_args`` after ``--ros-args``),
    configured and activated; yields ``(executor, Train action client)`` and cleans up."""
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Train
    from clawgym_ros import constants as C

    procs.env["PYTHONPATH"] = pythonpath or str(ROOT)
    procs.start_module("trainer", "clawgym_ros.nodes.trainer_node",
                       ["--ros-args", *(node_args or [])])
    node = Node(client_name, context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        configure_and_activate(node, executor, C.NODE_TRAINER, tmp_path, 60.0)
        action = ActionClient(node, Train, C.ACTION_TRAIN)
        assert action.wait_for_server(timeout_sec=20.0), read_logs(tmp_path)
        yield executor, action
    finally:
        executor.shutdown()
        node.destroy_node()


def tiny_suite_yaml(episodes: int, description: str) -> str:
    """A nominal pick_place/cube evaluation suite of ``episodes`` episodes (suite YAML)."""
    return (f"name: tiny\ndescription: {description}\nseed: 0\n"
            f"episodes_per_cell: {episodes}\nschedule: constant\ntasks:\n"
            "  - task: pick_place\n    templates: [cube]\ncells:\n  nominal: true\n")


def synthetic_train_run(tmp_path_factory) -> tuple[Path, str]:
    """A run folder holding one small synthetic table dataset: (run folder, dataset id)."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.training.synthetic import synthetic_dataset

    root = tmp_path_factory.mktemp("run")
    dataset = synthetic_dataset(ArtifactStore(root), rows=1200, episode_len=40, groups=2)
    return root, dataset.id


def train_cli(capsys, run: tuple[Path, str], *extra: str) -> tuple[int, str, str]:
    """`clawgym train` for 20 small steps on ``run``'s dataset: (exit code, stdout, stderr)."""
    from clawgym_ros.cli import main

    root, dataset = run
    code = main(["train", "--dataset", dataset[:12], "--steps", "20", "--seed", "0",
                 "--out", str(root), "--batch-size", "32", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err
