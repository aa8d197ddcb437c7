"""Gazebo path: bridge config == the sim topic table; gz request builders; gz-only parts skip."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET

import pytest
import yaml

from clawgym_ros import constants as C
from clawgym_ros.sim import scene as S
from clawgym_ros.sim.backend import LightingSettings, backend_class
from clawgym_ros.sim.topics import (
    PUBLISH,
    SIM_TOPICS,
    SUBSCRIBE,
    bridged_topics,
    raw_to_clean_remaps,
)

BRIDGE = S.ROOT / "config" / "ros_gz_bridge.yaml"


def test_bridge_config_matches_sim_topics_exactly():
    entries = yaml.safe_load(BRIDGE.read_text())
    by_ros = {e["ros_topic_name"]: e for e in entries}
    assert len(by_ros) == len(entries), "duplicate ROS topic in the bridge"
    expected = {t.name: t for t in bridged_topics()}
    assert set(by_ros) == set(expected)
    for name, topic in expected.items():
        entry = by_ros[name]
        assert entry["ros_type_name"] == topic.msg_type, name
        assert entry["gz_topic_name"] == topic.gz_topic, name
        assert entry["gz_type_name"] == topic.gz_type, name
        want = "GZ_TO_ROS" if topic.direction == PUBLISH else "ROS_TO_GZ"
        assert entry["direction"] == want, name


def test_sim_topic_table_uses_the_constants_and_raw_names():
    for name in (C.TOPIC_JOINT_STATES_RAW, C.TOPIC_IMAGE_RAW, C.TOPIC_CAMERA_INFO,
                 C.TOPIC_IMU_RAW, C.TOPIC_GPS_RAW, C.TOPIC_ODOM, C.TOPIC_CLOCK):
        assert SIM_TOPICS[name].direction == PUBLISH
    for name in (C.TOPIC_JOINT_TRAJECTORY, C.TOPIC_CMD_VEL, C.TOPIC_GRIPPER_COMMAND):
        assert SIM_TOPICS[name].direction == SUBSCRIBE
    remaps = dict(raw_to_clean_remaps())
    assert remaps[C.TOPIC_JOINT_STATES_RAW] == C.TOPIC_JOINT_STATES
    assert remaps[C.TOPIC_IMU_RAW] == C.TOPIC_IMU
    assert remaps[C.TOPIC_GPS_RAW] == C.TOPIC_GPS
    assert remaps[C.TOPIC_IMAGE_RAW] == C.TOPIC_IMAGE
    for topic in SIM_TOPICS.values():
        assert topic.gz_topic is not None or topic.note, topic.name


def test_urdf_gazebo_sensors_publish_the_bridged_gz_topics():
    gz_topics = {t.gz_topic for t in bridged_topics()}
    for xacro in ("claw_arm", "mobile_base"):
        robot = ET.fromstring(S.expand_xacro(S.ROOT / f"urdf/{xacro}.urdf.xacro",
                                             (("use_gazebo", "true"),)))
        for topic in robot.iter("topic"):
            assert topic.text in gz_topics, (xacro, topic.text)
        for topic in robot.iter("camera_info_topic"):
            assert topic.text in gz_topics


def test_light_request_is_relative_to_the_spec():
    from clawgym_ros.sim.gazebo_backend import light_request, object_sdf

    light = S.load_scene("tabletop").lights[0]
    req = light_request(light, LightingSettings(diffuse_scale=0.5, direction=(0, 0, -2)))
    assert req["name"] == light.name
    assert req["diffuse"] == pytest.approx([*(v * 0.5 for v in light.diffuse), 1.0])
    assert req["specular"] == pytest.approx([*light.specular, 1.0])
    assert req["direction"] == pytest.approx([0, 0, -1])
    obj = S.load_scene("tabletop").objects[0]
    sdf = ET.fromstring(object_sdf(obj, mass_scale=2.0, friction_scale=0.5))
    assert float(sdf.find("model/link/inertial/mass").text) == pytest.approx(2 * obj.mass)
    assert float(sdf.find(".//friction/ode/mu").text) == pytest.approx(0.5 * obj.friction)


def test_gazebo_backend_needs_gz_transport():
    cls = backend_class("gazebo")
    if importlib.util.find_spec("gz") is not None:
        pytest.skip("gz bindings present: exercised on the workstation with a running world")
    from clawgym_ros.sim.gazebo_backend import UnsupportedOnGazeboError

    with pytest.raises(UnsupportedOnGazeboError, match="gz-transport"):
        cls("tabletop")


@pytest.mark.skipif(importlib.util.find_spec("launch_ros") is None,
                    reason="launch / launch_ros are not available as wheels; ROS workstation only")
def test_gazebo_launch_description_builds():
    spec = importlib.util.spec_from_file_location("gazebo_launch",
                                                  S.ROOT / "launch" / "gazebo_launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.generate_launch_description().entities
