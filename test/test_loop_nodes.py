"""safety_node and coordinator_node in their own processes (real ROS graph, isolated domain)."""

from __future__ import annotations

import json
import time

import pytest

from test.conftest import ROOT, read_logs, spin_until

pytestmark = pytest.mark.ros



def test_safety_node_clamps_and_latches_estop(procs, rclpy_context, tmp_path):
    from geometry_msgs.msg import Twist
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    from clawgym_ros import constants as C
    from clawgym_ros.ros_io.qos import COMMAND_QOS

    procs.env["PYTHONPATH"] = str(ROOT)
    procs.start_module("safety", "clawgym_ros.nodes.safety_node", [
        "--ros-args", "--params-file", str(ROOT / "config/params/safety.yaml"),
        "-p", "estop_timeout_s:=0.0"])
    node = Node("safety_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    got: list = []
    try:
        node.create_subscription(Twist, C.TOPIC_CMD_VEL, got.append, COMMAND_QOS)
        cmd = node.create_publisher(Twist, C.TOPIC_CMD_VEL_IN, COMMAND_QOS)
        estop = node.create_publisher(Bool, C.TOPIC_ESTOP, COMMAND_QOS)
        reset = node.create_client(Trigger, C.SRV_SAFETY_RESET)
        assert reset.wait_for_service(timeout_sec=30.0), read_logs(tmp_path)
        assert spin_until(executor, lambda: cmd.get_subscription_count() > 0, 10.0)

        def send(vx: float) -> Twist:
            got.clear()
            msg = Twist()
            msg.linear.x = vx
            deadline = time.monotonic() + 10.0
            while not got and time.monotonic() < deadline:
                cmd.publish(msg)
                spin_until(executor, lambda: bool(got), 0.3)
            assert got, read_logs(tmp_path)
            return got[-1]

        assert send(2.0).linear.x == pytest.approx(0.3)       # clamped to max_linear_speed
        assert spin_until(executor, lambda: estop.get_subscription_count() > 0, 10.0)
        estop.publish(Bool(data=True))
        spin_until(executor, lambda: False, 0.5)
        estop.publish(Bool(data=False))                         # does not clear the latch
        spin_until(executor, lambda: False, 0.3)
        assert send(0.1).linear.x == 0.0
        future = reset.call_async(Trigger.Request())
        assert spin_until(executor, future.done, 10.0) and future.result().success
        assert send(0.1).linear.x == pytest.approx(0.1)
    finally:
        node.destroy_node()


def test_coordinator_reports_a_missing_action_server(procs, rclpy_context, tmp_path):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.msg import LoopStatus
    from clawgym_ros import constants as C
    from clawgym_ros.coordinator.config import load_loop_config
    from clawgym_ros.ros_io.qos import LATCHED_QOS

    run = tmp_path / "run"
    procs.env["PYTHONPATH"] = str(ROOT)
    proc = procs.start_module("coordinator", "clawgym_ros.nodes.coordinator_node", [
        "--ros-args", "-p", f"config:={ROOT / 'config/loop/pick_place.yaml'}",
        "-p", f"run_dir:={run}", "-p", "server_timeout_s:=2.0"])
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.returncode == 1, read_logs(tmp_path)
    status = json.loads((run / C.DIR_LOOP / "status.json").read_text())
    assert status["phase"] == "failed"
    assert "no synthesize action server" in status["message"]
    state = json.loads((run / C.DIR_LOOP / C.FILE_LOOP_STATE).read_text())
    assert state["phase"] == "synthesize" and state["iteration"] == 0
    cfg = load_loop_config(ROOT / "config/loop/pick_place.yaml")
    assert state["iterations"][0]["goals"]["synthesize"]["episodes"] == \
        cfg.episodes_per_iteration
    decisions = (run / C.DIR_LOOP / C.FILE_DECISIONS).read_text().splitlines()
    assert len(decisions) == 1

    # Latched status: a coordinator still running publishes it to late subscribers.
    proc = procs.start_module("coordinator2", "clawgym_ros.nodes.coordinator_node", [
        "--ros-args", "-p", f"config:={ROOT / 'config/loop/pick_place.yaml'}",
        "-p", f"run_dir:={run}", "-p", "server_timeout_s:=30.0"])
    node = Node("status_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    got: list = []
    try:
        time.sleep(3.0)
        node.create_subscription(LoopStatus, C.TOPIC_LOOP_STATUS, got.append, LATCHED_QOS)
        assert spin_until(executor, lambda: bool(got), 20.0), read_logs(tmp_path)
        assert got[-1].phase == "synthesize" and got[-1].max_iterations == 3
    finally:
        node.destroy_node()
