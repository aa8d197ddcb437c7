"""Policies relative to their previous command (mlp option ``relative_base: command``): what
the targets are relative to in training and acting, the sampler's previous action, the
refusals, and that a chunk sent at once equals the same actions step by step."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.errors import CheckpointError, ConfigError  # noqa: E402
from clawgym_ros.evaluation.protocol import act_chunk  # noqa: E402
from clawgym_ros.training.bc import train  # noqa: E402
from clawgym_ros.training.checkpoint import load_checkpoint, load_policy  # noqa: E402
from clawgym_ros.training.config import TrainConfig  # noqa: E402
from clawgym_ros.training.data import TableSampler  # noqa: E402
from clawgym_ros.training.policies import (  # noqa: E402
    PolicySpec,
    TorchPolicy,
    build_policy,
    relative_to_command,
)
from clawgym_ros.training.synthetic import OBS_SPEC, synthetic_table  # noqa: E402
from test.conftest import ROOT  # noqa: E402

OBS = {C.OBS_JOINT_POS: 7, C.OBS_GRIPPER: 1}
ACT = {C.ACT_JOINT_TARGET: 7, C.ACT_GRIPPER: 1}
COMMAND = {"relative_base": "command"}


def _spec(options: dict) -> PolicySpec:
    return PolicySpec(type=C.POLICY_MLP, obs_dim=8, act_dim=8, hidden=(16,), chunk=3,
                      obs_layout=tuple(OBS.items()), relative=((0, 0, 7),), options=options)


def _still_model(options: dict):
    """A policy whose network predicts zero relative motion: every joint target is its base."""
    model = build_policy(_spec(options), seed=0)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    return model


def _obs(q: float) -> dict[str, np.ndarray]:
    return {C.OBS_JOINT_POS: np.full(7, q), C.OBS_GRIPPER: np.array([0.04])}


@pytest.mark.parametrize("options, second_chunk_base", [({}, 0.3), (COMMAND, 0.1)])
def test_joint_targets_are_relative_to_the_observation_or_to_the_last_command(
        options, second_chunk_base):
    policy = TorchPolicy(_still_model(options), OBS, ACT)
    policy.reset()
    first = [policy.act(_obs(0.1)) for _ in range(3)]          # the episode's first chunk
    assert all(np.allclose(a[C.ACT_JOINT_TARGET], 0.1) for a in first)
    # The encoders now read 0.3 (noise, a bias, a lagging arm): a policy relative to the
    # observation moves its command there; one relative to its command holds 0.1.
    second = policy.act(_obs(0.3))
    assert np.allclose(second[C.ACT_JOINT_TARGET], second_chunk_base)
    policy.reset()                                              # a new episode: observation
    assert np.allclose(policy.act(_obs(0.5))[C.ACT_JOINT_TARGET], 0.5)


def test_command_policy_chunk_sent_at_once_equals_step_by_step():
    model = build_policy(_spec(COMMAND), seed=3)
    stepwise, chunked = TorchPolicy(model, OBS, ACT), TorchPolicy(model, OBS, ACT)
    expected = [stepwise.act(_obs(0.01 * k)) for k in range(7)]
    got = act_chunk(chunked, _obs(0.0), 3) + act_chunk(chunked, _obs(0.03), 3) \
        + act_chunk(chunked, _obs(0.06), 3)[:1]
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(got, expected, strict=True)
               for k in a)


def test_relative_base_option_is_validated():
    with pytest.raises(ConfigError, match="policy_options.relative_base"):
        build_policy(_spec({"relative_base": "encoder"}))
    assert relative_to_command(_spec(COMMAND)) and not relative_to_command(_spec({}))
    # The cnn policy takes the option beside its augmentation options.
    cnn = build_policy(PolicySpec(type=C.POLICY_CNN, obs_dim=8, act_dim=8, hidden=(16,),
                                  image_shape=(32, 32, 3), obs_layout=tuple(OBS.items()),
                                  relative=((0, 0, 7),),
                                  options={**COMMAND, "downsample": 2}))
    assert cnn.relative_to_command and cnn.options.downsample == 2
    # No relative parts (absolute targets): nothing is relative to anything.
    assert not relative_to_command(PolicySpec(type=C.POLICY_MLP, obs_dim=8, act_dim=8,
                                              options=COMMAND))


def test_loop_config_with_policy_options_loads_without_torch():
    # Checking a config (CLI, loop, fuzz test) must not wait seconds for a network library.
    code = ("import sys; from clawgym_ros.coordinator.config import load_loop_config; "
            "c = load_loop_config('config/loop/pick_place_evidence_command.yaml'); "
            "assert c.policy_options == {'relative_base': 'command'}; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)
    # The torch-free options are the very classes the policy types build with.
    from clawgym_ros.training.options import BUILTIN_OPTIONS
    from clawgym_ros.training.registry import BUILTIN_POLICIES, policy_class

    assert set(BUILTIN_POLICIES) == {C.POLICY_MLP, C.POLICY_CNN}
    assert all(policy_class(name).Options is BUILTIN_OPTIONS[name] for name in BUILTIN_POLICIES)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return synthetic_table(tmp_path_factory.mktemp("table"), rows=2000, episode_len=50,
                           groups=2, seed=2)


def test_sampler_gives_each_row_the_action_before_its_chunk(table):
    sampler = TableSampler(table, val_fraction=0.0, chunk=3, seed=0, resident_budget_mb=64,
                           batch_size=8, shift=1, command=True)
    end = int(sampler.train.ends[0])
    rows = np.array([end - 5, end - 1])
    batch = sampler.gather(rows, np.array([end, end]))
    actions = np.asarray(table.action)
    # shift 1: row t's observation follows row t's action, its chunk starts at row t + 1
    assert np.array_equal(batch.command, actions[rows])
    assert np.array_equal(batch.action[0, 0], actions[end - 4])
    assert TableSampler(table, val_fraction=0.0, chunk=3, seed=0, resident_budget_mb=64,
                        batch_size=8, shift=1).gather(rows, np.array([end, end])).command is None
    with pytest.raises(ConfigError, match="action_shift"):
        TableSampler(table, val_fraction=0.0, chunk=3, seed=0, resident_budget_mb=64,
                     batch_size=8, shift=0, command=True)


def test_training_targets_are_relative_to_the_previous_action(table, tmp_path):
    """A command policy trains and acts: its stats are those of (action - previous action), its
    checkpoint records the option, and residual RL fine-tuning refuses it with one line."""
    store = ArtifactStore(tmp_path)
    cfg = TrainConfig(steps=10, seed=0, hidden=(16,), chunk=2, batch_size=32, log_interval=5,
                      val_interval=5, checkpoint_interval=5, val_samples=64,
                      action_mode=C.ACTION_MODE_DELTA, features=(), exclude_obs_keys=(),
                      policy_options=COMMAND)
    result = train(table, cfg, store, dataset_ids=[], tensorboard=False)
    loaded = load_checkpoint(store, result.checkpoint_id)
    assert loaded.spec.options == COMMAND and relative_to_command(loaded.spec)
    model = loaded.build_model()
    # the stats of the targets: each row's chunk (rows t + 1, t + 2; clipped at the table's
    # end) minus the row's own action (shift 1: the command before the chunk)
    actions = np.asarray(table.action, dtype=np.float64)
    t = np.arange(len(actions))
    rel = np.concatenate([actions[np.minimum(t + 1 + k, len(t) - 1), :7] - actions[t, :7]
                          for k in range(2)])
    assert np.allclose(model.action_mean.numpy()[:7], rel.mean(0), atol=1e-5)
    assert np.allclose(model.action_std.numpy()[:7], np.maximum(rel.std(0), 0.01), rtol=1e-4)
    policy = load_policy(store, result.checkpoint_id, expected_obs_spec=OBS_SPEC)
    row = np.asarray(table.obs[5])
    at = np.cumsum([0, *OBS_SPEC.values()])
    obs = {k: row[at[i]:at[i + 1]] for i, k in enumerate(OBS_SPEC)}
    assert np.isfinite(policy.act(obs)[C.ACT_JOINT_TARGET]).all()

    from clawgym_ros.training.rl import FinetuneConfig, finetune

    with pytest.raises(CheckpointError, match="relative_base.*mode=direct"):
        finetune(tmp_path, FinetuneConfig(base_checkpoint=result.checkpoint_id, steps=64,
                                          seed=0, mode="residual"))   # direct: test_rl_finetune
