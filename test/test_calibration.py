"""Sim-to-real calibration (issue 23): excitation, the stand-in robot (twin), the log reader
(package MCAP writer and a third-party rosbag2 writer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.calibration.excitation import (
    ARM_VELOCITY_LIMITS,
    ExcitationConfig,
    make_excitation,
)
from clawgym_ros.calibration.log import read_log
from clawgym_ros.calibration.twin import write_twin_log
from clawgym_ros.sim.calibrated import ContactsBeyondHome


@pytest.fixture(scope="module")
def short_log(tmp_path_factory) -> tuple[Path, dict[str, float]]:
    """A 10 s twin log (seed 4) and its hidden values."""
    path = tmp_path_factory.mktemp("calib") / "twin.mcap"
    return path, write_twin_log(path, 4, 10.0, hold_s=1.0, ramp_s=1.0)


def test_excitation_is_seeded_within_limits_and_collision_free():
    from clawgym_ros.sim import scene_mjcf as MJ

    config = ExcitationConfig(seed=3, duration_s=20.0)
    a, b = make_excitation(config), make_excitation(config)
    assert np.array_equal(a.position, b.position)
    other = make_excitation(ExcitationConfig(seed=4, duration_s=20.0))
    assert not np.allclose(a.position, other.position)
    model = MJ.build_model("tabletop")
    for j, name in enumerate(C.ARM_JOINTS):
        lo, hi = model.joint(name).range
        assert lo < a.position[:, j].min() and a.position[:, j].max() < hi
        assert np.abs(a.velocity[:, j]).max() <= 0.5 * ARM_VELOCITY_LIMITS[j] + 1e-9
        # every joint moves, and the feed-forward is the targets' derivative
        assert np.ptp(a.position[:, j]) > 0.05
        fd = np.gradient(a.position[:, j], a.t)
        assert np.abs(fd - a.velocity[:, j]).max() < 0.02 * np.abs(a.velocity[:, j]).max()
    # starts and ends at rest at home
    assert np.allclose(a.position[0], a.home) and np.allclose(a.position[-1], a.home)
    assert np.allclose(a.velocity[[0, -1]], 0.0)
    checker = ContactsBeyondHome(model, a.home, C.ARM_JOINTS)
    assert checker.free(a.position[::5])
    # the checker does see a collision: the shoulder driven down into the table
    low = a.home.copy()
    low[1] = 1.7
    assert not checker.free(low[None])


def test_twin_log_reads_back_and_a_rosbags_written_log_reads_the_same(short_log, tmp_path):
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    path, truth = short_log
    log = read_log(path)
    assert log.joint_names == (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)
    assert len(log.t) == 1001 and np.allclose(np.diff(log.t), 0.01)
    assert len(log.cmd_t) == 501 and log.cmd_names == C.ARM_JOINTS
    assert log.object_poses.shape == (101, 3, 7)
    assert log.metadata["excitation"]["seed"] == 4
    # the hidden values are not in the log
    text = path.read_bytes()
    for name, value in truth.items():
        if value:
            assert repr(value).encode() not in text, name
    # a third-party writer: rosbags (Jazzy typestore, sqlite3 storage) from the same arrays
    ts = get_typestore(Stores.ROS2_JAZZY)
    JointState = ts.types["sensor_msgs/msg/JointState"]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    Duration = ts.types["builtin_interfaces/msg/Duration"]
    Traj = ts.types["trajectory_msgs/msg/JointTrajectory"]
    Point = ts.types["trajectory_msgs/msg/JointTrajectoryPoint"]

    def header(sec: float):
        ns = int(round(sec * 1e9))
        return Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="")

    bag = tmp_path / "rosbag2_dir"
    with Writer(bag, version=9) as writer:
        js = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=ts)
        jt = writer.add_connection("/joint_trajectory", Traj.__msgtype__, typestore=ts)
        for i, t in enumerate(log.t):
            msg = JointState(header=header(t), name=list(log.joint_names),
                             position=log.position[i], velocity=log.velocity[i],
                             effort=log.effort[i])
            writer.write(js, int(round(t * 1e9)), ts.serialize_cdr(msg, JointState.__msgtype__))
        for i, t in enumerate(log.cmd_t):
            point = Point(positions=log.cmd_position[i], velocities=log.cmd_velocity[i],
                          accelerations=np.zeros(0), effort=np.zeros(0),
                          time_from_start=Duration(sec=0, nanosec=0))
            msg = Traj(header=header(t), joint_names=list(log.cmd_names), points=[point])
            writer.write(jt, int(round(t * 1e9)), ts.serialize_cdr(msg, Traj.__msgtype__))
    other = read_log(bag)
    for field in ("t", "position", "velocity", "effort", "cmd_t", "cmd_position",
                  "cmd_velocity"):
        assert np.array_equal(getattr(other, field), getattr(log, field)), field
    assert other.joint_names == log.joint_names and other.cmd_names == log.cmd_names
    assert len(other.object_t) == 0     # optional topic left out




def test_cli_writes_the_excitation_and_a_twin_log(tmp_path):
    import json
    import subprocess
    import sys

    def clawgym(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", "calibrate", *args],
                              capture_output=True, text=True, timeout=300)

    done = clawgym("--write-excitation", str(tmp_path / "exc.json"), "--seed", "6",
                   "--duration", "12")
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "exc.json").read_text())
    expected = make_excitation(ExcitationConfig(seed=6, duration_s=12.0))
    assert data["joint_names"] == list(C.ARM_JOINTS)
    assert np.array_equal(np.array(data["positions"]), expected.position)
    assert np.array_equal(np.array(data["velocities"]), expected.velocity)
    done = clawgym("--write-twin", str(tmp_path / "twin.mcap"), "--seed", "6",
                   "--duration", "12")
    assert done.returncode == 0, done.stderr
    log = read_log(tmp_path / "twin.mcap")
    assert np.array_equal(log.cmd_position, expected.position)
    assert log.duration == pytest.approx(12.0)
