"""ThreadSafeActionClient: a goal sent from one thread while another spins is never lost,
even when the server answers before rclpy's ActionClient has registered the request
(ros2/rclpy#1123: "Ignoring unexpected goal response", a future that never completes)."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros


class _SlowRegistration:
    """The client's rcl handle, with a pause after each request went out: the window between
    sending and registering that a preempted thread can hit, made wide and certain."""

    def __init__(self, handle, pause_s: float):
        self._handle, self._pause_s = handle, pause_s

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self._handle.__enter__()

    def __exit__(self, *exc):
        return self._handle.__exit__(*exc)

    def _paused(self, send, request):
        sequence = send(request)
        time.sleep(self._pause_s)
        return sequence

    def send_goal_request(self, request):
        return self._paused(self._handle.send_goal_request, request)

    def send_result_request(self, request):
        return self._paused(self._handle.send_result_request, request)


def test_goal_and_result_sent_from_another_thread_complete(rclpy_context):
    from rclpy.action import ActionServer
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Synthesize
    from clawgym_ros.ros_io.action_client import ThreadSafeActionClient

    def execute(goal_handle):
        goal_handle.succeed()
        return Synthesize.Result(success=True, dataset_id="d" * 64)

    node = Node("action_client_race", context=rclpy_context)
    server = ActionServer(node, Synthesize, "race", execute_callback=execute)
    client = ThreadSafeActionClient(node, Synthesize, "race")
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        client._client_handle = _SlowRegistration(client._client_handle, 0.3)
        for _ in range(3):
            sent = client.send_goal_async(Synthesize.Goal(episodes=1))
            deadline = time.monotonic() + 10.0
            while not sent.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sent.done(), "the goal response was lost (taken before registration)"
            handle = sent.result()
            assert handle.accepted
            result = handle.get_result_async()
            deadline = time.monotonic() + 10.0
            while not result.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert result.done(), "the result response was lost (taken before registration)"
            assert result.result().result.dataset_id == "d" * 64
    finally:
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5.0)
        server.destroy()
        client.destroy()
        node.destroy_node()
