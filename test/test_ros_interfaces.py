"""Two processes exchange a custom message, a custom service call and a custom action goal."""

from __future__ import annotations

import pytest

from test.conftest import ROOT, read_logs, spin_until

pytestmark = pytest.mark.ros



def test_custom_message_service_action_across_processes(procs, rclpy_context, tmp_path):
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Synthesize
    from clawgym_interfaces.msg import LoopStatus, MixtureEntry, PerturbationParameter
    from clawgym_interfaces.srv import SetPerturbation
    from clawgym_ros import constants as C
    from clawgym_ros.ros_io.qos import LATCHED_QOS

    procs.env["PYTHONPATH"] = str(ROOT)
    procs.start_module("peer", "test.ros_helpers.interface_peer")
    node = Node("interface_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        statuses = []
        node.create_subscription(LoopStatus, C.TOPIC_LOOP_STATUS, statuses.append, LATCHED_QOS)
        assert spin_until(executor, lambda: statuses, 30.0), read_logs(tmp_path)
        assert statuses[0].iteration == 3 and statuses[0].phase == LoopStatus.PHASE_TRAIN

        client = node.create_client(SetPerturbation, C.SRV_SET_PERTURBATION)
        assert client.wait_for_service(timeout_sec=20.0)
        request = SetPerturbation.Request(
            family=C.FAMILY_GPS_DROPOUT, intensity=0.5, schedule="constant", seed=11,
            parameters=[PerturbationParameter(name="min_duration_s", value=8.0)])
        future = client.call_async(request)
        assert spin_until(executor, future.done, 10.0)
        response = future.result()
        assert response.success
        assert response.state.family == C.FAMILY_GPS_DROPOUT
        assert response.state.parameters[0].value == 8.0

        action = ActionClient(node, Synthesize, C.ACTION_SYNTHESIZE)
        assert action.wait_for_server(timeout_sec=20.0)
        feedback = []
        goal = Synthesize.Goal(
            mixture=[MixtureEntry(task="pick_place", perturbation_family="none", weight=1.0)],
            episodes=4, seed=3)
        send = action.send_goal_async(goal, feedback_callback=lambda f: feedback.append(f))
        assert spin_until(executor, send.done, 10.0)
        handle = send.result()
        assert handle.accepted
        result_future = handle.get_result_async()
        assert spin_until(executor, result_future.done, 20.0)
        result = result_future.result().result
        assert result.success and result.accepted == 4
        assert result.rejections[0].reason == "joint_limit"
        assert result.message == "pick_place x4"
        # Feedback is a topic: the first message may go out before discovery has matched the
        # client's subscription, so require an increasing run that reaches the total.
        done = [f.feedback.done for f in feedback]
        assert done and done == sorted(set(done)) and done[-1] == 4, done
        assert len(done) >= 3, done
    finally:
        executor.shutdown()
        node.destroy_node()
