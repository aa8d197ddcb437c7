"""Perturbation nodes in their own processes: same values as the cores, 8 s GPS gap, service."""

from __future__ import annotations

import time

import numpy as np
import pytest

from clawgym_ros import constants as C
from test.conftest import read_logs, spin_until

pytestmark = pytest.mark.ros



def _params(values: dict) -> list[str]:
    args = ["--ros-args"]
    for name, value in values.items():
        args += ["-p", f"{name}:={value}"]
    return args


class _Harness:
    """A test node with an executor, plus the latched perturbation states it received."""

    def __init__(self, context, name: str):
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile

        from clawgym_interfaces.msg import PerturbationState
        from clawgym_ros.ros_io.qos import LATCHED_QOS

        self.node = Node(name, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.states: list = []
        # Several nodes publish latched states on one topic: keep more than one sample, or
        # the reader's depth-1 history keeps only whichever arrived last.
        qos = QoSProfile(depth=10, history=LATCHED_QOS.history,
                         reliability=LATCHED_QOS.reliability, durability=LATCHED_QOS.durability)
        self.node.create_subscription(PerturbationState, C.TOPIC_PERTURBATION_STATE,
                                      self.states.append, qos)

    def spin_until(self, predicate, timeout: float) -> bool:
        return spin_until(self.executor, predicate, timeout, period=0.02)

    def wait_connected(self, pub, out_topic: str, tmp_path) -> None:
        ok = self.spin_until(lambda: self.states and pub.get_subscription_count() > 0
                             and self.node.count_publishers(out_topic) > 0, 40.0)
        assert ok, read_logs(tmp_path)
        # Discovery of the reverse direction (node -> our subscription) settles shortly after
        # (a best-effort writer sends nothing to a reader it has not matched yet).
        self.spin_until(lambda: False, 1.5)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.mark.parametrize("reliable", [False, True], ids=["best_effort", "reliable"])
def test_sensor_noise_node_matches_the_core(procs, rclpy_context, tmp_path, reliable):
    """Every sample that arrives equals the core's output for it. Best effort (the default
    QoS) may lose samples under load, so only what arrived is compared; with ``reliable`` (the
    lockstep evaluation's setting) every sample from the first received on must arrive, a
    dropped one carrying the last delivered values (what the wrapper holds)."""
    from sensor_msgs.msg import Imu, JointState

    from clawgym_ros.perturbations import SensorNoise, SensorNoiseConfig
    from clawgym_ros.ros_io import sensors
    from clawgym_ros.ros_io.convert import time_seconds
    from clawgym_ros.ros_io.qos import interposer_qos

    seed = 0  # drops the first joint sample: the node passes it unperturbed, as the wrapper
    procs.start_module("noise", "clawgym_ros.nodes.sensor_noise_node",
                       _params({"intensity": 1.0, "seed": seed, "image_in": "''",
                                "reliable": str(reliable).lower()}))
    qos = interposer_qos(reliable)
    h = _Harness(rclpy_context, "noise_probe")
    try:
        joints_in = h.node.create_publisher(JointState, C.TOPIC_JOINT_STATES_RAW, qos)
        imu_in = h.node.create_publisher(Imu, C.TOPIC_IMU_RAW, qos)
        got_joints, got_imu = {}, {}
        h.node.create_subscription(
            JointState, C.TOPIC_JOINT_STATES,
            lambda m: got_joints.setdefault(m.header.stamp.nanosec, m), qos)
        h.node.create_subscription(
            Imu, C.TOPIC_IMU, lambda m: got_imu.setdefault(m.header.stamp.nanosec, m), qos)
        h.wait_connected(joints_in, C.TOPIC_JOINT_STATES, tmp_path)
        assert h.spin_until(lambda: imu_in.get_subscription_count() > 0
                            and h.node.count_publishers(C.TOPIC_IMU) > 0, 20.0)
        assert h.states[-1].family == C.FAMILY_SENSOR_NOISE and h.states[-1].seed == seed

        core = SensorNoise(SensorNoiseConfig(intensity=1.0, seed=seed))
        rng = np.random.default_rng(0)
        expected_joints, expected_imu = {}, {}
        held_joints = held_imu = None
        n = 120
        for k in range(n):
            stamp = k * 0.005  # nanosec keys stay unique below 1 s
            q = rng.uniform(-1, 1, 7)
            msg = sensors.joint_state_msg(C.ARM_JOINTS, q, q * 0.1, stamp=stamp)
            imu = sensors.ImuValues(np.array([1.0, 0, 0, 0]), rng.normal(size=3),
                                    rng.normal(size=3))
            imu_msg = sensors.imu_msg(imu, stamp=stamp, orientation_std=0.01)
            # The core sees exactly what the node will read from the messages.
            t = time_seconds(msg.header.stamp)
            out = core.joint_state(np.asarray(msg.position), np.asarray(msg.velocity), t)
            if out is None and k == 0:
                out = {"position": np.asarray(msg.position), "velocity": np.asarray(msg.velocity)}
            if reliable:
                # Lockstep: a dropped sample is republished with the held values.
                out = held_joints = out if out is not None else held_joints
            expected_joints[msg.header.stamp.nanosec] = out
            vals = sensors.imu_values(imu_msg)
            out_imu = core.imu(vals.orientation_wxyz, vals.angular_velocity,
                               vals.linear_acceleration, t)
            if reliable:
                out_imu = held_imu = out_imu if out_imu is not None else held_imu
            expected_imu[msg.header.stamp.nanosec] = out_imu
            joints_in.publish(msg)
            imu_in.publish(imu_msg)
            h.spin_until(lambda: False, 0.02)
        delivered = {k for k, v in expected_joints.items() if v is not None}
        last = max(delivered)
        h.spin_until(lambda: last in got_joints, 10.0 if reliable else 3.0)
        assert 0 < core.counts("joint_states")["dropped"] < n  # the defaults drop some
        assert got_joints, read_logs(tmp_path)
        assert set(got_joints) <= delivered
        if reliable:
            # The node's writer may match our reader a little after the settle time on a
            # loaded machine; from the first sample received on, every one arrives.
            first = min(got_joints)
            assert first <= sorted(delivered)[n // 4], read_logs(tmp_path)
            assert set(got_joints) == {k for k in delivered if k >= first}, read_logs(tmp_path)
        for key, msg in got_joints.items():
            assert list(msg.position) == expected_joints[key]["position"].tolist()
            assert list(msg.velocity) == expected_joints[key]["velocity"].tolist()
            assert list(msg.name) == list(C.ARM_JOINTS)
        assert got_imu and set(got_imu) <= {k for k, v in expected_imu.items() if v is not None}
        for key, msg in got_imu.items():
            exp = expected_imu[key]
            o = msg.orientation
            assert [o.w, o.x, o.y, o.z] == exp["orientation"].tolist()
            g = msg.angular_velocity
            assert [g.x, g.y, g.z] == exp["angular_velocity"].tolist()
        # The values really are perturbed.
        some = next(iter(got_joints))
        assert list(got_joints[some].position) != list(
            np.round(np.asarray(got_joints[some].position), 2))
    finally:
        h.close()


def _gps_node(procs, params: dict) -> None:
    procs.start_module("gps", "clawgym_ros.nodes.gps_dropout_node", _params(params))


def test_gps_node_leaves_one_8_s_gap_at_10_hz(procs, rclpy_context, tmp_path):
    from sensor_msgs.msg import NavSatFix

    from clawgym_ros.ros_io import sensors
    from clawgym_ros.ros_io.convert import time_seconds
    from clawgym_ros.ros_io.qos import interposer_qos

    # Reliable in and out: the check is the outage's length, which a best-effort sample lost
    # under suite load would blur (the best-effort path is covered by the sensor-noise test).
    _gps_node(procs, {"intensity": 1.0, "start_probability": 1.0, "min_duration_s": 8.0,
                      "max_duration_s": 8.0, "max_outages": 1, "warmup_s": 2.0,
                      "reliable": "true"})
    qos = interposer_qos(True)
    h = _Harness(rclpy_context, "gps_probe")
    try:
        pub = h.node.create_publisher(NavSatFix, C.TOPIC_GPS_RAW, qos)
        stamps: list[float] = []
        h.node.create_subscription(NavSatFix, C.TOPIC_GPS,
                                   lambda m: stamps.append(time_seconds(m.header.stamp)), qos)
        h.wait_connected(pub, C.TOPIC_GPS, tmp_path)
        t0 = 1000.0
        sent = 0
        start = time.monotonic()
        while sent < 130:  # 13 s at 10 Hz, stamps driven by this publisher
            due = start + sent * 0.1
            h.spin_until(lambda due=due: time.monotonic() >= due, 1.0)
            fix = sensors.GpsFix(48.1, 11.5, 520.0, horizontal_std=1.0, vertical_std=2.0)
            pub.publish(sensors.navsat_fix_msg(fix, stamp=t0 + sent * 0.1))
            sent += 1
        h.spin_until(lambda: stamps and stamps[-1] >= t0 + 12.85, 3.0)
        gaps = np.diff(stamps)
        big = gaps[gaps > 0.5]
        assert len(big) == 1, (gaps.round(2).tolist(), read_logs(tmp_path))
        assert abs(big[0] - 8.0) <= 0.2, big
        assert np.sort(gaps)[-2] < 0.15  # a fix every 0.1 s otherwise
        assert stamps[0] <= t0 + 0.3 and stamps[-1] >= t0 + 12.8
        active = [s.active for s in h.states]
        assert True in active and not active[-1]  # the outage was reported, then its end
    finally:
        h.close()


def test_gps_node_matches_the_core_and_serves_set_perturbation(procs, rclpy_context, tmp_path):
    from sensor_msgs.msg import NavSatFix, NavSatStatus

    from clawgym_interfaces.msg import PerturbationParameter
    from clawgym_interfaces.srv import SetPerturbation
    from clawgym_ros.perturbations import GpsDropout, GpsDropoutConfig
    from clawgym_ros.perturbations.gps import GpsFix
    from clawgym_ros.ros_io import sensors
    from clawgym_ros.ros_io.convert import time_seconds
    from clawgym_ros.ros_io.qos import interposer_qos

    params = {"intensity": 0.8, "seed": 21, "start_probability": 0.5, "min_duration_s": 1.0,
              "max_duration_s": 2.0, "mode": "degraded"}
    # Reliable: one input lost under load shifts the node's random stream and every later fix.
    _gps_node(procs, {**params, "reliable": "true"})
    qos = interposer_qos(True)
    h = _Harness(rclpy_context, "gps_probe2")
    try:
        pub = h.node.create_publisher(NavSatFix, C.TOPIC_GPS_RAW, qos)
        got: dict[float, NavSatFix] = {}
        h.node.create_subscription(
            NavSatFix, C.TOPIC_GPS,
            lambda m: got.setdefault(round(time_seconds(m.header.stamp), 3), m), qos)
        h.wait_connected(pub, C.TOPIC_GPS, tmp_path)
        core = GpsDropout(GpsDropoutConfig(**params))
        expected = {}
        for k in range(100):
            stamp = 50.0 + k * 0.1
            msg = sensors.navsat_fix_msg(sensors.GpsFix(48.1 + k * 1e-5, 11.5, 520.0),
                                         stamp=stamp)
            t = time_seconds(msg.header.stamp)
            expected[round(t, 3)] = core.apply(
                GpsFix(msg.latitude, msg.longitude, msg.altitude, t, msg.status.status))
            pub.publish(msg)
            h.spin_until(lambda: False, 0.01)
        last = max(expected)
        h.spin_until(lambda: last in got, 10.0)
        # From the first fix received on (the node's writer may match our reader a little
        # after the settle time on a loaded machine), every one arrives.
        first = min(got)
        assert first <= 52.5, read_logs(tmp_path)
        assert set(got) == {k for k in expected if k >= first}, read_logs(tmp_path)
        assert core.outages  # the stream contains outages and degraded fixes
        no_fix = 0
        for key, msg in got.items():
            exp = expected[key]
            assert (msg.latitude, msg.longitude, msg.altitude) == (
                exp.latitude, exp.longitude, exp.altitude)
            assert msg.status.status == exp.status
            no_fix += msg.status.status == NavSatStatus.STATUS_NO_FIX
        assert no_fix > 0

        client = h.node.create_client(
            SetPerturbation, f"/{C.NODE_GPS_DROPOUT}/{C.SRV_SET_PERTURBATION}")
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(SetPerturbation.Request(
            family=C.FAMILY_GPS_DROPOUT, intensity=0.5, schedule="constant", seed=3,
            parameters=[PerturbationParameter(name="min_duration_s", value=9.0),
                        PerturbationParameter(name="max_duration_s", value=12.0)]))
        assert h.spin_until(future.done, 10.0)
        response = future.result()
        assert response.success, response.message
        values = {p.name: p.value for p in response.state.parameters}
        assert values["min_duration_s"] == 9.0 and values["start_probability"] == 0.25
        assert h.spin_until(lambda: h.states[-1].seed == 3 and h.states[-1].intensity == 0.5,
                            5.0)
        bad = client.call_async(SetPerturbation.Request(family=C.FAMILY_LIGHTING,
                                                        intensity=0.5))
        assert h.spin_until(bad.done, 10.0)
        assert not bad.result().success and "family" in bad.result().message
    finally:
        h.close()


@pytest.mark.parametrize("hold", [False, True], ids=["drop", "hold"])
def test_gps_node_and_gymnasium_wrapper_give_identical_fixes(procs, rclpy_context, tmp_path,
                                                             hold):
    """The same seed and raw stream through the wrapper (in-process) and the node (child).
    With ``hold`` (lockstep evaluation) the node answers every fix with what the wrapper
    shows the policy, outages included (the last delivered fix, status NO_FIX)."""
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    from sensor_msgs.msg import NavSatFix

    import clawgym_ros.sim  # noqa: F401  (registers the envs)
    from clawgym_interfaces.srv import SetPerturbation
    from clawgym_ros.perturbations import GpsDropout, GpsDropoutConfig
    from clawgym_ros.perturbations.wrappers import GpsDropoutWrapper
    from clawgym_ros.ros_io import sensors
    from clawgym_ros.ros_io.convert import time_msg, time_seconds
    from clawgym_ros.ros_io.qos import LOCKSTEP_SENSOR_QOS

    params = {"intensity": 1.0, "seed": 9, "start_probability": 0.6, "min_duration_s": 0.5,
              "max_duration_s": 1.5}
    # Reliable in and out, as behind a lockstep sim_node: a lost input would shift the node's
    # random stream (CI once lost one under load and every later fix differed).
    _gps_node(procs, {**params, "reliable": "true", "hold": str(hold).lower()})
    # Raw stream from a bare env; perturbed stream from a wrapped env with the same actions.
    bare = gym.make("clawgym/MobileBase-v0", control_mode=C.CONTROL_DICT)
    wrapped = GpsDropoutWrapper(gym.make("clawgym/MobileBase-v0", control_mode=C.CONTROL_DICT),
                                GpsDropout(GpsDropoutConfig(**params)))
    raw = [(bare.unwrapped.backend.time, bare.reset(seed=1)[0][C.OBS_GPS])]
    obs, info = wrapped.reset(seed=1)
    perturbed = [(obs[C.OBS_GPS], info[C.INFO_GPS_STATUS])]
    action = {C.ACT_BASE_TWIST: np.array([0.5, 0.3])}
    for _ in range(150):
        raw.append((None, bare.step(action)[0][C.OBS_GPS]))
        raw[-1] = (bare.unwrapped.backend.time, raw[-1][1])
        obs, _, _, _, info = wrapped.step(action)
        perturbed.append((obs[C.OBS_GPS], info[C.INFO_GPS_STATUS]))
    bare.close()
    wrapped.close()
    assert any(status == -1 for _, status in perturbed)

    h = _Harness(rclpy_context, "gps_probe3")
    try:
        pub = h.node.create_publisher(NavSatFix, C.TOPIC_GPS_RAW, LOCKSTEP_SENSOR_QOS)
        got: dict[int, NavSatFix] = {}
        h.node.create_subscription(
            NavSatFix, C.TOPIC_GPS,
            lambda m: got.setdefault(round(time_seconds(m.header.stamp) * 1000), m),
            LOCKSTEP_SENSOR_QOS)
        h.wait_connected(pub, C.TOPIC_GPS, tmp_path)
        # The ROS counterpart of env.reset(seed=1): begin an episode with episode seed 1.
        client = h.node.create_client(
            SetPerturbation, f"/{C.NODE_GPS_DROPOUT}/{C.SRV_SET_PERTURBATION}")
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(SetPerturbation.Request(family="", seed=1))
        assert h.spin_until(future.done, 10.0) and future.result().success
        for t, gps in raw:
            # The node reads t back only to the nanosecond; the cores canonicalise stamps.
            assert abs(time_seconds(time_msg(t)) - t) < 1e-9
            pub.publish(sensors.navsat_fix_msg(sensors.GpsFix(*gps.tolist()), stamp=t))
            h.spin_until(lambda: False, 0.01)
        delivered = len(raw) if hold else sum(status == 0 for _, status in perturbed)
        h.spin_until(lambda: len(got) >= delivered, 5.0)
        assert len(got) == delivered, read_logs(tmp_path)
        for (t, _), (value, status) in zip(raw, perturbed, strict=True):
            msg = got.get(round(t * 1000))
            if status != 0 and not hold:
                assert msg is None  # in an outage: nothing delivered by the node
            elif msg is not None:
                assert [msg.latitude, msg.longitude, msg.altitude] == value.tolist()
                if hold:
                    assert (msg.status.status < 0) == (status != 0)
    finally:
        h.close()


def test_lighting_and_dynamics_nodes_call_the_simulator_services(procs, rclpy_context,
                                                                  tmp_path):
    """A stand-in simulator records the SetLighting / SetDynamics requests the nodes send."""
    from clawgym_interfaces.srv import SetDynamics, SetLighting, SetPerturbation
    from clawgym_ros.perturbations import Dynamics, DynamicsConfig, Lighting, LightingConfig
    from clawgym_ros.ros_io.sim_services import dynamics_settings, lighting_settings

    procs.start_module("lighting", "clawgym_ros.nodes.lighting_node",
                       _params({"intensity": 1.0, "seed": 4, "change_rate_hz": 0.0}))
    procs.start_module("dynamics", "clawgym_ros.nodes.dynamics_node",
                       _params({"intensity": 1.0, "seed": 4, "refresh_s": 0.0}))
    h = _Harness(rclpy_context, "fake_sim")
    lighting_calls, dynamics_calls = [], []

    def on_lighting(request, response):
        lighting_calls.append(request)
        response.success = True
        return response

    def on_dynamics(request, response):
        dynamics_calls.append(request)
        response.success = True
        return response

    h.node.create_service(SetLighting, C.SRV_SET_LIGHTING, on_lighting)
    h.node.create_service(SetDynamics, C.SRV_SET_DYNAMICS, on_dynamics)
    try:
        assert h.spin_until(lambda: lighting_calls and dynamics_calls, 40.0), read_logs(tmp_path)
        light = Lighting(LightingConfig(intensity=1.0, seed=4, change_rate_hz=0.0))
        light.reset()
        assert lighting_settings(lighting_calls[0]) == light.settings_at(0.0)
        dyn = Dynamics(DynamicsConfig(intensity=1.0, seed=4))
        dyn.reset()
        assert dynamics_settings(dynamics_calls[0]) == dyn.settings()
        assert dynamics_calls[0].mass_scale != 1.0

        client = h.node.create_client(SetPerturbation,
                                      f"/{C.NODE_DYNAMICS}/{C.SRV_SET_PERTURBATION}")
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(SetPerturbation.Request(family=C.FAMILY_NONE))
        assert h.spin_until(lambda: future.done() and len(dynamics_calls) >= 2, 10.0)
        assert future.result().success and dynamics_calls[-1].restore_defaults
        assert dynamics_settings(dynamics_calls[-1]) is None
        # Each publisher-subscriber pair is discovered on its own: the lighting node's latched
        # state can reach this reader after the dynamics node's replies did.
        wanted = {C.FAMILY_LIGHTING, C.FAMILY_NONE}
        assert h.spin_until(lambda: wanted <= {s.family for s in h.states}, 10.0), \
            [s.family for s in h.states]
    finally:
        h.close()
