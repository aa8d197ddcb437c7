"""The HIL graph end to end (issue 17): the nodes ``launch/hil_launch.py``'s setup function
makes (interposers, policy_node free-running, safety_node) run as processes in this test's
isolated ROS domain, with sim_node (free-running, real time, the pick_place task world)
standing in for the robot and a checkpoint trained here as the policy.

The node list is the launch file's own (run through the stand-in launch context of
test_launch_files, or the real launch where it is installed), turned into command lines;
only sim_node and the e-stop heartbeat (the operator's) are added. Checked: the robot moves
under the policy's commands, every arm command the robot gets comes from safety_node and is
within its speed limit, the e-stop latches a stop (the robot holds still) and safety/reset
releases it, and every process exits cleanly when the graph is stopped. ~30 s on 2 cores.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from clawgym_ros import constants as C
from test.conftest import read_logs, spin_until
from test.test_eval_ros import PICK_PLACE_LAYOUT, train_checkpoint
from test.test_launch_files import HIL, RecordedNode, run_launch

pytestmark = pytest.mark.ros

#: The robot's topics of the launch file, pointed at sim_node's (the robot stand-in).
ROBOT = {"joint_states": "/" + C.TOPIC_JOINT_STATES_RAW, "image": "/" + C.TOPIC_IMAGE_RAW,
         "imu": "/" + C.TOPIC_IMU_RAW, "gps": "/" + C.TOPIC_GPS_RAW,
         "object_poses": "/" + C.TOPIC_OBJECT_POSES_RAW, "odom": "/" + C.TOPIC_ODOM,
         "joint_trajectory": "/" + C.TOPIC_JOINT_TRAJECTORY,
         "gripper_command": "/" + C.TOPIC_GRIPPER_COMMAND, "cmd_vel": "/" + C.TOPIC_CMD_VEL,
         "task_state": "/" + C.TOPIC_TASK_STATE, "estop": "/estop"}


def _value(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def node_command(node: RecordedNode) -> tuple[str, list[str]]:
    """(module, arguments) that start ``node`` as ``ros2 launch`` would: its arguments, then
    its name, parameter files, parameters and remappings as ROS arguments."""
    assert node.package == "clawgym_ros", node.package
    args = [*node.arguments, "--ros-args"]
    if node.name:
        args += ["-r", f"__node:={node.name}"]
    for entry in node.parameters:
        if isinstance(entry, dict):
            for name, value in entry.items():
                args += ["-p", f"{name}:={_value(value)}"]
        else:
            args += ["--params-file", str(entry)]
    for old, new in node.remappings:
        args += ["-r", f"{old}:={new}"]
    return f"clawgym_ros.nodes.{node.executable}", args


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A small pick_place-layout checkpoint (place_goal included), trained here."""
    return train_checkpoint(tmp_path_factory.mktemp("hil_ckpt"), PICK_PLACE_LAYOUT, chunk=2)


