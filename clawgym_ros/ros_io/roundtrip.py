"""The bound of a lockstep control step: a bare topic round trip and a bare service round trip
between two processes, nothing else (``clawgym bench eval``'s ``ros_bound``).

Run as a module (``python -m clawgym_ros.ros_io.roundtrip``) it is the echo side: every
``JointState`` on :data:`PING` comes back at once as a ``JointTrajectory`` on :data:`PONG`
with the same stamp (sim_node's observation out, policy_node's command back: the two hops of a
per-step lockstep control step, same message types, same QoS, same executor), and
:data:`SERVICE` (``StepSim``, the type of ``sim/step``) answers at once.
:func:`measure_round_trips` starts that child in an isolated domain and times both from here.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

PING = "bench/ping"
PONG = "bench/pong"
SERVICE = "bench/echo"
#: Joints of the ping (the tabletop arm's joint_states_raw: 7 arm joints + 2 fingers).
JOINTS = 9


def main(argv: Sequence[str] | None = None) -> int:
    """The echo node (until SIGINT/SIGTERM)."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from clawgym_interfaces.srv import StepSim
    from clawgym_ros.ros_io.lean_executor import executor_for
    from clawgym_ros.ros_io.qos import COMMAND_QOS, LOCKSTEP_SENSOR_QOS

    rclpy.init(args=list(sys.argv if argv is None else argv))
    node = rclpy.create_node("roundtrip_echo", start_parameter_services=False,
                             enable_rosout=False)
    pub = node.create_publisher(JointTrajectory, PONG, COMMAND_QOS)

    def echo(msg: JointState) -> None:
        out = JointTrajectory()
        out.header.stamp = msg.header.stamp
        out.joint_names = msg.name
        pub.publish(out)

    def serve(request: StepSim.Request, response: StepSim.Response) -> StepSim.Response:
        response.success = True
        response.stamp = request.command_stamp
        return response

    node.create_subscription(JointState, PING, echo, LOCKSTEP_SENSOR_QOS)
    node.create_service(StepSim, SERVICE, serve)
    executor = executor_for(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


def measure_round_trips(n: int = 2000, warmup: int = 200,
                        timeout: float = 30.0) -> dict[str, Any]:
    """Median and mean microseconds of ``n`` topic and ``n`` service round trips to an echo
    child (after ``warmup`` of each), with this process's CPU per round trip.

    Raises:
        RuntimeError: the echo child did not answer within ``timeout`` seconds.
    """
    import rclpy
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from clawgym_interfaces.srv import StepSim
    from clawgym_ros.procs import ProcessGroup, isolated_ros_env, reserve_domain_id
    from clawgym_ros.ros_io.convert import time_msg
    from clawgym_ros.ros_io.lean_executor import executor_for
    from clawgym_ros.ros_io.qos import COMMAND_QOS, LOCKSTEP_SENSOR_QOS

    with contextlib.ExitStack() as stack:
        domain = stack.enter_context(reserve_domain_id()).domain_id
        group = stack.enter_context(ProcessGroup(env=isolated_ros_env(domain)))
        group.start_module("roundtrip_echo", "clawgym_ros.ros_io.roundtrip")
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain)
        stack.callback(lambda: context.ok() and rclpy.shutdown(context=context))
        node = rclpy.create_node("roundtrip_driver", context=context,
                                 start_parameter_services=False, enable_rosout=False)
        stack.callback(node.destroy_node)
        executor = executor_for(node, context=context)
        stack.callback(executor.shutdown)
        got = [0]
        pub = node.create_publisher(JointState, PING, LOCKSTEP_SENSOR_QOS)
        node.create_subscription(JointTrajectory, PONG, lambda _: got.__setitem__(0, got[0] + 1),
                                 COMMAND_QOS)
        client = node.create_client(StepSim, SERVICE)
        deadline = time.monotonic() + timeout
        names = [f"joint{i}" for i in range(JOINTS)]

        def spin_until(done: Any) -> None:
            while not done():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"round-trip echo did not answer within {timeout:g} s")
                executor.spin_once(timeout_sec=0.1)

        spin_until(lambda: client.service_is_ready() and pub.get_subscription_count() > 0)
        # A message published before the echo matched this reader is lost: ping until one
        # comes back.
        while not got[0]:
            pub.publish(JointState(name=names))
            executor.spin_once(timeout_sec=0.1)
            if time.monotonic() > deadline:
                raise RuntimeError(f"round-trip echo did not answer within {timeout:g} s")

        def topic_trip(i: int) -> None:
            msg = JointState(name=names, position=[0.0] * JOINTS, velocity=[0.0] * JOINTS,
                             effort=[0.0] * JOINTS)
            msg.header.stamp = time_msg(i * 0.02)
            want = got[0] + 1
            pub.publish(msg)
            spin_until(lambda: got[0] >= want)

        def service_trip(i: int) -> None:
            future = client.call_async(StepSim.Request(command_stamp=time_msg(i * 0.02)))
            spin_until(future.done)

        out: dict[str, Any] = {"round_trips": n}
        for key, trip in (("topic", topic_trip), ("service", service_trip)):
            for i in range(warmup):
                trip(i)
            times = []
            cpu0 = time.process_time()
            for i in range(n):
                t0 = time.perf_counter()
                trip(i)
                times.append(time.perf_counter() - t0)
            cpu = time.process_time() - cpu0
            times.sort()
            out[key] = {"median_us": round(times[n // 2] * 1e6, 1),
                        "p99_us": round(times[int(n * 0.99)] * 1e6, 1),
                        "mean_us": round(statistics.fmean(times) * 1e6, 1),
                        "per_s": round(n / sum(times), 1),
                        "driver_cpu_us": round(cpu / n * 1e6, 1)}
        return out


if __name__ == "__main__":
    sys.exit(main())
