"""Gazebo path: bridge config == the sim topic table; gz request builders; worlds and the
spawned robot through the real SDFormat parser (libsdformat, when its development files are
installed); the backend's gz-transport requests against a stand-in; gz-only parts skip."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.sim import scene_mjcf as MJ
from clawgym_ros.sim import scene_sdf as SDF
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.backend import LightingSettings, backend_class
from clawgym_ros.sim.topics import (
    PUBLISH,
    SIM_TOPICS,
    SUBSCRIBE,
    WORLD_PLACEHOLDER,
    bridge_config_for_world,
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
        robot = ET.fromstring(MJ.expand_xacro(S.ROOT / f"urdf/{xacro}.urdf.xacro",
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


def test_bridge_config_names_the_scene_world():
    """The dynamic-pose topic was hard-coded to world "tabletop": outdoor bridged nothing."""
    entries = yaml.safe_load(BRIDGE.read_text())
    for scene in S.SCENE_NAMES:
        rendered = bridge_config_for_world(entries, scene)
        gz_topics = {e["ros_topic_name"]: e["gz_topic_name"] for e in rendered}
        assert gz_topics[C.TOPIC_OBJECT_POSES_RAW] == f"/world/{scene}/dynamic_pose/info"
        assert not any(WORLD_PLACEHOLDER in t for t in gz_topics.values())
        # the generated world carries the same name
        assert f'<world name="{scene}">' in SDF.scene_sdf(scene)
    with pytest.raises(ConfigError, match="world"):
        bridge_config_for_world(entries, "a/b")


# ------------------------------------------------------------------- the real SDFormat parser

SDF_CHECK_SOURCE = Path(__file__).with_name("sdf_check.cc")


@pytest.fixture(scope="module")
def sdf_check(tmp_path_factory):
    """test/sdf_check.cc built against the installed libsdformat (Debian: libsdformat-dev)."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None or shutil.which("pkg-config") is None:
        pytest.skip("no C++ compiler / pkg-config to build the SDFormat checker")
    flags = None
    for version in (15, 14, 13, 12):
        done = subprocess.run(["pkg-config", "--cflags", "--libs", f"sdformat{version}"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            flags = done.stdout.split()
            break
    if flags is None:
        pytest.skip("libsdformat development files are not installed (Debian: "
                    "libsdformat-dev); the real SDFormat parser cannot check the worlds")
    binary = tmp_path_factory.mktemp("sdf_check") / "sdf_check"
    done = subprocess.run([compiler, "-O0", str(SDF_CHECK_SOURCE), *flags, "-o", str(binary)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    def check(path: Path) -> list[str]:
        out = subprocess.run([str(binary), str(path)], capture_output=True, text=True,
                             timeout=60)
        errors = [line for line in out.stdout.splitlines() if line.startswith("error ")]
        assert out.returncode == 0 and not errors, f"{path.name}: {errors or out.stderr}"
        return out.stdout.splitlines()

    return check


@pytest.mark.parametrize("scene", S.SCENE_NAMES)
def test_generated_worlds_load_in_sdformat(sdf_check, scene, tmp_path):
    from clawgym_ros.sim.gazebo_backend import object_sdf

    spec = S.load_scene(scene)
    committed = S.ROOT / "worlds" / f"{scene}.sdf"
    lines = sdf_check(committed)
    assert f"world {scene}" in lines
    models = {line.split()[1] for line in lines if line.startswith("  model ")}
    assert {s.name for s in spec.static_shapes()} <= models
    assert {o.name for o in spec.objects} <= models
    for obj in spec.objects:
        assert f"  model {obj.name} static=0" in lines
        path = tmp_path / f"{obj.name}.sdf"
        path.write_text(object_sdf(obj, mass_scale=1.5, friction_scale=0.5))
        assert f"model {obj.name} static=0" in sdf_check(path)


@pytest.mark.parametrize("xacro", ["claw_arm", "mobile_base"])
def test_spawned_robot_converts_in_sdformat(sdf_check, xacro, tmp_path):
    """gz-sim converts the spawned URDF with SDFormat: the arm must come out with a fixed
    joint to the world (it was a free body), the mobile base without one."""
    mappings = (("use_gazebo", "true"),)
    if xacro == "claw_arm":  # as gazebo_launch does: the base pose on the world joint
        mappings += (("world_xyz", "0.1 -0.2 0.4"), ("world_rpy", "0 0 0.5"))
    path = tmp_path / f"{xacro}.urdf"
    path.write_text(MJ.expand_xacro(S.ROOT / f"urdf/{xacro}.urdf.xacro", mappings))
    lines = sdf_check(path)
    to_world = [line for line in lines if line.startswith("joint ")
                and line.split()[3] == "world"]
    if xacro == "claw_arm":
        assert to_world == ["joint world_joint fixed world base_link"], lines
        base = next(line for line in lines if line.startswith(f"link {C.FRAME_BASE} "))
        assert [float(v) for v in base.split()[2:]] == pytest.approx(
            [0.1, -0.2, 0.4, 0.0, 0.0, 0.5], abs=1e-9)
    else:
        assert to_world == [], lines


# ------------------------------------------------------------ gz-transport requests (stand-in)


class _Repeated(list):
    def __init__(self, cls):
        super().__init__()
        self._cls = cls

    def add(self):
        self.append(self._cls())
        return self[-1]


def _fake_gz_msgs(monkeypatch) -> str:
    """Minimal gz.msgs classes (the fields the backend sets) under a private package name."""
    ns = types.SimpleNamespace
    package = "fake_gz_msgs"

    class WorldControl:
        def __init__(self):
            self.pause = False
            self.step = False
            self.multi_step = 0
            self.reset = ns(all=False, time_only=False, model_only=False)

    class Pose:
        def __init__(self):
            self.name = ""
            self.position = ns(x=0.0, y=0.0, z=0.0)
            self.orientation = ns(w=1.0, x=0.0, y=0.0, z=0.0)

    class PoseV:
        def __init__(self):
            self.pose = _Repeated(Pose)

    classes = {"world_control_pb2": {"WorldControl": WorldControl},
               "pose_v_pb2": {"Pose_V": PoseV},
               "boolean_pb2": {"Boolean": type("Boolean", (), {})},
               "clock_pb2": {"Clock": type("Clock", (), {})}}
    monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
    for name, attrs in classes.items():
        module = types.ModuleType(f"{package}.{name}")
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, f"{package}.{name}", module)
    return package


class _FakeGzNode:
    """gz.transport Node: records service requests, answers like gz-sim (True)."""

    def __init__(self):
        self.requests: list[tuple[str, object]] = []

    def subscribe(self, msg_type, topic, callback):
        return True

    def request(self, service, request, request_type, response_type, timeout_ms):
        self.requests.append((service, request))
        return True, response_type()


def test_gazebo_reset_keeps_the_world_paused(monkeypatch):
    """gz-sim's control service sets pause from every WorldControl request (gz-sim
    SimulationRunner::OnWorldControlState); a reset without pause = true started the world
    running between lockstep steps."""
    from clawgym_ros.sim.gazebo_backend import GazeboBackend

    package = _fake_gz_msgs(monkeypatch)
    node = _FakeGzNode()
    transport = types.SimpleNamespace(Node=lambda: node)
    monkeypatch.setattr(GazeboBackend, "_import_gz", staticmethod(lambda: (transport, package)))
    backend = GazeboBackend("tabletop")
    backend.reset(seed=3)
    backend.step(10)
    controls = [req for service, req in node.requests if service == "/world/tabletop/control"]
    assert len(controls) == 2
    reset, step = controls
    assert reset.reset.all and reset.pause
    assert step.pause and step.multi_step == 10
    poses = [req for service, req in node.requests
             if service == "/world/tabletop/set_pose_vector"]
    assert len(poses) == 1
    assert {p.name for p in poses[0].pose} == {o.name for o in backend.scene.objects}
