"""The console-script body of every node: init rclpy, build the node, spin, clean up."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from rclpy.node import Node

from clawgym_ros.errors import ClawgymError
from clawgym_ros.ros_io.params import check_unknown_parameters


class StartError(ClawgymError):
    """A lifecycle node could not bring itself up (``autostart``): names the transition and why."""


def init_rclpy(args: list[str]) -> int:
    """``rclpy.init`` with a params file or ``--ros-args`` it cannot parse as one line on
    stderr. Returns 0, or 2 after printing that line."""
    import rclpy
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    try:
        rclpy.init(args=args)
    except _rclpy.RCLError as err:
        text = " ".join(str(err).split())
        text = text.split(", at /")[0]           # drop rcl's source locations
        print(f"{Path(args[0]).stem if args else 'node'}: error: cannot parse the ROS "
              f"arguments: {text[:400]}", file=sys.stderr)
        return 2
    return 0


def declared(node: Node) -> bool:
    """Whether ``node`` has declared its parameters (a lifecycle node does so on configure;
    one left unconfigured for a lifecycle manager has not yet)."""
    machine = getattr(node, "_state_machine", None)
    if machine is None:
        return True
    return machine.current_state[1] != "unconfigured"


def autostart(node: Node) -> None:
    """Configure, then activate a lifecycle node, checking each transition's result.

    A failed ``configure`` must not be followed by ``activate``: Jazzy's rclpy raises an
    uncaught ``RCLError`` for it, Kilted's returns ERROR and leaves the node spinning
    unconfigured, which nothing outside can tell from a healthy node.

    Raises:
        StartError: a transition did not succeed; the message carries the node's own reason
            (its ``transition_error`` attribute, set where its callback failed) when it has one.
    """
    from rclpy.lifecycle import TransitionCallbackReturn

    for transition, trigger in (("configure", node.trigger_configure),
                                ("activate", node.trigger_activate)):
        result = trigger()
        if result != TransitionCallbackReturn.SUCCESS:
            reason = (getattr(node, "transition_error", "")
                      or f"its callback returned {result.name}")
            raise StartError(f"{transition} failed: {reason}")


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

    code = init_rclpy(args if args is not None else sys.argv)
    if code:
        return code
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
        if declared(node):
            check_unknown_parameters(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ClawgymError as err:
        name = node.get_name() if node is not None else "node"
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2
    except Exception:
        # A callback that was running when Ctrl-C / SIGTERM shut the context down fails on its
        # next publish or take ("context is invalid"): that is the stop asked for, not a fault.
        if rclpy.ok():
            raise
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
