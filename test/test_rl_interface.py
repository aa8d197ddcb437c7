"""The RL interface of the Gymnasium envs (issue 27): gym.make's flat Box action, the modes,
bad actions, the dense reward over expert episodes. ~20 s on 2 cores."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C
from clawgym_ros.errors import ActionError, ConfigError
from clawgym_ros.sim import modes
from clawgym_ros.sim.registration import ENVS
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.synthesis.mixture import episode_seed
from clawgym_ros.tasks.registry import get_task
from clawgym_ros.tasks.rewards import TERMS

ARM_IDS = (C.ENV_TABLETOP, C.ENV_PICK_PLACE, C.ENV_PEG_INSERT, C.ENV_PILL_HANDOVER)


def _layers(env: gym.Env) -> list[type]:
    out = []
    while isinstance(env, gym.Wrapper):
        out.append(type(env))
        env = env.env
    return out + [type(env)]


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_gym_make_gives_a_flat_normalized_box_named_in_metadata(env_id):
    env = gym.make(env_id)
    n = 8 if env_id in ARM_IDS else 2
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (n,), np.float32)
    meta = env.metadata
    assert len(meta["action_layout"]) == n and meta["reward_mode"] == C.REWARD_DENSE
    if n == 8:
        assert meta["control_mode"] == C.CONTROL_JOINT_DELTA
        assert meta["action_layout"][0] == "arm_joint_1_delta"
        assert meta["action_layout"][-1] == C.ACT_GRIPPER
        assert meta["action_scale"]["joint_delta_rad"] == modes.JOINT_DELTA_MAX
    else:
        assert meta["control_mode"] == C.CONTROL_BASE_TWIST
        assert meta["action_layout"] == ["linear_velocity", "angular_velocity"]
    assert isinstance(env.observation_space, gym.spaces.Dict)
    assert modes.ModeWrapper in _layers(env)
    obs, _ = env.reset(seed=0)
    obs, reward, *_ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs) and isinstance(reward, float)
    env.close()
    # The Dict interface is the env class itself, exactly as the experts and evaluator use it.
    native = gym.make(env_id, control_mode=C.CONTROL_DICT)
    assert modes.ModeWrapper not in _layers(native)
    assert isinstance(native.action_space, gym.spaces.Dict)
    native.close()


def test_unknown_modes_are_refused_by_name():
    with pytest.raises(ConfigError, match="control_mode='joint_torque'.*pd_joint_delta"):
        gym.make(C.ENV_PICK_PLACE, control_mode="joint_torque")
    with pytest.raises(ConfigError, match="control_mode='pd_joint_delta'.*base_twist"):
        gym.make(C.ENV_GPS_NAV, control_mode=C.CONTROL_JOINT_DELTA)
    with pytest.raises(ConfigError, match="obs_mode='pixels'"):
        gym.make(C.ENV_PICK_PLACE, obs_mode="pixels")
    with pytest.raises(ConfigError, match="reward_mode='sparse'"):
        gym.make(C.ENV_PICK_PLACE, reward_mode="sparse")
    with pytest.raises(ConfigError, match="obs_mode=.state.*wrist_camera_rgb"):
        gym.make(C.ENV_TABLETOP, obs_mode=C.OBS_MODE_STATE, cameras=(C.CAMERA_WRIST,))


def test_joint_delta_moves_each_joint_by_at_most_the_scale_and_zero_holds():
    env = gym.make(C.ENV_PEG_INSERT)
    obs, _ = env.reset(seed=4)
    q0 = obs[C.OBS_JOINT_POS].copy()
    hold = np.zeros(8, np.float32)
    hold[7] = 1.0                                   # gripper open
    for _ in range(10):
        obs, *_ = env.step(hold)
    assert np.abs(obs[C.OBS_JOINT_POS] - q0).max() < 0.01
    push = hold.copy()
    push[0] = 1.0
    q1 = obs[C.OBS_JOINT_POS].copy()
    for _ in range(5):
        obs, *_ = env.step(push)
    moved = obs[C.OBS_JOINT_POS] - q1
    assert 0.02 < moved[0] <= 5 * modes.JOINT_DELTA_MAX + 1e-6
    assert np.abs(moved[1:]).max() < 0.01
    env.close()


def test_pd_joint_pos_maps_the_box_over_the_joint_range():
    env = gym.make(C.ENV_TABLETOP, control_mode=C.CONTROL_JOINT_POS)
    assert env.metadata["action_layout"][0] == "arm_joint_1_target"
    env.reset(seed=0)
    a = np.zeros(8, np.float32)
    for _ in range(100):
        obs, *_ = env.step(a)
    lo, hi = env.unwrapped.backend.model.actuator_ctrlrange[:7].T
    assert np.allclose(obs[C.OBS_JOINT_POS], (lo + hi) / 2, atol=0.05)
    env.close()


def test_clipping_is_counted_nan_and_wrong_shape_are_one_line_errors():
    env = gym.make(C.ENV_PICK_PLACE)
    env.reset(seed=1)
    big = np.full(8, 3.0, np.float32)
    _, _, _, _, info = env.step(big)
    assert info[C.INFO_ACTION_CLIPPED] and info[C.INFO_CLIPPED_STEPS] == 1
    _, _, _, _, info = env.step(np.zeros(8, np.float32))
    assert not info[C.INFO_ACTION_CLIPPED] and info[C.INFO_CLIPPED_STEPS] == 1
    # clipped = the same step as the action at the bound
    a, b = gym.make(C.ENV_PICK_PLACE), gym.make(C.ENV_PICK_PLACE)
    a.reset(seed=2), b.reset(seed=2)
    oa = a.step(big)[0]
    ob = b.step(np.ones(8, np.float32))[0]
    assert all(np.array_equal(oa[k], ob[k]) for k in oa)
    with pytest.raises(ActionError, match=r"shape \(7,\); expected shape \(8,\).*gripper\]"
                       ) as exc:
        env.step(np.zeros(7))
    assert "\n" not in str(exc.value)
    with pytest.raises(ActionError, match="control_mode='dict'"):
        env.step({C.ACT_GRIPPER: np.zeros(1)})
    nan = np.zeros(8, np.float32)
    nan[3] = np.nan
    t = env.unwrapped.backend.time
    with pytest.raises(ActionError, match="not finite at arm_joint_4_delta") as exc:
        env.step(nan)
    assert "\n" not in str(exc.value) and env.unwrapped.backend.time == t
    with pytest.raises(ActionError, match="call reset"):
        env.step(np.zeros(8, np.float32))
    _, info = env.reset(seed=1)
    _, _, _, _, info = env.step(np.zeros(8, np.float32))
    assert info[C.INFO_CLIPPED_STEPS] == 0
    for e in (env, a, b):
        e.close()


@pytest.mark.parametrize("env_id", [C.ENV_PICK_PLACE, C.ENV_GPS_NAV])
def test_state_obs_mode_is_the_dict_flattened_in_the_documented_order(env_id):
    flat = gym.make(env_id, obs_mode=C.OBS_MODE_STATE)
    full = gym.make(env_id)
    vec, _ = flat.reset(seed=5)
    obs, _ = full.reset(seed=5)
    layout = flat.metadata["obs_layout"]
    assert [k for k, _ in layout][:2] == [C.OBS_JOINT_POS, C.OBS_JOINT_VEL]
    assert {k for k, _ in layout} == set(obs)
    assert flat.observation_space.shape == vec.shape == (sum(n for _, n in layout),)
    assert vec.dtype == np.float32
    expect = np.concatenate([np.asarray(obs[k], np.float32).reshape(-1) for k, _ in layout])
    assert np.array_equal(vec, expect)
    flat.close()
    full.close()


def _expert_rewards(task_name: str, seed_index: int) -> tuple[list[float], list[str], object]:
    """Dense rewards of an expert episode's actions replayed through gym.make (Dict control,
    dense reward), the stages reached, and the record."""
    task = get_task(task_name)
    spec = EpisodeSpec(index=seed_index, seed=episode_seed(3, seed_index), task=task_name,
                       template=task.training_templates[0])
    record = task.generate(spec)
    env = gym.make(task.env_id, template=record.template, control_mode=C.CONTROL_DICT,
                   reward_mode=C.REWARD_DENSE)
    _, info = env.reset(seed=record.seed, options={"template": record.template})
    rewards, reached = [], []
    for k in range(record.num_steps):
        action = {key: value[k] for key, value in record.actions.items()}
        _, reward, _, _, info = env.step(action)
        rewards.append(reward)
        reached += info["new_stages"]
    env.close()
    return rewards, reached, record


@pytest.mark.parametrize("task_name", C.TASKS)
def test_dense_reward_over_an_expert_episode_rises_to_one_and_repeats(task_name):
    rewards, reached, record = _expert_rewards(task_name, 0)
    r = np.asarray(rewards)
    assert record.outcome.success and reached == [s.name for s in record.stages]
    assert np.all((r >= 0.0) & (r <= 1.0))
    n = len(reached)
    assert r[0] > 0.0 and r[-1] == pytest.approx(1.0)       # never 0 everywhere until success
    # Progress is shaped within stages: many distinct values, not n + 1 plateaus.
    assert len(np.unique(np.round(r, 6))) > 4 * n
    assert r[len(r) // 2:].mean() > r[:len(r) // 2].mean()
    again, _, _ = _expert_rewards(task_name, 0)
    assert again == rewards                                  # same seed, same rewards


def test_bare_scenes_have_no_task_and_zero_dense_reward():
    env = gym.make(C.ENV_TABLETOP)
    env.reset(seed=0)
    assert env.step(env.action_space.sample())[1] == 0.0
    env.close()


@functools.cache
def _expert_record(task_name: str):
    """One expert demonstration per task (seed index 0), generated once per test process."""
    task = get_task(task_name)
    spec = EpisodeSpec(index=0, seed=episode_seed(3, 0), task=task_name,
                       template=task.training_templates[0])
    return task.generate(spec)


def _shaped_return(task_name: str, policy: str) -> tuple[float, dict[str, float]]:
    """Return of one episode (the expert demonstration's seed, template and length) under
    ``reward_mode="shaped"``: the expert's own actions, random flat actions, or a stalled arm
    (zero joint deltas / zero twist, gripper half open)."""
    record = _expert_record(task_name)
    task = get_task(task_name)
    if policy == "expert":
        env = gym.make(task.env_id, template=record.template, control_mode=C.CONTROL_DICT,
                       reward_mode=C.REWARD_SHAPED)
    else:
        env = gym.make(task.env_id, template=record.template, reward_mode=C.REWARD_SHAPED)
    env.reset(seed=record.seed, options={"template": record.template})
    env.action_space.seed(0)
    total, terms = 0.0, {}
    for k in range(record.num_steps):
        if policy == "expert":
            action = {key: value[k] for key, value in record.actions.items()}
        elif policy == "random":
            action = env.action_space.sample()
        else:
            action = np.zeros(env.action_space.shape, np.float32)
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        for term, value in info[C.INFO_REWARD_TERMS].items():
            terms[term] = terms.get(term, 0.0) + value
        if terminated or truncated:
            break
    env.close()
    return total, terms


@pytest.mark.parametrize("task_name", C.TASKS)
def test_shaped_reward_ranks_the_expert_above_random_and_stalled_policies(task_name):
    """The stage-wise terms each task declares (clawgym_ros.tasks.rewards) reward what the
    task is about: over the same episode, the expert's return beats random actions' and a
    stalled arm's; progress sums to the progress made (a potential difference)."""
    expert, terms = _shaped_return(task_name, "expert")
    random_, _ = _shaped_return(task_name, "random")
    stalled, stalled_terms = _shaped_return(task_name, "stalled")
    assert expert > random_ and expert > stalled, (expert, random_, stalled)
    assert terms["success"] == 1.0 and terms["progress"] > 0.5
    assert abs(stalled_terms["progress"]) < 0.5
    weights = get_task(task_name).env_class.reward_weights \
        if hasattr(get_task(task_name), "env_class") else None
    assert weights is None or set(weights) <= set(terms)


def test_recovery_term_rewards_regaining_lost_progress_in_time():
    """Anomaly timeliness: once per episode, on the step the disturbance's recovery watch
    reports lost progress regained, 1 - steps / RECOVERY_WINDOW (0 when too late or never)."""
    from clawgym_ros.tasks.rewards import RECOVERY_WINDOW, StageReward

    env = gym.make(C.ENV_PICK_PLACE, control_mode=C.CONTROL_DICT).unwrapped
    env.reset(seed=2)
    reward = StageReward(env)
    for steps, expect in ((50, 1.0 - 50 / RECOVERY_WINDOW), (RECOVERY_WINDOW + 10, 0.0)):
        reward.reset()
        stream = [{C.INFO_DISTURBANCE: {"disturbed": False}},
                  {C.INFO_DISTURBANCE: {"disturbed": True, "steps_to_recover": None}},
                  {C.INFO_DISTURBANCE: {"disturbed": True, "steps_to_recover": steps}},
                  {C.INFO_DISTURBANCE: {"disturbed": True, "steps_to_recover": steps}}, {}]
        got = [reward.step(info)[1]["recovery"] for info in stream]
        assert got == pytest.approx([0.0, 0.0, expect, 0.0, 0.0])
    env.close()


def test_shaped_reward_weights_are_the_tasks_own_and_overridable():
    from clawgym_ros.errors import ConfigError

    env = gym.make(C.ENV_PICK_PLACE, reward_mode=C.REWARD_SHAPED,
                   reward_weights={"collision": 0.0})
    assert env.unwrapped.reward_weights["collision"] > 0.0     # the class default is kept
    env.reset(seed=1)
    _, _, _, _, info = env.step(np.zeros(8, np.float32))
    assert set(info[C.INFO_REWARD_TERMS]) == set(TERMS)
    env.close()
    with pytest.raises(ConfigError, match="reward_weights.smile"):
        gym.make(C.ENV_PICK_PLACE, reward_mode=C.REWARD_SHAPED, reward_weights={"smile": 1.0})
    with pytest.raises(ConfigError, match="only with reward_mode='shaped'"):
        gym.make(C.ENV_PICK_PLACE, reward_weights={"progress": 1.0})
