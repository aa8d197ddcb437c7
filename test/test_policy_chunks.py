"""Lockstep chunks, pure parts: which policies act open loop, the chunk a policy_node sends,
the steps sim_node lets it command, and exact sampling at the chunk's points."""

from __future__ import annotations

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.evaluation.observation import arm_command, chunk_points
from clawgym_ros.evaluation.protocol import act_chunk, open_loop_steps
from clawgym_ros.evaluation.rollout import PolicySource
from clawgym_ros.sim.trajectory import JointTrajectory, chunk_steps

STEP_NS = 20_000_000


def _obs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {C.OBS_JOINT_POS: rng.uniform(-0.3, 0.3, 7), C.OBS_JOINT_VEL: np.zeros(7),
            C.OBS_GRIPPER: np.array([0.08]),
            C.OBS_OBJECT_POSES: np.array([[0.5, 0.0, 0.42, 1.0, 0.0, 0.0, 0.0]]),
            C.OBS_TOOL_POSE: np.array([0.4, 0.0, 0.6, 1.0, 0.0, 0.0, 0.0])}


def _same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True))


def test_scripted_expert_chunk_equals_its_step_by_step_actions():
    source = PolicySource.parse("scripted:pick_place:grasp_height=0.015")
    stepwise, chunked = source.load(), source.load()
    assert open_loop_steps(chunked) == 0  # nothing planned before the first observation
    obs = _obs(0)
    # Step by step the expert gets a fresh (different) observation every step, which it does
    # not read once planned; the chunk repeats the first one.
    expected = [stepwise.act(obs if k == 0 else _obs(k)) for k in range(60)]
    chunk = act_chunk(chunked, obs, 50)
    assert len(chunk) == 50 and _same(chunk, expected[:50])
    assert _same(act_chunk(chunked, _obs(99), 10), expected[50:60])
    assert _same(act_chunk(chunked, obs, 1), [stepwise.act(obs)])


def test_torch_policy_chunk_is_its_queue():
    torch = pytest.importorskip("torch")
    from clawgym_ros.training.policies import PolicySpec, TorchPolicy, build_policy

    obs_spec = {C.OBS_JOINT_POS: 7, C.OBS_JOINT_VEL: 7, C.OBS_GRIPPER: 1}
    action_spec = {C.ACT_JOINT_TARGET: 7, C.ACT_GRIPPER: 1}
    torch.manual_seed(0)
    model = build_policy(PolicySpec(type=C.POLICY_MLP, obs_dim=15, act_dim=8, hidden=(16,),
                                    chunk=5))
    stepwise = TorchPolicy(model, obs_spec, action_spec)
    chunked = TorchPolicy(model, obs_spec, action_spec)
    expected = [stepwise.act(_obs(k)) for k in range(8)]
    assert open_loop_steps(stepwise) == 2  # 8 = 5 + 3 actions: two left in the queue
    first = act_chunk(chunked, _obs(0), 50)
    assert len(first) == 5 and open_loop_steps(chunked) == 0
    # A cap smaller than the chunk leaves the rest queued for the next call.
    second = act_chunk(chunked, _obs(5), 2)
    assert _same(first + second, expected[:7]) and open_loop_steps(chunked) == 3
    chunked.reset()
    assert open_loop_steps(chunked) == 0


def test_sim_node_lets_only_exact_chunks_command_several_steps():
    assert chunk_steps([STEP_NS * (i + 1) for i in range(20)], STEP_NS) == 20
    assert chunk_steps([STEP_NS], STEP_NS) == 1
    assert chunk_steps([0], STEP_NS) == 1                       # one target, held
    assert chunk_steps([STEP_NS, STEP_NS + 10**9], STEP_NS) == 1  # velocity feed-forward
    assert chunk_steps([STEP_NS, 3 * STEP_NS], STEP_NS) == 1      # a gap: a real motion
    assert chunk_steps([STEP_NS * (i + 1) for i in range(3)], 0) == 1


def test_chunk_points_are_sampled_exactly_at_the_end_of_each_step():
    rng = np.random.default_rng(3)
    actions = [{C.ACT_JOINT_TARGET: rng.normal(size=7), C.ACT_GRIPPER: np.array([0.04])}
               for _ in range(30)]
    points = chunk_points([arm_command(a) for a in actions], STEP_NS)
    assert [t for t, _, _ in points] == [STEP_NS * (i + 1) for i in range(30)]
    assert chunk_steps([t for t, _, _ in points], STEP_NS) == 30
    dt = STEP_NS * 1e-9
    start = 17 * dt  # a stamp that is itself a float sum
    traj = JointTrajectory(C.ARM_JOINTS, np.array([t for t, _, _ in points]) * 1e-9,
                           np.array([p for _, p, _ in points]),
                           np.array([v for _, _, v in points]), start_time=start)
    traj = traj.with_start_state(np.zeros(7))
    for i, action in enumerate(actions):
        # sim_node's sample time: the end of step 17 + i, as SimSession computes it.
        pos, vel = traj.sample((17 + i) * dt + dt)
        assert np.array_equal(pos, action[C.ACT_JOINT_TARGET]), i
        assert not vel.any()
    with pytest.raises(Exception, match="joint target"):
        chunk_points([arm_command({C.ACT_GRIPPER: np.array([0.0])})], STEP_NS)
