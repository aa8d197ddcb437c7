"""`clawgym calibrate` bad input (issue 23): one line naming the problem, exit 2, nothing
committed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.calibration.log import encode_log

N = 120


def clawgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args],
                          capture_output=True, text=True, timeout=300)


def write(path: Path, *, names=(*C.ARM_JOINTS, *C.GRIPPER_JOINTS), cmd_names=C.ARM_JOINTS,
          t=None, commands: bool = True, in_stamp_order: bool = True) -> Path:
    """A valid-looking log (the arm at rest at home) with one thing changed."""
    home = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    t = np.arange(N) * 0.01 + 5.0 if t is None else t
    pos = np.tile(np.concatenate([home, [0.04, 0.04]]), (N, 1))
    zeros = np.zeros((N, 9))
    cmd_t = np.arange(N // 2) * 0.02 + 5.0 if commands else np.zeros(0)
    cmd_pos = np.tile(home, (len(cmd_t), 1))
    path.write_bytes(encode_log(t, names, pos, zeros, zeros, cmd_t, cmd_names, cmd_pos,
                                np.zeros_like(cmd_pos), in_stamp_order=in_stamp_order))
    return path


def test_bad_input_is_one_line_exit_2_and_nothing_committed(tmp_path):
    run = tmp_path / "run"
    good = write(tmp_path / "good.mcap")

    def refused(*args: str, needle: str) -> None:
        result = clawgym("calibrate", *args, "--out", str(run))
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and needle in result.stderr, result.stderr
        assert result.stdout == ""
        assert not (run / "artifacts" / "calibration").exists()
        assert not list((run / "artifacts" / ".staging").glob("*")) if \
            (run / "artifacts" / ".staging").exists() else True

    refused("--bag", str(write(tmp_path / "no_cmd.mcap", commands=False)),
            needle="required topic joint_trajectory (trajectory_msgs/msg/JointTrajectory) "
                   "is missing; topics in the log: joint_states")
    t = np.arange(N) * 0.01 + 5.0
    t[40], t[41] = t[41], t[40]
    refused("--bag", str(write(tmp_path / "stamps.mcap", t=t, in_stamp_order=False)),
            needle="joint_states stamps are not monotonic: message 41 at 5.400000000 s "
                   "follows 5.410000000 s")
    panda = tuple(f"panda_joint{k}" for k in range(1, 8))
    refused("--bag", str(write(tmp_path / "panda.mcap",
                               names=(*panda, "panda_finger_joint1", "panda_finger_joint2"))),
            needle="joint_states names joints ['panda_joint1'")
    refused("--bag", str(write(tmp_path / "panda_cmd.mcap", cmd_names=panda)),
            needle="joint_trajectory commands joints ['panda_joint1'")
    data = good.read_bytes()
    truncated = tmp_path / "truncated.mcap"
    truncated.write_bytes(data[:len(data) // 2])
    refused("--bag", str(truncated), needle="truncated.mcap: not a readable MCAP file")
    refused("--bag", str(tmp_path / "absent.mcap"), needle="absent.mcap: no such file")
    refused("--bag", str(good), "--params", "damping_scale,link_length",
            needle="--params='link_length' is invalid; allowed: names from joint_friction")
    bounds = tmp_path / "bounds.yaml"
    bounds.write_text("damping_scale: [1.5, 3.0]\n")
    refused("--bag", str(good), "--bounds", str(bounds),
            needle="bounds.yaml: bounds.damping_scale=[1.5, 3.0] is invalid; allowed: bounds "
                   "containing the nominal value 1 x")
    bounds.write_text("object_mass_scale: [0.5, 2.0]\n")
    refused("--bag", str(good), "--params", "damping_scale", "--bounds", str(bounds),
            needle="bounds.object_mass_scale=[0.5, 2.0] is invalid; allowed: a fitted "
                   "parameter: damping_scale")
    bounds.write_text("damping_scale: [3.0, 0.5]\n")
    refused("--bag", str(good), "--bounds", str(bounds), needle="allowed: low < high")
    refused("--bag", str(good), "--scene", "outdoor", needle="--scene='outdoor' is invalid")
    refused("--seed", "2", needle="give exactly one of --bag (fit a log), --write-excitation "
            "or --write-twin")
    assert not run.exists() or not (run / "artifacts" / "calibration").exists()
