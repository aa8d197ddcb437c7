"""Perturbation cores: statistics, reset, determinism, schedules, validation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations import (
    Dynamics,
    DynamicsConfig,
    GpsDropout,
    GpsDropoutConfig,
    Lighting,
    LightingConfig,
    SensorNoise,
    SensorNoiseConfig,
    make,
)
from clawgym_ros.perturbations.gps import EARTH_RADIUS_M, STATUS_FIX, STATUS_NO_FIX, GpsFix
from clawgym_ros.perturbations.sensor_noise import STREAM_IMU, STREAM_JOINTS
from clawgym_ros.sim.backend import DynamicsSettings, LightingSettings

QUIET = dict(joint_drop_prob=0.0, joint_stale_prob=0.0, joint_pos_bias_walk=0.0,
             joint_pos_quantization=0.0, imu_drop_prob=0.0, imu_stale_prob=0.0,
             imu_accel_bias_walk=0.0, imu_gyro_bias_walk=0.0)


# --- sensor noise ----------------------------------------------------------------------------

def test_gaussian_noise_mean_and_std_match_the_configuration():
    cfg = SensorNoiseConfig(intensity=0.5, seed=1, joint_pos_std=0.04, joint_pos_bias=0.02,
                            joint_vel_std=0.2, imu_gyro_std=0.06, imu_gyro_bias=-0.01, **QUIET)
    noise = SensorNoise(cfg)
    n = 4000
    pos_err, vel_err, gyro_err = [], [], []
    truth = np.linspace(-1, 1, 7)
    for k in range(n):
        out = noise.joint_state(truth, truth * 0.5, k * 0.01)
        pos_err.append(out["position"] - truth)
        vel_err.append(out["velocity"] - truth * 0.5)
        imu = noise.imu(None, np.zeros(3), np.zeros(3), k * 0.01)
        gyro_err.append(imu["angular_velocity"])
    pos_err, vel_err, gyro_err = map(np.asarray, (pos_err, vel_err, gyro_err))
    m = pos_err.size
    # Configured at intensity 1; halved by intensity 0.5.
    for err, mean, std in ((pos_err, 0.01, 0.02), (vel_err, 0.0, 0.1), (gyro_err, -0.005, 0.03)):
        assert abs(err.mean() - mean) < 4 * std / math.sqrt(err.size), (err.mean(), mean)
        assert abs(err.std() / std - 1.0) < 0.03, (err.std(), std)
    assert m == n * 7


def test_drop_and_stale_rates_match_and_stale_repeats_the_last_values():
    cfg = SensorNoiseConfig(intensity=1.0, seed=5, joint_drop_prob=0.2, joint_stale_prob=0.1)
    noise = SensorNoise(cfg)
    n = 20000
    outs = [noise.joint_state(np.full(3, float(k)), None, k * 0.01) for k in range(n)]
    counts = noise.counts(STREAM_JOINTS)
    assert counts["samples"] == n
    assert abs(counts["dropped"] / n - 0.2) < 0.015
    # Stale is decided among the samples that were not dropped.
    assert abs(counts["stale"] / (n - counts["dropped"]) - 0.1) < 0.015
    assert sum(o is None for o in outs) == counts["dropped"]
    delivered = [o["position"] for o in outs if o is not None]
    repeats = sum(np.array_equal(a, b) for a, b in zip(delivered, delivered[1:], strict=False))
    assert repeats == counts["stale"]


def test_bias_random_walk_grows_with_sqrt_time_and_reset_restores_it():
    cfg = SensorNoiseConfig(intensity=1.0, seed=9, joint_pos_std=0.0, joint_pos_bias_walk=0.01,
                            joint_pos_quantization=0.0, joint_drop_prob=0.0,
                            joint_stale_prob=0.0)
    noise = SensorNoise(cfg)
    finals = []
    for _ in range(1500):
        noise.reset()
        first = noise.joint_state(np.zeros(2), None, 0.0)["position"]
        assert np.all(first == 0.0)  # the walk starts at zero in every episode
        finals.append(noise.joint_state(np.zeros(2), None, 4.0)["position"])
    finals = np.asarray(finals)
    assert abs(finals.std() / (0.01 * 2.0) - 1.0) < 0.05
    assert abs(finals.mean()) < 0.002


def test_quantization_and_pixel_noise():
    cfg = SensorNoiseConfig(intensity=1.0, seed=2, joint_pos_std=0.0, joint_pos_bias_walk=0.0,
                            joint_pos_quantization=0.01, joint_drop_prob=0.0,
                            joint_stale_prob=0.0, image_std=8.0, image_drop_prob=0.0,
                            image_stale_prob=0.0)
    noise = SensorNoise(cfg)
    out = noise.joint_state(np.array([0.123456, -0.987]), None, 0.0)["position"]
    np.testing.assert_allclose(out, [0.12, -0.99])
    img = np.full((64, 64, 3), 128, np.uint8)
    noisy = noise.image(img, 0.0)
    assert noisy.dtype == np.uint8 and noisy.shape == img.shape
    diff = noisy.astype(float) - 128.0
    assert abs(diff.std() / 8.0 - 1.0) < 0.05 and abs(diff.mean()) < 0.2
    dark = noise.image(np.zeros((32, 32, 3), np.uint8), 0.1)
    assert dark.min() == 0  # clipped, not wrapped around


def test_quaternion_noise_keeps_unit_norm_with_the_configured_angle():
    cfg = SensorNoiseConfig(intensity=1.0, seed=3, imu_orientation_std=0.05, **QUIET)
    noise = SensorNoise(cfg)
    q0 = np.array([1.0, 0.0, 0.0, 0.0])
    angles = []
    for k in range(3000):
        q = noise.apply(STREAM_IMU, {"orientation": q0}, k * 0.01)["orientation"]
        assert abs(np.linalg.norm(q) - 1.0) < 1e-9
        angles.append(2 * math.acos(min(1.0, abs(q[0]))))
    # The angle of a 3-D gaussian rotation vector is Maxwell distributed: mean 2*sqrt(2/pi)*s.
    assert abs(np.mean(angles) / (0.05 * 2 * math.sqrt(2 / math.pi)) - 1.0) < 0.05
    poses = noise.poses(np.array([[1.0, 2.0, 3.0, 1.0, 0.0, 0.0, 0.0]]), 0.0)
    assert poses.shape == (1, 7)


def test_same_seed_same_sequence_and_episode_seeds_are_reproducible():
    def run(noise: SensorNoise, n: int = 50) -> list:
        out = []
        for k in range(n):
            r = noise.joint_state(np.zeros(4), np.zeros(4), k * 0.02)
            out.append(None if r is None else r["position"].tolist())
        return out

    a = SensorNoise(SensorNoiseConfig(intensity=1.0, seed=42))
    b = SensorNoise(SensorNoiseConfig(intensity=1.0, seed=42))
    c = SensorNoise(SensorNoiseConfig(intensity=1.0, seed=43))
    ra, rb, rc = run(a), run(b), run(c)
    assert ra == rb and ra != rc
    # Episode seeds: the same seed gives the same episode whatever happened before.
    a.reset(seed=7)
    first = run(a)
    for _ in range(3):
        a.reset()
        run(a, 10)
    a.reset(seed=7)
    assert run(a) == first
    # Streams are independent: interleaving IMU samples does not change joint values.
    d = SensorNoise(SensorNoiseConfig(intensity=1.0, seed=42))
    mixed = []
    for k in range(50):
        d.imu(None, np.zeros(3), np.zeros(3), k * 0.02)
        r = d.joint_state(np.zeros(4), np.zeros(4), k * 0.02)
        mixed.append(None if r is None else r["position"].tolist())
    assert mixed == ra


def test_disabled_noise_passes_values_through():
    noise = SensorNoise(SensorNoiseConfig(family=C.FAMILY_NONE, intensity=1.0))
    x = np.array([0.1, 0.2])
    assert np.array_equal(noise.joint_state(x, None, 0.0)["position"], x)
    assert noise.state()["intensity"] == 0.0
    assert noise.state()["joint_states.position.std"] == 0.0


# --- GPS dropout -----------------------------------------------------------------------------

def _stream(gps: GpsDropout, seconds: float, hz: float = 10.0):
    out = []
    for k in range(int(seconds * hz)):
        t = k / hz
        out.append((t, gps.apply(GpsFix(48.1, 11.5, 520.0, t))))
    return out


def test_one_outage_of_8_s_leaves_a_gap_of_8_s():
    gps = GpsDropout(GpsDropoutConfig(intensity=1.0, start_probability=1.0, min_duration_s=8.0,
                                      max_duration_s=8.0, max_outages=1, warmup_s=3.0,
                                      jitter_std_m=0.0, jitter_vertical_std_m=0.0))
    got = [t for t, fix in _stream(gps, 20.0) if fix is not None]
    gaps = np.diff(got)
    assert len(gps.outages) == 1 and gps.outages[0].duration == 8.0
    assert abs(gaps.max() - 8.0) <= 0.2 and np.sort(gaps)[-2] < 0.15
    assert abs(gps.outages[0].start - 3.0) < 0.15


def test_outage_start_rate_and_durations_match_the_configuration():
    cfg = GpsDropoutConfig(intensity=0.5, seed=4, start_probability=0.2, min_duration_s=1.0,
                           max_duration_s=3.0, jitter_std_m=0.0, jitter_vertical_std_m=0.0)
    gps = GpsDropout(cfg)
    hz, seconds = 10.0, 12000.0
    _stream(gps, seconds, hz)
    durations = np.array([o.duration for o in gps.outages])
    outage_time = sum(min(o.end, seconds) - o.start for o in gps.outages)
    rate = len(gps.outages) / (seconds - outage_time)
    expected = -math.log(1.0 - 0.5 * 0.2)  # hazard of p = 0.1 per second
    assert abs(rate / expected - 1.0) < 0.1, (rate, expected, len(gps.outages))
    assert durations.min() >= 1.0 and durations.max() <= 3.0
    assert abs(durations.mean() - 2.0) < 0.1
    assert abs(durations.std() - 2.0 / math.sqrt(12)) < 0.06
    assert gps.state()["start_probability"] == pytest.approx(0.1)


def test_degraded_mode_delivers_no_fix_status_and_jitter_matches():
    cfg = GpsDropoutConfig(intensity=1.0, seed=8, start_probability=0.02, min_duration_s=8.0,
                           max_duration_s=10.0, mode="degraded", jitter_std_m=2.0,
                           jitter_vertical_std_m=4.0)
    gps = GpsDropout(cfg)
    fixes = _stream(gps, 2000.0)
    assert all(fix is not None for _, fix in fixes)
    bad = [(t, f) for t, f in fixes if f.status == STATUS_NO_FIX]
    good = [f for _, f in fixes if f.status == STATUS_FIX]
    assert gps.outages and bad
    for t, _ in bad:
        assert any(o.start <= t < o.end for o in gps.outages)
    north = np.array([math.radians(f.latitude - 48.1) * EARTH_RADIUS_M for f in good])
    east = np.array([math.radians(f.longitude - 11.5) * EARTH_RADIUS_M *
                     math.cos(math.radians(48.1)) for f in good])
    up = np.array([f.altitude - 520.0 for f in good])
    assert abs(north.std() / 2.0 - 1) < 0.05 and abs(east.std() / 2.0 - 1) < 0.05
    assert abs(up.std() / 4.0 - 1) < 0.05


def test_gps_reset_forgets_outages_and_is_deterministic():
    cfg = GpsDropoutConfig(intensity=1.0, seed=3, start_probability=0.3, min_duration_s=8.0,
                           max_duration_s=9.0)
    a, b = GpsDropout(cfg), GpsDropout(cfg)
    sa, sb = _stream(a, 100.0), _stream(b, 100.0)
    assert sa == sb and a.outages
    a.reset()
    assert a.outages == [] and not a.active
    a.configure(dataclasses.replace(cfg, family=C.FAMILY_NONE))
    fix = GpsFix(1.0, 2.0, 3.0, 0.5)
    assert a.apply(fix) == fix and a.state()["start_probability"] == 0.0


def test_local_positions_share_the_outage_model():
    cfg = GpsDropoutConfig(intensity=1.0, start_probability=1.0, min_duration_s=8.0,
                           max_duration_s=8.0, max_outages=1, warmup_s=1.0)
    gps = GpsDropout(cfg)
    got = [t for t in np.arange(0, 15, 0.1) if gps.apply_local(np.zeros(3), t) is not None]
    assert abs(np.diff(got).max() - 8.0) <= 0.2


# --- lighting --------------------------------------------------------------------------------

def test_lighting_intensity_zero_is_the_default_and_one_changes_the_light():
    off = Lighting(LightingConfig(intensity=0.0))
    assert off.settings_at(0.0) == LightingSettings()
    for seed in range(20):
        on = Lighting(LightingConfig(intensity=1.0, seed=seed, change_rate_hz=0.0))
        s = on.settings_at(0.0)
        assert abs(s.diffuse_scale - 1.0) >= 0.4 and abs(s.headlight_scale - 1.0) >= 0.4
        assert s.direction is not None
        tilt = math.acos(-s.direction[2] / np.linalg.norm(s.direction))
        assert 0.25 - 1e-9 <= tilt <= 0.5 + 1e-9
        assert on.state()["diffuse_scale"] == s.diffuse_scale


def test_lighting_sudden_changes_follow_the_rate_and_do_not_depend_on_query_times():
    cfg = LightingConfig(intensity=0.5, seed=11, change_rate_hz=2.0)
    fine, coarse = Lighting(cfg), Lighting(cfg)
    for t in np.arange(0, 600.0, 0.05):
        fine.settings_at(float(t))
    coarse.settings_at(0.0)
    assert coarse.settings_at(599.95) == fine.settings_at(599.95)
    rate = len(fine.changes) / 600.0
    assert abs(rate - 1.0) < 0.15  # 2 Hz at intensity 1, halved
    fine.reset()
    assert fine.changes == []


def test_lighting_flicker_and_update_only_reports_changes():
    lt = Lighting(LightingConfig(intensity=1.0, seed=1, change_rate_hz=0.0, flicker_hz=2.0,
                                 flicker_depth=0.5))
    first = lt.update(0.0)
    assert first is not None and lt.update(0.1) is None
    dark = lt.update(0.3)  # second half of the 0.5 s period
    assert dark.diffuse_scale == pytest.approx(first.diffuse_scale * 0.5) and lt.active
    assert lt.update(0.55).diffuse_scale == first.diffuse_scale


# --- dynamics --------------------------------------------------------------------------------

def test_dynamics_ranges_intensity_and_reset():
    cfg = DynamicsConfig(intensity=1.0, seed=0, mass_factor=2.0, latency_s=0.1)
    dyn = Dynamics(cfg)
    masses, latencies = [], []
    for _ in range(2000):
        dyn.reset()
        s = dyn.settings()
        masses.append(s.mass_scale)
        latencies.append(s.command_latency)
        assert 1 / 1.5 <= s.actuator_gain_scale <= 1.5
    masses = np.log2(masses)
    assert masses.min() >= -1 and masses.max() <= 1 and abs(masses.mean()) < 0.05
    assert abs(np.mean(latencies) - 0.05) < 0.003
    dyn.configure(dataclasses.replace(cfg, intensity=0.0))
    assert dyn.settings() == DynamicsSettings()
    assert set(dyn.state()) >= {"mass_scale", "friction_scale", "damping_scale",
                                "actuator_gain_scale", "command_latency_s"}


# --- schedules, records, validation ----------------------------------------------------------

def test_schedules():
    stepped = Dynamics(DynamicsConfig(intensity=0.8, schedule="stepped", steps=4))
    levels = []
    for _ in range(8):
        stepped.reset()
        levels.append(stepped.intensity)
    assert levels == pytest.approx([0.2, 0.4, 0.6, 0.8] * 2)
    rnd = Dynamics(DynamicsConfig(intensity=0.6, schedule="random", seed=2))
    draws = []
    for _ in range(500):
        rnd.reset()
        draws.append(rnd.intensity)
    assert 0.0 <= min(draws) and max(draws) <= 0.6 and abs(np.mean(draws) - 0.3) < 0.03
    record = rnd.record()
    assert record["family"] == C.FAMILY_DYNAMICS and record["episode"] == 499
    assert record["parameters"]["intensity"] == rnd.intensity


@pytest.mark.parametrize("field,value,allowed", [
    ("intensity", 1.5, "[0, 1]"),
    ("schedule", "weekly", "'constant'"),
    ("family", "lighting", "'gps_dropout'"),
    ("max_duration_s", 1.0, ">= min_duration_s"),
])
def test_config_errors_name_field_value_and_allowed(field, value, allowed):
    with pytest.raises(ConfigError) as err:
        GpsDropoutConfig(**{field: value})
    assert err.value.field == field and err.value.value == value
    assert allowed in err.value.allowed


def test_overrides_by_name():
    cfg = GpsDropoutConfig().with_overrides({"min_duration_s": 8, "max_outages": 1.0})
    assert cfg.min_duration_s == 8.0 and cfg.max_outages == 1
    with pytest.raises(ConfigError, match="parameters.bogus"):
        cfg.with_overrides({"bogus": 1.0})
    assert make(C.FAMILY_SENSOR_NOISE, {"intensity": 0.3}).config.intensity == 0.3
