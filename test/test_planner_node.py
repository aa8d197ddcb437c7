"""Two processes: planner_node serves PlanMotion; a client gets JointTrajectory plans."""

from __future__ import annotations

import pytest

from test.conftest import ROOT, read_logs, spin_until

pytestmark = pytest.mark.ros


def test_plan_motion_service_across_processes(procs, rclpy_context, tmp_path):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from trajectory_msgs.msg import JointTrajectory

    from clawgym_interfaces.srv import PlanMotion
    from clawgym_ros import constants as C
    from clawgym_ros.ros_io.planning import trajectory_from_msg
    from clawgym_ros.ros_io.qos import COMMAND_QOS

    procs.env["PYTHONPATH"] = str(ROOT)
    procs.start_module("planner", "clawgym_ros.nodes.planner_node",
                       ["--ros-args", "-p", "obstacles:=wall"])
    node = Node("plan_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        executed = []
        node.create_subscription(JointTrajectory, C.TOPIC_JOINT_TRAJECTORY, executed.append,
                                 COMMAND_QOS)
        client = node.create_client(PlanMotion, C.SRV_PLAN_MOTION)
        assert client.wait_for_service(timeout_sec=40.0), read_logs(tmp_path)

        def call(request):
            future = client.call_async(request)
            assert spin_until(executor, future.done, 30.0), read_logs(tmp_path)
            return future.result()

        home = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
        request = PlanMotion.Request(goal_type=PlanMotion.Request.GOAL_NAMED,
                                     named_goal="ready", execute=True)
        request.start_state.name = list(C.ARM_JOINTS)
        request.start_state.position = home
        response = call(request)
        assert response.success, response.message
        traj = response.trajectory
        assert list(traj.joint_names) == list(C.ARM_JOINTS)
        core = trajectory_from_msg(traj)
        assert core.times[0] == 0.0 and (core.times[1:] > core.times[:-1]).all()
        assert list(traj.points[0].positions) == pytest.approx(home, abs=1e-6)
        ready = [0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785]
        assert list(traj.points[-1].positions) == pytest.approx(ready, abs=1e-6)
        assert len(traj.points[5].velocities) == 7 and len(traj.points[5].accelerations) == 7
        assert spin_until(executor, lambda: executed, 10.0), "execute did not publish"
        assert len(executed[0].points) == len(traj.points)

        far = PlanMotion.Request(goal_type=PlanMotion.Request.GOAL_POSE)
        far.start_state.name = list(C.ARM_JOINTS)
        far.start_state.position = home
        far.pose_goal.header.frame_id = C.FRAME_WORLD
        far.pose_goal.pose.position.x = 2.5
        far.pose_goal.pose.position.z = 0.6
        far.pose_goal.pose.orientation.x = 1.0
        far.pose_goal.pose.orientation.w = 0.0
        response = call(far)
        assert not response.success
        assert response.reason == "goal_unreachable", response.message
        assert len(response.trajectory.points) == 0

        bad = PlanMotion.Request(goal_type=PlanMotion.Request.GOAL_JOINTS)
        bad.joint_goal.name = ["arm_joint_1"]
        bad.joint_goal.position = [0.0]
        response = call(bad)
        assert not response.success and response.reason == "invalid_request"
        assert "joint_goal" in response.message

        # Succeed, fail, succeed: each outcome logs at its own severity. A node that logged
        # both from one call line died here on Jazzy ("Logger severity cannot be changed").
        request.execute = False
        assert call(request).success
        assert not call(far).success
        assert call(request).success, read_logs(tmp_path)
        assert procs.get("planner").poll() is None, read_logs(tmp_path)
    finally:
        executor.shutdown()
        node.destroy_node()


def _exits_with_one_line(procs, module: str, args: list[str], reason: str) -> None:
    """Run ``module`` (sim_node with ``--autostart``) with ``--ros-args args``: exit 2, no
    traceback, exactly one error line, containing ``reason``."""
    import subprocess
    import sys

    procs.env["PYTHONPATH"] = str(ROOT)
    extra = ["--autostart"] if module.endswith("sim_node") else []
    proc = subprocess.run([sys.executable, "-m", module, *extra, "--ros-args", *args],
                          env=procs.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and reason in errors[0], proc.stderr


@pytest.mark.parametrize("module, args, reason", [
    ("clawgym_ros.nodes.planner_node", ["-p", "backend:=moveit"],
     "configure failed: cannot build the moveit planner"),
    ("clawgym_ros.nodes.synthesis_node", ["-p", "autostart:=true", "-p", "default_workers:=-3"],
     "default_workers=-3 is invalid"),
    ("clawgym_ros.nodes.sim_node", ["-p", "scenario:=moon"], "configure failed: "),
])
def test_autostart_with_a_failing_configure_exits_with_one_line(procs, tmp_path, module, args,
                                                                 reason):
    """Autostart checks configure's result: one line naming why, exit 2, never a traceback
    (Jazzy raised RCLError on the activate that followed; Kilted left the node spinning
    unconfigured)."""
    _exits_with_one_line(procs, module, args, reason)


@pytest.mark.parametrize("module, args, reason", [
    ("clawgym_ros.nodes.trainer_node", ["-p", "lr:=fast"],
     "parameter lr='fast' is invalid; allowed: a number"),
    ("clawgym_ros.nodes.trainer_node", ["-p", "batch_size:=2.5"],
     "parameter batch_size=2.5 is invalid; allowed: an integer"),
    ("clawgym_ros.nodes.trainer_node", ["-p", "lrr:=0.1"], "did you mean 'lr'?"),
    ("clawgym_ros.nodes.planner_node", ["-p", "obstacle:=wall"], "did you mean 'obstacles'?"),
    ("clawgym_ros.nodes.sim_node", ["-p", "clock_mod:=lockstep"], "did you mean 'clock_mode'?"),
    ("clawgym_ros.nodes.trainer_node", ["--params-file", "BAD"],
     "cannot parse the ROS arguments"),
])
def test_bad_ros_parameters_exit_with_one_line(procs, tmp_path, module, args, reason):
    """A value of the wrong type, a misspelled parameter (ignored in silence before) and a
    params file rcl cannot parse (a traceback before): one line naming it, exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("x: [\n")
    args = [str(bad) if a == "BAD" else a for a in args]
    if module.endswith("trainer_node"):
        args = [*args, "-p", "autostart:=true"]
    _exits_with_one_line(procs, module, args, reason)