def test_hil_graph_drives_sim_node_through_safety_node(checkpoint, procs, monkeypatch,
                                                        tmp_path, rclpy_context):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool, String
    from std_srvs.srv import Trigger
    from trajectory_msgs.msg import JointTrajectory

    from clawgym_ros.ros_io.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
    from clawgym_ros.safety import SafetyLimits

    root, ckpt = checkpoint
    actions = run_launch(HIL, monkeypatch, checkpoint=ckpt, run_dir=str(root),
                         task=C.TASK_PICK_PLACE, **ROBOT)
    nodes = [a for a in actions if isinstance(a, RecordedNode)]
    assert {n.executable for n in nodes} == {"sensor_noise_node", "gps_dropout_node",
                                             "policy_node", "safety_node"}
    # The launch's safety limits (the parameter file it names) are what the node applies.
    import yaml

    (safety,) = [n for n in nodes if n.executable == "safety_node"]
    (params_file,) = safety.param_files()
    limits = SafetyLimits(**{k: v for k, v in yaml.safe_load(params_file.read_text())[
        "safety_node"]["ros__parameters"].items()})
    assert limits.estop_timeout_s > 0   # the heartbeat below is needed

    # The robot stand-in: sim_node in real time, pick_place cube world.
    procs.start_module(C.NODE_SIM, "clawgym_ros.nodes.sim_node", [
        "--autostart", "--ros-args", "-p", "task:=pick_place", "-p", "template:=cube",
        "-p", "clock_mode:=free", "-p", "publish_camera:=false"])
    node = rclpy.create_node("hil_operator", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    estop = node.create_publisher(Bool, ROBOT["estop"], COMMAND_QOS)
    engaged = [False]
    node.create_timer(0.1, lambda: estop.publish(Bool(data=engaged[0])))  # the heartbeat
    joints: list[tuple[float, np.ndarray]] = []
    robot_cmds: list[JointTrajectory] = []
    policy_cmds: list[JointTrajectory] = []
    status: list[str] = []

    def on_joints(msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        joints.append((time.monotonic(),
                       np.array([msg.position[index[n]] for n in C.ARM_JOINTS])))

    node.create_subscription(JointState, ROBOT["joint_states"], on_joints, SENSOR_QOS)
    node.create_subscription(JointTrajectory, ROBOT["joint_trajectory"], robot_cmds.append,
                             COMMAND_QOS)
    node.create_subscription(JointTrajectory, "/" + C.TOPIC_JOINT_TRAJECTORY_IN,
                             policy_cmds.append, COMMAND_QOS)
    node.create_subscription(String, "/" + C.TOPIC_SAFETY_STATUS,
                             lambda msg: status.append(msg.data), LATCHED_QOS)
    assert spin_until(executor, lambda: len(joints) > 5, 60.0), read_logs(tmp_path)
    start = joints[-1][1].copy()
    # The HIL graph, exactly as the launch file describes it.
    for recorded in nodes:
        module, args = node_command(recorded)
        procs.start_module(recorded.name, module, args)
    children = list(procs.procs)
    try:
        def moved(limit: float) -> bool:
            return bool(joints) and float(np.max(np.abs(joints[-1][1] - start))) > limit

        # Every robot command came through safety_node from a policy command: one point, the
        # arm's joints, the header (the observation's stamp) of a command the policy sent to
        # safety_node's input (the newest few may still be on their way to this node; the
        # first few may predate this node's discovery of the policy's publisher, which can
        # come later than safety_node's -- seconds later on a loaded machine -- so the check
        # starts at the first command seen here and waits for enough of them).
        def stamp(m: JointTrajectory) -> tuple[int, int]:
            return m.header.stamp.sec, m.header.stamp.nanosec

        def checked() -> set[tuple[int, int]]:
            if not policy_cmds:
                return set()
            first = min(stamp(m) for m in policy_cmds)
            return {stamp(m) for m in robot_cmds[:-5] if stamp(m) >= first}

        assert spin_until(executor, lambda: len(robot_cmds) > 50 and moved(0.05)
                          and len(checked()) > 20, 90.0), \
            (len(policy_cmds), len(robot_cmds), len(checked()), status[-3:],
             read_logs(tmp_path))
        sent = {stamp(m) for m in policy_cmds}
        seen = checked()
        assert len(seen) > 20 and seen <= sent, (len(seen), sorted(seen - sent)[:5])
        assert all(list(m.joint_names) == list(C.ARM_JOINTS) and len(m.points) == 1
                   for m in robot_cmds)
        # The policy (synthetic data) asks for jumps the speed limit cuts: clamped verdicts.
        clamped = [s for s in status if s.startswith("joint_trajectory: clamped")]
        assert clamped, status[-5:]
        # Measured joint speeds on the robot stay near the limit (servo tracking adds a
        # little), though the policy's targets are far away.
        speeds = [np.max(np.abs(b - a)) / (tb - ta) for (ta, a), (tb, b) in
                  zip(joints[-40:], joints[-39:]) if tb - ta > 0.015]
        assert speeds and np.median(speeds) < 2.0 * limits.max_joint_speed, speeds
        far = [np.max(np.abs(np.array(m.points[0].positions) - start)) for m in policy_cmds]
        assert max(far) > 0.2, "the policy asked for nothing the limit had to cut"

        # E-stop: latched; the robot holds still although the policy keeps commanding.
        engaged[0] = True
        assert spin_until(executor, lambda: any(s.startswith("stopped") for s in status),
                          10.0), status[-5:]
        engaged[0] = False   # heartbeat continues; the stop stays latched
        spin_until(executor, lambda: False, 1.5)   # settle
        held_from, n_policy = joints[-1][1].copy(), len(policy_cmds)
        spin_until(executor, lambda: False, 2.0)
        assert len(policy_cmds) > n_policy + 10          # the policy still acts ...
        assert float(np.max(np.abs(joints[-1][1] - held_from))) < 0.01   # ... the robot not
        # Operator reset: commands pass again and the robot moves.
        reset = node.create_client(Trigger, "/" + C.SRV_SAFETY_RESET)
        assert reset.wait_for_service(timeout_sec=10.0)
        future = reset.call_async(Trigger.Request())
        assert spin_until(executor, future.done, 10.0) and future.result().success
        resumed = joints[-1][1].copy()
        assert spin_until(executor, lambda: float(np.max(np.abs(joints[-1][1] - resumed)))
                          > 0.02, 30.0), status[-5:]
    finally:
        executor.shutdown()
        node.destroy_node()
    # A clean stop: SIGINT to every process (as ros2 launch does on Ctrl-C), all exit 0.
    procs.close()
    codes = {name: proc.wait(timeout=1.0) for name, proc in children}
    assert codes == {name: 0 for name, _ in children}, (codes, read_logs(tmp_path))
    for _, proc in children:
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)   # no process of its group is left either
    assert Path(tmp_path / "logs" / "policy_node.log").is_file()
