"""LeanExecutor: a quiet spin leaves messages queued; a normal spin then takes them all."""

from __future__ import annotations

import time

import pytest


def test_quiet_spin_keeps_messages_queued_and_one_spin_takes_them_all(rclpy_context):
    rclpy = pytest.importorskip("rclpy")
    from std_msgs.msg import Int32

    from clawgym_ros.ros_io.lean_executor import executor_for
    from clawgym_ros.ros_io.qos import LOCKSTEP_SENSOR_QOS

    node = rclpy.create_node("lean_executor_test", context=rclpy_context,
                             start_parameter_services=False, enable_rosout=False)
    executor = executor_for(node, context=rclpy_context)
    got: list[int] = []
    node.create_subscription(Int32, "lean_test", lambda m: got.append(m.data),
                             LOCKSTEP_SENSOR_QOS)
    pub = node.create_publisher(Int32, "lean_test", LOCKSTEP_SENSOR_QOS)
    try:
        deadline = time.monotonic() + 10.0
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        for i in range(5):
            pub.publish(Int32(data=i))
        time.sleep(0.2)                      # delivered into the reader's queue
        for _ in range(3):
            executor.spin_once_quiet(timeout_sec=0.05)
        assert got == []                     # nothing taken while quiet
        executor.spin_once(timeout_sec=1.0)
        assert got == [0, 1, 2, 3, 4]        # all of them, in order, in one wake-up
    finally:
        executor.shutdown()
        node.destroy_node()
