"""config/moveit is consistent with the URDF and loads into the planner's configuration."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from clawgym_ros import constants as C
from clawgym_ros.config import load_yaml
from clawgym_ros.errors import ConfigError
from clawgym_ros.planning.moveit_config import DEFAULT_MOVEIT_DIR, load_moveit_config
from clawgym_ros.planning.srdf import link_names, urdf_text


@pytest.fixture(scope="module")
def urdf():
    return ET.fromstring(urdf_text())


@pytest.fixture(scope="module")
def cfg():
    return load_moveit_config()


def test_srdf_names_match_the_urdf(urdf, cfg):
    links = set(link_names(ET.tostring(urdf, encoding="unicode")))
    joints = {j.get("name") for j in urdf.findall("joint")}
    assert cfg.srdf.links <= links, cfg.srdf.links - links
    assert cfg.srdf.groups[C.ARM_GROUP] == C.ARM_JOINTS
    assert cfg.srdf.groups[C.GRIPPER_GROUP] == C.GRIPPER_JOINTS
    assert set(C.ARM_JOINTS) | set(C.GRIPPER_JOINTS) <= joints
    assert {"home", "ready"} <= set(cfg.srdf.group_states[C.ARM_GROUP])
    assert {"open", "closed"} <= set(cfg.srdf.group_states[C.GRIPPER_GROUP])


def test_every_adjacent_link_pair_is_disabled(urdf, cfg):
    geometric = {link.get("name") for link in urdf.findall("link")
                 if link.find("collision") is not None}
    adjacent = set()
    for joint in urdf.findall("joint"):
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
        if parent in geometric and child in geometric:
            adjacent.add(frozenset((parent, child)))
    # gripper_hand hangs off arm_link_7 through a fixed joint: still adjacent.
    assert adjacent <= cfg.srdf.disabled_collisions
    reasons = set(cfg.srdf.disabled_reasons.values())
    assert reasons <= {"Adjacent", "Never", "Default"}
    assert "Never" in reasons


def test_named_states_and_limits_agree_with_urdf(urdf, cfg):
    limits = {j.get("name"): j.find("limit") for j in urdf.findall("joint")
              if j.find("limit") is not None}
    for group in (C.ARM_GROUP, C.GRIPPER_GROUP):
        for name in cfg.srdf.group_states[group]:
            for joint, value in zip(cfg.group_joints(group), cfg.named_state(group, name),
                                    strict=True):
                lim = limits[joint]
                assert float(lim.get("lower")) <= value <= float(lim.get("upper")), (name, joint)
    for joint in (*C.ARM_JOINTS, *C.GRIPPER_JOINTS):
        entry = cfg.joint_limits[joint]
        assert entry.max_velocity <= float(limits[joint].get("velocity")) + 1e-9
        assert entry.max_acceleration > 0


def test_planner_configs_exist_in_ompl_and_resolve_by_name(cfg):
    from ompl import geometric as og

    for pc in cfg.planner_configs.values():
        assert hasattr(og, pc.short_type), pc.type
    assert cfg.resolve_planner(C.ARM_GROUP).short_type == "RRTConnect"
    assert cfg.resolve_planner(C.ARM_GROUP, "RRTstar").name == "RRTstarkConfigDefault"
    assert cfg.resolve_planner(C.ARM_GROUP, "PRMkConfigDefault").short_type == "PRM"
    with pytest.raises(ConfigError, match="planner_id"):
        cfg.resolve_planner(C.ARM_GROUP, "NoSuchPlanner")


def test_controllers_cover_the_groups(cfg):
    doc = load_yaml(DEFAULT_MOVEIT_DIR / "moveit_controllers.yaml")
    ctrl = doc["moveit_simple_controller_manager"]
    assert tuple(ctrl["arm_controller"]["joints"]) == C.ARM_JOINTS
    assert tuple(ctrl["gripper_controller"]["joints"]) == C.GRIPPER_JOINTS
    kin = load_yaml(DEFAULT_MOVEIT_DIR / "kinematics.yaml")
    assert C.ARM_GROUP in kin


def test_srdf_file_matches_a_fresh_generation_of_its_pairs(cfg):
    """The committed pairs equal a smaller re-sampling's pairs except rare 'Never' ones."""
    from clawgym_ros.planning.srdf import robot_model, sample_disabled_pairs

    fresh = sample_disabled_pairs(robot_model(), samples=2000, seed=1)
    fresh_pairs = {frozenset(p) for p in fresh}
    committed = cfg.srdf.disabled_collisions
    # Fewer samples can only find fewer collisions: every committed pair is found again.
    assert committed <= fresh_pairs
    for pair, reason in fresh.items():
        if reason != "Never":
            assert frozenset(pair) in committed
