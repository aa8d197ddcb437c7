"""gps_nav and pill_handover: expert yield, sign-off, injected faults, GPS outages, env checks,
determinism, and the navigation cores (EKF, router, pure pursuit)."""

from __future__ import annotations

import math
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import clawgym_ros.sim  # noqa: E402,F401
from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.synthesis.episode import EpisodeSpec  # noqa: E402
from clawgym_ros.tasks import gps_nav, pill_handover  # noqa: E402
from clawgym_ros.tasks.navigation import (  # noqa: E402
    Obstacle2D,
    PoseEkf,
    PurePursuit,
    Router,
)

OUTAGE = {"gps_dropout": {"start_probability": 1.0, "max_outages": 1, "warmup_s": 5.0,
                          "min_duration_s": 10.0, "max_duration_s": 10.0}}
NAV_SIGNOFF = gps_nav.GpsNav().signoff()
HANDOVER_SIGNOFF = pill_handover.PillHandover().signoff()


def nav_spec(seed: int, template: str = "", family: str = C.FAMILY_NONE,
             intensity: float = 0.0, **options: object) -> EpisodeSpec:
    return EpisodeSpec(index=0, seed=seed, task=C.TASK_GPS_NAV, template=template,
                       family=family, intensity=intensity, options=options)


def handover_spec(seed: int, template: str = "", **options: object) -> EpisodeSpec:
    return EpisodeSpec(index=0, seed=seed, task=C.TASK_PILL_HANDOVER, template=template,
                       options=options)


@pytest.fixture(scope="module")
def outage_record():
    return gps_nav.generate(nav_spec(7, "square_route", C.FAMILY_GPS_DROPOUT, 1.0,
                                     perturbation=OUTAGE))


@pytest.fixture(scope="module")
def handover_record():
    return pill_handover.generate(handover_spec(1))


# --- navigation cores ---------------------------------------------------------------------


def test_ekf_dead_reckons_and_fuses_gps_with_lever_arm():
    ekf = PoseEkf()
    ekf.initialize((0.0, 0.0), 0.0, 0.5)
    for _ in range(500):                      # 10 s at 0.5 m/s, turning at 0.1 rad/s
        ekf.predict(0.5, 0.1, 0.02)
    yaw = 1.0
    expected = np.array([math.sin(yaw), 1 - math.cos(yaw)]) * 5.0
    assert np.linalg.norm(ekf.state[:2] - expected) < 0.01
    assert abs(ekf.state[2] - yaw) < 1e-6
    grown = ekf.position_std
    assert grown > 0.5                       # uncertainty grows without GPS
    truth = np.array([4.0, 2.0])
    antenna = truth + np.array([math.cos(yaw), math.sin(yaw)]) * -0.15
    for _ in range(200):
        ekf.predict(0.0, 0.0, 0.02)
        ekf.update_gps(antenna, std=0.3)
        ekf.update_heading(yaw)
    assert np.linalg.norm(ekf.state[:2] - truth) < 0.02
    assert ekf.position_std < grown


def test_router_detours_around_obstacles_and_pursuit_follows():
    wall = Obstacle2D.box("wall", (2.0, 0.0), (0.4, 3.0), 0.0, inflate=0.5)
    router = Router([wall])
    path = router.route((0.0, 0.0), (4.0, 0.0))
    assert len(path) > 2
    assert all(not wall.blocks(a, b) for a, b in zip(path[:-1], path[1:], strict=True))
    assert not router.free((2.0, 0.0))
    pose = np.array([0.0, 0.0, 0.0])
    pursuit = PurePursuit(path)
    for _ in range(2000):
        v, w = pursuit.command(pose, 0.02)
        pose = pose + np.array([v * math.cos(pose[2]), v * math.sin(pose[2]), w]) * 0.02
        assert not wall.contains(pose, margin=0.3)
        if pursuit.distance_to_goal(pose) < 0.1:
            break
    assert pursuit.distance_to_goal(pose) < 0.1


