"""The console-script body of every node: init rclpy, build the node, spin, clean up."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rclpy.node import Node

from clawgym_ros.errors import ClawgymError


def spin(node_factory: Callable[[], Node], args: list[str] | None = None,
         lean: Callable[[Node], bool] | None = None,
         start: Callable[[Node], None] | None = None) -> int:
    """Init rclpy, spin one node on a SingleThreadedExecutor until shutdown, clean up.

    Args:
        node_factory: builds the node (after ``rclpy.init``).
        args: command line (default ``sys.argv``).
        lean: ``lean(node)`` true = spin on the
            :class:`~clawgym_ros.ros_io.lean_executor.LeanExecutor` instead (hot loops).
        start: called with the node before spinning (e.g. lifecycle autostart).

    Returns:
        The process exit code: 0, or 2 when the node's parameters are invalid (a ClawgymError,
        printed as one line naming the field).
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    executor = None
    try:
        node = node_factory()
        if lean is not None and lean(node):
            from clawgym_ros.ros_io.lean_executor import executor_for

            executor = executor_for(node)
        else:
            executor = SingleThreadedExecutor()
            executor.add_node(node)
        if start is not None:
            start(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ClawgymError as err:
        name = node.get_name() if node is not None else "node"
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
