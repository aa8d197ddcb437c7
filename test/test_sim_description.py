"""Robot descriptions: every xacro expands, parses as a consistent URDF and compiles in MuJoCo."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.sim import scene_mjcf as MJ
from clawgym_ros.sim import scene_spec as S

XACROS = sorted((S.ROOT / "urdf").glob("*.urdf.xacro"))
MAPPINGS = ((), (("use_gazebo", "true"),))


def _urdf(path, mappings):
    return ET.fromstring(MJ.expand_xacro(path, mappings))


def test_there_are_two_robots():
    assert {p.name for p in XACROS} == {"claw_arm.urdf.xacro", "mobile_base.urdf.xacro"}


@pytest.mark.parametrize("path", XACROS, ids=lambda p: p.name)
@pytest.mark.parametrize("mappings", MAPPINGS, ids=("plain", "gazebo"))
def test_urdf_is_a_consistent_tree(path, mappings):
    robot = _urdf(path, mappings)
    links = {link.get("name") for link in robot.findall("link")}
    joints = robot.findall("joint")
    children = [j.find("child").get("link") for j in joints]
    assert len(children) == len(set(children)), "a link with two parents"
    roots = links - set(children)
    # Gazebo: the arm is bolted to the world (see test_arm_is_fixed_to_the_world_on_gazebo)
    fixed_arm = path.name == "claw_arm.urdf.xacro" and mappings
    assert roots == ({C.FRAME_WORLD} if fixed_arm else {C.FRAME_BASE})
    for joint in joints:
        assert joint.find("parent").get("link") in links
        assert joint.find("child").get("link") in links
        jtype = joint.get("type")
        assert jtype in {"revolute", "continuous", "prismatic", "fixed"}
        if jtype != "fixed":
            axis = np.array(joint.find("axis").get("xyz").split(), float)
            assert np.isclose(np.linalg.norm(axis), 1.0)
            limit = joint.find("limit")
            assert float(limit.get("velocity")) > 0 and float(limit.get("effort")) > 0
            if jtype != "continuous":
                assert float(limit.get("lower")) < float(limit.get("upper"))
            assert joint.find("dynamics") is not None, joint.get("name")
    for link in robot.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        assert float(inertial.find("mass").get("value")) > 0
        i = inertial.find("inertia")
        tensor = np.array([[float(i.get("ixx")), float(i.get("ixy")), float(i.get("ixz"))],
                           [float(i.get("ixy")), float(i.get("iyy")), float(i.get("iyz"))],
                           [float(i.get("ixz")), float(i.get("iyz")), float(i.get("izz"))]])
        eig = np.linalg.eigvalsh(tensor)
        assert eig.min() > 0, link.get("name")
        assert eig[0] + eig[1] >= eig[2] * (1 - 1e-6), f"triangle inequality: {link.get('name')}"
    control = robot.find("ros2_control")
    assert control is not None
    controlled = {j.get("name") for j in control.findall("joint")}
    movable = {j.get("name") for j in joints if j.get("type") != "fixed"}
    assert controlled == movable


def test_arm_names_limits_and_frames():
    robot = _urdf(S.ROOT / "urdf/claw_arm.urdf.xacro", ())
    joints = {j.get("name"): j for j in robot.findall("joint")}
    for name in C.ARM_JOINTS:
        assert joints[name].get("type") == "revolute"
    for name in C.GRIPPER_JOINTS:
        assert joints[name].get("type") == "prismatic"
        assert float(joints[name].find("limit").get("upper")) * 2 == pytest.approx(
            S.GRIPPER_MAX_WIDTH)
    links = {link.get("name") for link in robot.findall("link")}
    assert {C.FRAME_TOOL, C.FRAME_WRIST_CAMERA, "wrist_camera_link"} <= links


def test_gazebo_tags_only_with_use_gazebo():
    plain = MJ.expand_xacro(S.ROOT / "urdf/mobile_base.urdf.xacro", ())
    gz = MJ.expand_xacro(S.ROOT / "urdf/mobile_base.urdf.xacro", (("use_gazebo", "true"),))
    assert "<gazebo" not in plain
    for topic in (C.TOPIC_IMU_RAW, C.TOPIC_GPS_RAW, C.TOPIC_CMD_VEL, C.TOPIC_ODOM):
        assert f">{topic}<" in gz
    robot = ET.fromstring(gz)
    assert {j.get("name") for j in robot.findall("joint") if j.get("type") == "continuous"} \
        == set(C.BASE_WHEEL_JOINTS)
    assert {C.FRAME_IMU, C.FRAME_GPS, C.FRAME_FRONT_CAMERA} <= {
        link.get("name") for link in robot.findall("link")}


@pytest.mark.parametrize("path", XACROS, ids=lambda p: p.name)
def test_every_xacro_compiles_in_mujoco(path):
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string(MJ._mujoco_urdf(MJ.expand_xacro(path, ())))
    robot = _urdf(path, ())
    movable = [j.get("name") for j in robot.findall("joint") if j.get("type") != "fixed"]
    assert model.njnt == len(movable)
    for name in movable:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        assert jid >= 0
    assert (model.body_mass[1:] >= 0).all() and model.body_mass.sum() > 1.0


def test_arm_is_fixed_to_the_world_on_gazebo():
    """gz-sim spawns a URDF without a root link named "world" as a free body: the arm fell."""
    gz = _urdf(S.ROOT / "urdf/claw_arm.urdf.xacro", (("use_gazebo", "true"),))
    world_joints = [j for j in gz.findall("joint") if j.find("parent").get("link") == "world"]
    assert len(world_joints) == 1
    assert world_joints[0].get("type") == "fixed"
    assert world_joints[0].find("child").get("link") == C.FRAME_BASE
    # MuJoCo and MoveIt (its SRDF has a virtual joint to world) get the plain tree; the
    # mobile base must stay free on Gazebo.
    plain = _urdf(S.ROOT / "urdf/claw_arm.urdf.xacro", ())
    assert "world" not in {link.get("name") for link in plain.findall("link")}
    base = _urdf(S.ROOT / "urdf/mobile_base.urdf.xacro", (("use_gazebo", "true"),))
    assert "world" not in {link.get("name") for link in base.findall("link")}


@pytest.mark.skipif(shutil.which("check_urdf") is None,
                    reason="urdfdom's check_urdf is not installed (Debian: liburdfdom-tools)")
@pytest.mark.parametrize("path", XACROS, ids=lambda p: p.name)
@pytest.mark.parametrize("mappings", MAPPINGS, ids=("plain", "gazebo"))
def test_urdf_passes_urdfdom_check_urdf(path, mappings, tmp_path):
    urdf = tmp_path / "robot.urdf"
    urdf.write_text(MJ.expand_xacro(path, mappings))
    done = subprocess.run(["check_urdf", str(urdf)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Successfully Parsed XML" in done.stdout
    root = "world" if path.name == "claw_arm.urdf.xacro" and mappings else C.FRAME_BASE
    assert f"root Link: {root} " in done.stdout