# --- gps_nav ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed,template", [(1, "square_route"), (2, "zigzag_route")])
def test_gps_nav_expert_nominal_is_signed_off(seed, template):
    record = gps_nav.generate(nav_spec(seed, template))
    assert record.outcome.success, record.outcome.reason
    assert NAV_SIGNOFF(record) == []
    assert [s.name for s in record.stages] == list(gps_nav.stages_for(template))
    assert [c.name for c in record.skill_calls][0] == "localize"
    assert record.achieved["gps_outages"] == []


def test_gps_nav_survives_an_outage_the_expert_cannot_see_through(outage_record):
    record = outage_record
    assert record.outcome.success, record.outcome.reason
    assert NAV_SIGNOFF(record) == []
    (start, end, recovered), = record.achieved["gps_outages"]
    assert end - start >= 8.0
    assert recovered is not None and recovered >= end
    # the expert saw the held fix, not the moving truth: GPS observations frozen in the outage
    gps = record.observations[C.OBS_GPS]
    inside = (record.time > start + 0.05) & (record.time < end - 0.05)
    assert inside.sum() > 300
    assert np.ptp(gps[inside], axis=0).max() == 0.0
    odom_speed = np.abs(record.actions[C.ACT_BASE_TWIST][inside, 0])
    assert odom_speed.max() > 0.3                       # it kept driving on dead reckoning
    assert record.perturbation_params["gps_dropout.intensity"] == 1.0


def test_gps_nav_is_deterministic(outage_record):
    again = gps_nav.generate(nav_spec(7, "square_route", C.FAMILY_GPS_DROPOUT, 1.0,
                                      perturbation=OUTAGE))
    np.testing.assert_array_equal(again.actions[C.ACT_BASE_TWIST],
                                  outage_record.actions[C.ACT_BASE_TWIST])
    np.testing.assert_array_equal(again.joint_position, outage_record.joint_position)
    assert again.achieved == outage_record.achieved
    assert [s.time for s in again.stages] == [s.time for s in outage_record.stages]


def test_gps_nav_skipped_waypoint_is_rejected():
    record = gps_nav.generate(nav_spec(3, "square_route", fault="skip_waypoint"))
    codes = {r.code for r in NAV_SIGNOFF(record)}
    assert not record.outcome.success
    assert C.REJECT_NOT_SUCCESSFUL in codes
    assert "waypoint_2" not in [s.name for s in record.stages]


# --- pill_handover ------------------------------------------------------------------------------


def test_pill_handover_expert_is_signed_off(handover_record):
    record = handover_record
    assert record.outcome.success, record.outcome.reason
    assert HANDOVER_SIGNOFF(record) == []
    assert [s.name for s in record.stages] == list(pill_handover.STAGES)
    assert record.achieved["max_near_speed"] <= pill_handover.APPROACH_SPEED_LIMIT
    dist = np.asarray(record.achieved["hand_distance"])
    assert dist.size == len(record.achieved["tool_speed"]) > 100
    assert dist.min() < 0.05 < dist.max()
    hand = record.observations[C.OBS_HAND]
    assert hand.shape[1] == 8 and hand[:, 7].max() == 1.0


def test_pill_handover_second_template_is_signed_off():
    record = pill_handover.generate(handover_spec(2, "pill_box_large"))
    assert record.outcome.success, record.outcome.reason
    assert HANDOVER_SIGNOFF(record) == []


def test_pill_handover_early_release_is_rejected():
    record = pill_handover.generate(handover_spec(1, fault="early_release"))
    codes = {r.code for r in HANDOVER_SIGNOFF(record)}
    assert not record.outcome.success
    assert C.REJECT_NOT_SUCCESSFUL in codes
    assert "wait_for_hand" not in [s.name for s in record.stages]


