"""The stand-in robot behind ROS (issue 23 item 4): sim_node with a private parameters file
(hidden offsets) serves the usual topics; an excitation goes to it through the HIL launch's
safety_node; the package's recorder writes the MCAP; ``clawgym calibrate``'s fit reads that
file alone (never the hidden values) and moves the simulator towards the robot.

~40-60 s on 2 cores (a 6 s excitation at half real time, then a fit): opt-in with
CLAWGYM_ACCEPTANCE=1, like the other long runs.
"""

from __future__ import annotations

import os

import pytest

from clawgym_ros import constants as C
from test.conftest import read_logs, spin_until
from test.test_hil_graph import ROBOT, node_command
from test.test_launch_files import HIL, RecordedNode, run_launch

pytestmark = [pytest.mark.ros, pytest.mark.skipif(
    os.environ.get("CLAWGYM_ACCEPTANCE") != "1",
    reason="a ROS graph and a fit (~1 min): set CLAWGYM_ACCEPTANCE=1")]

#: the robot's hidden values (latency on the physics step's 2 ms grid)
HIDDEN = {"joint_friction": 0.4, "damping_scale": 1.8, "actuator_gain_scale": 0.9,
          "command_latency_s": 0.014, "encoder_bias:arm_joint_3": 0.012}


def test_twin_behind_ros_is_recorded_and_calibrated(procs, monkeypatch, tmp_path,
                                                     rclpy_context):
    import numpy as np
    import rclpy
    import yaml
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Bool

    from clawgym_ros.calibration.excitation import ExcitationConfig, make_excitation
    from clawgym_ros.calibration.fit import FitConfig, calibrate
    from clawgym_ros.calibration.log import read_log
    from clawgym_ros.ros_io.qos import COMMAND_QOS
    from clawgym_ros.ros_io.robot_log import ExcitationSender, RobotLogRecorder
    from clawgym_ros.sim import calibration_params as P

    private = tmp_path / "private" / "twin.yaml"
    private.parent.mkdir()
    private.write_text(yaml.safe_dump(HIDDEN))
    procs.start_module(C.NODE_SIM, "clawgym_ros.nodes.sim_node", [
        "--autostart", "--ros-args", "-p", "clock_mode:=free", "-p", "real_time_factor:=0.5",
        "-p", "publish_camera:=false", "-p", f"twin_params_file:={private}"])
    # safety_node exactly as the HIL launch starts it (its parameter file), with the speed
    # limit raised for the excitation (a cell's own limits go in that file)
    actions = run_launch(HIL, monkeypatch, checkpoint="scripted:pick_place",
                         run_dir=str(tmp_path), **ROBOT)
    (safety,) = [a for a in actions if isinstance(a, RecordedNode)
                 and a.executable == "safety_node"]
    module, args = node_command(safety)
    procs.start_module(safety.name, module, [*args, "-p", "max_joint_speed:=2.0"])

    node = rclpy.create_node("calibration_operator", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    estop = node.create_publisher(Bool, ROBOT["estop"], COMMAND_QOS)
    node.create_timer(0.1, lambda: estop.publish(Bool(data=False)))
    excitation = make_excitation(ExcitationConfig(seed=2, duration_s=6.0, hold_s=0.5,
                                                  ramp_s=1.0))
    recorder = RobotLogRecorder(node, ROBOT["joint_states"], ROBOT["joint_trajectory"],
                                ROBOT["object_poses"])
    sender = ExcitationSender(node, excitation, ROBOT["joint_states"],
                              "/" + C.TOPIC_JOINT_TRAJECTORY_IN)
    try:
        assert spin_until(executor, lambda: sender.done, 120.0), \
            (sender.sent, len(recorder.commands), read_logs(tmp_path))
        spin_until(executor, lambda: False, 1.0)      # the last commands and states arrive
    finally:
        executor.shutdown()
        node.destroy_node()
    log_path = recorder.write(tmp_path / "twin_ros.mcap", {"robot": "twin behind ROS"})
    log = read_log(log_path)       # all the fit gets: the recorded topics
    assert log.metadata == {"robot": "twin behind ROS"}
    assert len(log.cmd_t) >= 0.9 * len(excitation.t), (len(log.cmd_t), sender.sent)
    names = P.expand_names(["joint_friction", "damping_scale", "actuator_gain_scale",
                            "command_latency_s", "encoder_bias:arm_joint_3"])
    result = calibrate(log, FitConfig(params=names, bounds=P.resolve_bounds(names), starts=1))
    fitted = {p.name: p.value for p in result.params}
    before = result.summary_rmse("before")
    after = result.summary_rmse("after")
    print({"fitted": fitted, "hidden": HIDDEN, "position_rmse_before": before,
           "position_rmse_after": after, "fit_s": result.wall_s})
    assert after <= 0.3 * before, (before, after, fitted)
    assert fitted["damping_scale"] == pytest.approx(HIDDEN["damping_scale"], rel=0.1)
    assert fitted["encoder_bias:arm_joint_3"] == pytest.approx(0.012, abs=0.002)
    assert np.isfinite(list(fitted.values())).all()
