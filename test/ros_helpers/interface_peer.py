"""A peer process for the interface round-trip test: one custom message, service and action.

Run as ``python -m test.ros_helpers.interface_peer``; exits on SIGINT.
"""

from __future__ import annotations

import time

import rclpy
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from clawgym_interfaces.action import Synthesize
from clawgym_interfaces.msg import LoopStatus, PerturbationState, RejectionCount
from clawgym_interfaces.srv import SetPerturbation
from clawgym_ros import constants as C
from clawgym_ros.ros_io.qos import LATCHED_QOS


class InterfacePeer(Node):
    def __init__(self) -> None:
        super().__init__("interface_peer")
        self.status_pub = self.create_publisher(LoopStatus, C.TOPIC_LOOP_STATUS, LATCHED_QOS)
        status = LoopStatus(iteration=3, max_iterations=5, phase=LoopStatus.PHASE_TRAIN,
                            message="peer ready")
        status.header.stamp = self.get_clock().now().to_msg()
        self.status_pub.publish(status)
        self.create_service(SetPerturbation, C.SRV_SET_PERTURBATION, self.on_set)
        self.action = ActionServer(self, Synthesize, C.ACTION_SYNTHESIZE, self.on_goal)

    def on_set(self, request, response):
        response.success = 0.0 <= request.intensity <= 1.0
        response.message = "ok" if response.success else "intensity outside [0, 1]"
        response.state = PerturbationState(family=request.family, intensity=request.intensity,
                                           schedule=request.schedule, seed=request.seed,
                                           parameters=list(request.parameters))
        return response

    def on_goal(self, goal_handle):
        total = goal_handle.request.episodes
        time.sleep(0.3)  # let discovery match the client's feedback subscription
        for done in range(1, total + 1):
            goal_handle.publish_feedback(Synthesize.Feedback(
                done=done, total=total, accepted=done, rejected=0))
            time.sleep(0.05)
        goal_handle.succeed()
        return Synthesize.Result(
            success=True, dataset_id="f" * 64, accepted=total, rejected=1,
            rejections=[RejectionCount(reason="joint_limit", count=1)],
            message=f"{goal_handle.request.mixture[0].task} x{total}")


def main() -> None:
    rclpy.init()
    node = InterfacePeer()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


if __name__ == "__main__":
    main()