def test_pill_handover_fast_approach_is_rejected():
    record = pill_handover.generate(handover_spec(1, fault="fast_approach"))
    assert not record.outcome.success
    assert record.achieved["max_near_speed"] > pill_handover.APPROACH_SPEED_LIMIT
    assert C.REJECT_NOT_SUCCESSFUL in {r.code for r in HANDOVER_SIGNOFF(record)}


def test_pill_handover_is_deterministic(handover_record):
    again = pill_handover.generate(handover_spec(1))
    np.testing.assert_array_equal(again.actions[C.ACT_JOINT_TARGET],
                                  handover_record.actions[C.ACT_JOINT_TARGET])
    assert again.achieved == handover_record.achieved


# --- envs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", [C.ENV_GPS_NAV, C.ENV_PILL_HANDOVER])
def test_task_envs_pass_check_env(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert info["stages_reached"] == [] and info["stages"]
    env.close()


def test_registry_resolves_the_tasks():
    from clawgym_ros.tasks.registry import get_task

    nav, hand = get_task(C.TASK_GPS_NAV), get_task(C.TASK_PILL_HANDOVER)
    assert nav.held_out_templates == ("long_route",)
    assert hand.training_templates == ("pill_box", "pill_box_large")
    assert f"{C.TASK_GPS_NAV}/zigzag_route" in nav.semantic_validators()
    for task in (nav, hand):
        for heading in ("Task Description", "Randomizations", "Success Conditions", "Stages"):
            assert heading in type(task).__doc__


# --- replay re-validation and the contact framework ------------------------------------------


def _assert_replays(record, signoff, **options):
    from clawgym_ros.tasks.replay import replay_record

    replayed = replay_record(record, options=options)
    assert signoff(replayed) == [], signoff(replayed)
    assert [s.name for s in replayed.stages] == [s.name for s in record.stages]
    np.testing.assert_array_equal(replayed.joint_position, record.joint_position)
    for key, value in record.observations.items():
        np.testing.assert_array_equal(replayed.observations[key], value)
    assert replayed.goal == record.goal


def test_gps_nav_accepted_episodes_revalidate_on_replay(outage_record):
    _assert_replays(outage_record, NAV_SIGNOFF, perturbation=OUTAGE)
    nominal = gps_nav.generate(nav_spec(4, "zigzag_route"))
    assert NAV_SIGNOFF(nominal) == []
    _assert_replays(nominal, NAV_SIGNOFF)


def test_pill_handover_accepted_episodes_revalidate_on_replay(handover_record):
    _assert_replays(handover_record, HANDOVER_SIGNOFF)
    other = pill_handover.generate(handover_spec(3, "pill_box_large"))
    assert HANDOVER_SIGNOFF(other) == []
    _assert_replays(other, HANDOVER_SIGNOFF)


def test_unintended_collisions_are_judged_per_geom():
    """gps_nav: wheels on the floor are allowed, the base inside an obstacle is not (both
    belong to the world body); unknown contact group names are refused."""
    import mujoco

    from clawgym_ros.errors import ConfigError

    env = gps_nav.GpsNavEnv(template="square_route")
    env.reset(seed=0)
    b = env.backend
    stop = {C.ACT_BASE_TWIST: np.zeros(2)}
    _, _, _, _, info = env.step(stop)
    floor = mujoco.mj_name2id(b.model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert any(floor in (int(c.geom1), int(c.geom2)) for c in b.data.contact[:b.data.ncon])
    assert info["collision"] is False
    obstacle = [g for g in b.index.obstacle_geoms if g != floor][0]
    b.data.qpos[b.index.base_qpos:b.index.base_qpos + 2] = b.data.geom_xpos[obstacle][:2]
    mujoco.mj_forward(b.model, b.data)
    _, _, _, _, info = env.step(stop)
    assert info["collision"] is True
    with pytest.raises(ConfigError, match="contact group"):
        env.contact_group(b, "no_such_group")
    env.close()
