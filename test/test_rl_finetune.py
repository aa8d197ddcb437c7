"""RL fine-tuning (`clawgym train --finetune rl --from ID`): residual PPO over a frozen BC
checkpoint, or PPO on the BC network itself (``mode=direct``), committed as a checkpoint that
every evaluator path runs.

One small real BC checkpoint (3 synthesized pick_place demonstrations, 30 training steps) is
built once per module; fine-tuning runs a few hundred environment steps.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")
pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.cli import main  # noqa: E402
from clawgym_ros.tasks.rewards import TERMS  # noqa: E402
from test.conftest import synthetic_train_run  # noqa: E402

#: A fine-tuning run small enough for the suite: 2 PPO rollouts of 128 steps.
SMALL = ["--rl-option", "n_steps=128", "--rl-option", "batch_size=64",
         "--rl-option", "n_epochs=2", "--rl-option", "max_episode_steps=100"]


@pytest.fixture(scope="module")
def bc_run(tmp_path_factory):
    """(run folder, BC checkpoint id) trained on real pick_place demonstrations."""
    from clawgym_ros.orchestration.synthesis import SynthRequest, synthesize
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig
    from clawgym_ros.training.data import open_training_table

    root = tmp_path_factory.mktemp("rl")
    dataset, _ = synthesize(SynthRequest(out=str(root), episodes=3, seed=3,
                                         task=C.TASK_PICK_PLACE, workers=1))
    store = ArtifactStore(root)
    table = open_training_table(store, [dataset.id])
    result = train(table, TrainConfig(steps=30, seed=0, batch_size=32, chunk=5), store,
                   dataset_ids=[dataset.id], tensorboard=False)
    return root, result.checkpoint_id


@pytest.fixture(scope="module")
def bc_command(bc_run):
    """A BC checkpoint on bc_run's data whose joint targets are relative to its previous
    command (policy option relative_base: command)."""
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig
    from clawgym_ros.training.data import open_training_table

    root, base_id = bc_run
    store = ArtifactStore(root)
    dataset_ids = list(store.get(base_id).manifest.parents)
    result = train(open_training_table(store, dataset_ids),
                   TrainConfig(steps=30, seed=0, batch_size=32, chunk=5,
                               policy_options={"relative_base": "command"}),
                   store, dataset_ids=dataset_ids, tensorboard=False)
    return root, result.checkpoint_id


@pytest.fixture(scope="module")
def syn_run(tmp_path_factory):
    return synthetic_train_run(tmp_path_factory)


def _finetune(capsys, root, base, *extra):
    code = main(["train", "--finetune", "rl", "--from", base[:12], "--steps", "256",
                 "--seed", "0", "--out", str(root), *SMALL, *extra])
    out = capsys.readouterr()
    return code, out.out.strip(), out.err


def test_zero_residual_acts_exactly_like_the_bc_policy(bc_run):
    """Before any update the residual's output layer is zero: the fine-tuned policy starts
    as the BC policy, action for action (chunks executed from the same queue)."""
    from clawgym_ros.tasks.pick_place import PickPlaceEnv
    from clawgym_ros.training.checkpoint import load_checkpoint, load_policy
    from clawgym_ros.training.policies import TorchPolicy
    from clawgym_ros.training.rl import FinetuneConfig, residual_from_checkpoint

    root, base_id = bc_run
    store = ArtifactStore(root)
    ckpt = load_checkpoint(store, base_id)
    residual = TorchPolicy(residual_from_checkpoint(
        ckpt, FinetuneConfig(base_checkpoint=base_id, steps=1, seed=0)),
        ckpt.obs_spec, ckpt.action_spec)
    base = load_policy(store, base_id)
    env = PickPlaceEnv()
    for policy_a, policy_b in ((base, residual),):
        obs, _ = env.reset(seed=11)
        policy_a.reset()
        policy_b.reset()
        for _ in range(40):
            a, b = policy_a.act(obs), policy_b.act(obs)
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6)
            obs, *_ = env.step(a)
    env.close()


def test_finetune_commits_a_traceable_checkpoint_that_evaluates(bc_run, capsys, recwarn):
    from clawgym_ros.evaluation.rollout_check import run_episodes
    from clawgym_ros.tasks.pick_place import PickPlaceEnv
    from clawgym_ros.training.checkpoint import load_policy

    root, base_id = bc_run
    code, out, err = _finetune(capsys, root, base_id)
    assert code == 0, err
    # 86-step rollouts of 5-step chunks (18 decisions) in 13-decision minibatches: the
    # shorter last minibatch is intended, and SB3's warning about it is not shown.
    assert not [w for w in recwarn if "mini-batch size" in str(w.message)]
    store = ArtifactStore(root)
    art = store.resolve(out, C.KIND_CHECKPOINT)
    assert art.manifest.parents == [base_id]
    assert art.manifest.config["finetune"] == "rl"
    assert art.manifest.summary["step"] >= 256
    # Same seed and worker count, same id (the run trains again: nothing is reused).
    code2, out2, _ = _finetune(capsys, root, base_id)
    assert code2 == 0 and out2 == out
    # The default is the measured command's settings spelled out: the same id.
    recipe = [x for opt in ("mode=direct", "value_epochs=10", "critic_warmup=2", "lr=3e-6")
              for x in ("--rl-option", opt)]
    code_r, out_r, _ = _finetune(capsys, root, base_id, *recipe)
    assert code_r == 0 and out_r == out
    # Other settings, another run.
    code3, out3, _ = _finetune(capsys, root, base_id, "--rl-option", "lr=0.001")
    assert code3 == 0 and out3 != out
    # The default mode is direct: a checkpoint of the BC policy's own type, with the critic
    # recipe's settings in its config; the one actor update of this short run (two
    # critic-only warm-up rollouts first, rollouts shortened to fit) moved its weights.
    assert art.manifest.config["mode"] == "direct"
    assert art.manifest.config["value_epochs"] == 10 and art.manifest.config["critic_warmup"] == 2
    policy = load_policy(store, out)
    assert policy.model.spec.type == "mlp"
    bc = load_policy(store, base_id)
    assert not torch_equal(policy.model.head.weight, bc.model.head.weight)
    # Residual mode on request. Both run through the evaluator's entry point like any
    # checkpoint; the correction moved the residual off the BC policy's actions.
    code4, out4, _ = _finetune(capsys, root, base_id, "--rl-option", "mode=residual")
    assert code4 == 0 and out4 != out
    residual = load_policy(store, out4)
    assert residual.model.spec.type == "residual"
    assert float(residual.model.head.weight.detach().abs().sum()) > 0
    for tuned in (policy, residual):
        outcome = run_episodes(tuned, [7_000_000], env=PickPlaceEnv(), max_steps=30)
        assert outcome[0].steps == 30


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a.detach(), b.detach()))


def test_mode_defaults_keep_the_config_json_of_earlier_runs():
    """Residual mode is left out of the config JSON and keeps its earlier defaults (log-std
    -3, lr 3e-5, 2,048-step rollouts), so residual checkpoint ids are what they were when it
    was the default. Direct mode, the default, has the critic recipe's settings: the default
    config JSON is that of the measured command (docs/results/2026-12-06-rl-critic-fit.md),
    so the default command gives those runs' checkpoint ids."""
    from clawgym_ros.training.rl import FinetuneConfig

    residual = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, mode="residual")
    assert "mode" not in residual.to_json() and residual.to_json()["log_std_init"] == -3.0
    assert (residual.lr, residual.n_steps, residual.batch_size) == (3e-5, 2048, 256)
    direct = FinetuneConfig(base_checkpoint="x", steps=1, seed=0)
    assert direct.mode == "direct"
    assert direct.to_json()["mode"] == "direct" and direct.log_std_init == -4.0
    measured = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, mode="direct",
                              value_epochs=10, critic_warmup=2, lr=3e-6, n_steps=20480,
                              batch_size=2048)
    assert direct.to_json() == measured.to_json()
    assert FinetuneConfig(base_checkpoint="x", steps=1, seed=0,
                          log_std_init=-2.0).log_std_init == -2.0
    # no critic passes asked for: no warm-up either (and the JSON of direct runs before them)
    plain = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, value_epochs=0, lr=3e-5,
                           n_steps=2048, batch_size=256)
    assert plain.critic_warmup == 0
    assert not [k for k in plain.to_json() if k in ("value_epochs", "value_lr", "critic_warmup")]
    # the demonstration regularizer, off by default, is left out (ids as before it)
    assert not [k for k in {**residual.to_json(), **direct.to_json()} if k.startswith("bc_")]
    on = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, bc_steps=4)
    assert on.to_json()["bc_steps"] == 4 and on.to_json()["bc_lr"] == 1e-4
    # so are residual's critic-only passes when off
    assert not [k for k in residual.to_json() if k in ("value_epochs", "value_lr",
                                                       "critic_warmup")]
    fit = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, mode="residual",
                         value_epochs=3, critic_warmup=2)
    assert (fit.to_json()["value_epochs"], fit.to_json()["value_lr"],
            fit.to_json()["critic_warmup"]) == (3, 1e-3, 2)
    # and the exploration noise's default (per element)
    assert "exploration" not in residual.to_json() and "exploration" not in direct.to_json()
    held = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, exploration="chunk")
    assert held.to_json()["exploration"] == "chunk"


def test_chunk_shared_exploration_holds_one_draw_over_the_chunk():
    """exploration=chunk: every step of a sampled chunk deviates from the mean by the same
    act_dim-element draw; its log-probability is that draw's density (act_dim dimensions),
    its entropy act_dim elements' entropy; the deterministic action is the mean."""
    import gymnasium as gym
    import torch

    from clawgym_ros.training.rl import chunk_shared_policy

    chunk, act_dim = 4, 3
    policy = chunk_shared_policy(chunk)(
        gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-100, 100, (chunk * act_dim,),
                                                                np.float32),
        lambda _: 1e-3, log_std_init=-1.0)
    assert tuple(policy.log_std.shape) == (act_dim,)
    torch.manual_seed(0)
    obs = torch.randn(6, 5)
    dist = policy.get_distribution(obs)
    mean = dist.mode()
    sample = dist.sample()
    noise = (sample - mean).view(6, chunk, act_dim)
    assert torch.allclose(noise, noise[:, :1].expand(-1, chunk, -1))
    assert float(noise.detach().abs().max()) > 0
    normal = torch.distributions.Normal(0.0, float(np.exp(-1.0)))
    expected = normal.log_prob(noise[:, 0]).sum(-1)
    assert torch.allclose(dist.log_prob(sample), expected, atol=1e-5)
    assert torch.allclose(dist.entropy(), normal.entropy().expand(act_dim).sum().expand(6))
    actions, _, log_prob = policy(obs)
    assert actions.shape == (6, chunk * act_dim) and log_prob.shape == (6,)
    values, log_prob2, entropy = policy.evaluate_actions(obs, actions)
    assert torch.allclose(log_prob, log_prob2) and entropy.shape == (6,)
    assert torch.equal(policy(obs, deterministic=True)[0], mean)


class _Drift:
    """A Gymnasium env whose returns a critic can learn: a constant x in [-1, 1] drawn per
    episode is paid every step for 10 steps (observation: x and the time left)."""

    def __new__(cls):
        import gymnasium as gym
        from gymnasium import spaces

        class Drift(gym.Env):
            observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
            action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.x, self.t = float(self.np_random.uniform(-1, 1)), 0
                return self._obs(), {}

            def _obs(self):
                return np.array([self.x, 1.0 - self.t / 10], np.float32)

            def step(self, action):
                self.t += 1
                return self._obs(), self.x, self.t >= 10, False, {}

        return Drift()


def test_critic_fit_learns_the_returns_and_warm_up_leaves_the_actor_alone():
    """CriticFit on real PPO rollouts: the critic's explained variance of a rollout's
    returns rises with the passes and, out of sample, from one rollout to the next; the
    buffer's advantages are recomputed with the fitted critic (returns = advantages + values,
    values = the critic's predictions); the warm-up update leaves the actor's weights as they
    were and the next ones move them."""
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv

    from clawgym_ros.training.rl import CriticFit, FinetuneConfig, _ppo_class, silent_logger

    cfg = FinetuneConfig(base_checkpoint="x", steps=1, seed=0, value_epochs=30,
                         value_lr=3e-3, critic_warmup=1)
    critic = CriticFit(cfg)
    fits, actors = [], []
    fit = critic.fit

    def recording_fit(model):
        actors.append([p.detach().clone() for p in model.policy.action_net.parameters()])
        result = fit(model)
        buf = model.rollout_buffer
        obs = torch.from_numpy(buf.observations.reshape(-1, buf.observations.shape[-1]))
        with torch.no_grad():
            predicted = model.policy.predict_values(obs).numpy().reshape(buf.values.shape)
        np.testing.assert_allclose(buf.values, predicted, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(buf.returns, buf.advantages + buf.values, rtol=1e-6,
                                   atol=1e-5)
        fits.append(result)
        return result

    critic.fit = recording_fit
    venv = DummyVecEnv([_Drift])
    model = _ppo_class(sb3, critic, cfg.critic_warmup)("MlpPolicy", venv, n_steps=256,
                                                        batch_size=64, n_epochs=2, seed=0,
                                                        device="cpu")
    critic.attach(model.policy)
    model.set_logger(silent_logger())
    model.learn(total_timesteps=3 * 256)
    actors.append([p.detach().clone() for p in model.policy.action_net.parameters()])
    assert len(fits) == 3
    for result in fits:
        assert result["explained_variance_after"] > result["explained_variance_before"], fits
    # out of sample (the critic of the updates before, on a new rollout): from nothing to most
    assert fits[0]["explained_variance_before"] < 0.3, fits
    assert fits[-1]["explained_variance_before"] > 0.9, fits
    same = [all(torch.equal(a, b) for a, b in zip(x, y, strict=True))
            for x, y in zip(actors, actors[1:])]
    assert same == [True, False, False], same     # update 1 warms up, 2 and 3 train the actor


def test_demo_regularizer_trains_the_actor_on_the_bc_trainers_own_batches(bc_run):
    """The regularizer's minibatches are the BC trainer's: with the actor equal to the BC
    network its loss is the BC loss of the same rows; from perturbed weights its steps bring
    the loss back down."""
    import types

    import torch
    from torch import nn

    from clawgym_ros.training.bc import _to_tensors
    from clawgym_ros.training.checkpoint import load_checkpoint
    from clawgym_ros.training.policies import TensorBatch
    from clawgym_ros.training.rl import DemoRegularizer, FinetuneConfig, mlp_linears

    root, base_id = bc_run
    store = ArtifactStore(root)
    base = load_checkpoint(store, base_id)
    cfg = FinetuneConfig(base_checkpoint=base_id, steps=1, seed=0, mode="direct", bc_steps=1,
                         bc_batch_size=64, bc_lr=1e-3)
    reg = DemoRegularizer(store, base, cfg)
    bc = base.build_model()
    linears = [nn.Linear(m.in_features, m.out_features) for m in mlp_linears(bc)]
    with torch.no_grad():
        for mine, theirs in zip(linears, mlp_linears(bc), strict=True):
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    layers = [m for lin in linears[:-1] for m in (lin, nn.ReLU())]
    net = nn.Sequential(*layers)
    actor = types.SimpleNamespace(
        mlp_extractor=types.SimpleNamespace(policy_net=net, forward_actor=net),
        action_net=linears[-1])
    reg.attach(actor)
    # the batch the first step will draw, drawn on a copy of the generator
    peek = torch.Generator().manual_seed(cfg.seed + 7919)
    batch = reg.sampler.gather(*reg.sampler.train.locate(reg.sampler.draw(64, peek)))
    obs, target, group, image = _to_tensors(batch, bc)
    with torch.no_grad():
        expected = float(bc.loss(TensorBatch(obs, target, group, image))[0].mean())
    assert reg.step() == pytest.approx(expected, rel=1e-5)
    with torch.no_grad():
        for lin in linears:
            lin.weight.add_(0.2 * torch.randn(lin.weight.shape,
                                              generator=torch.Generator().manual_seed(1)))
    cfg20 = FinetuneConfig(base_checkpoint=base_id, steps=1, seed=0, mode="direct",
                           bc_steps=20, bc_batch_size=64, bc_lr=1e-3)
    reg.cfg = cfg20
    first = reg.step()
    for _ in range(4):
        last = reg.step()
    assert last < 0.5 * first, (first, last)


def test_direct_finetune_with_critic_fit_is_reproducible_and_warm_up_keeps_the_bc_actor(
        bc_run, capsys):
    """Same options, same id; with every update a warm-up one the committed network is the
    BC parent's, weight for weight, and without warm-up it is not."""
    import torch

    from clawgym_ros.training.checkpoint import load_checkpoint
    from clawgym_ros.training.rl import mlp_linears

    root, base_id = bc_run
    fit = ("--rl-option", "mode=direct", "--rl-option", "value_epochs=2",
           "--rl-option", "critic_warmup=0")
    code, trained, err = _finetune(capsys, root, base_id, *fit)
    assert code == 0, err
    code2, again, _ = _finetune(capsys, root, base_id, *fit)
    # a warm-up longer than the run can hold even at the shortest rollouts (2 chunks): every
    # update is a warm-up one
    code3, warm, _ = _finetune(capsys, root, base_id, *fit, "--rl-option", "critic_warmup=100")
    assert code2 == code3 == 0 and again == trained != warm
    store = ArtifactStore(root)
    bc = mlp_linears(load_checkpoint(store, base_id).build_model())

    def same_as_bc(cid):
        net = mlp_linears(load_checkpoint(store, cid).build_model())
        return all(torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
                   for a, b in zip(net, bc, strict=True))

    # the demonstration regularizer's steps wait for the actor's first PPO update too
    code4, warm_bc, _ = _finetune(capsys, root, base_id, *fit, "--rl-option",
                                  "critic_warmup=100", "--rl-option", "bc_steps=2")
    assert code4 == 0
    assert same_as_bc(warm) and same_as_bc(warm_bc) and not same_as_bc(trained)
    assert store.resolve(warm, C.KIND_CHECKPOINT).manifest.config["critic_warmup"] == 100


@pytest.mark.parametrize(("option", "key", "value"), [
    ("bc_steps=3", "bc_steps", 3), ("exploration=chunk", "exploration", "chunk")])
def test_direct_finetune_option_is_reproducible(bc_run, capsys, option, key, value):
    """The demonstration regularizer, chunk-shared exploration: same options, same id; another
    id than without the option; the option in the checkpoint's config, the BC parent its
    lineage."""
    root, base_id = bc_run
    opts = ("--rl-option", "mode=direct", "--rl-option", option)
    code, out, err = _finetune(capsys, root, base_id, *opts)
    assert code == 0, err
    code2, again, _ = _finetune(capsys, root, base_id, *opts)
    code3, plain, _ = _finetune(capsys, root, base_id, "--rl-option", "mode=direct")
    assert code2 == code3 == 0 and again == out != plain
    art = ArtifactStore(root).resolve(out, C.KIND_CHECKPOINT)
    assert art.manifest.config[key] == value and art.manifest.parents == [base_id]


@pytest.mark.parametrize("relative_base", ["observation", "command"])
def test_direct_env_with_the_bc_prediction_acts_exactly_like_the_bc_policy(
        relative_base, request):
    """Direct mode's env executes a normalized chunk as the BC policy executes its own: fed
    the BC network's prediction, it reaches the same states step for step (a command-relative
    policy rebased on the last action sent, as TorchPolicy does)."""
    import torch

    from clawgym_ros.tasks.pick_place import PickPlaceEnv
    from clawgym_ros.training.checkpoint import load_policy
    from clawgym_ros.training.policies import flatten_obs
    from clawgym_ros.training.rl import DirectEnv, FinetuneConfig

    root, base_id = request.getfixturevalue(
        "bc_command" if relative_base == "command" else "bc_run")
    env = DirectEnv(root, FinetuneConfig(base_checkpoint=base_id, steps=1, seed=0,
                                         mode="direct", max_episode_steps=60))
    base = load_policy(ArtifactStore(root), base_id)
    assert env.action_space.shape == (base.model.spec.chunk * base.model.spec.act_dim,)
    plain = PickPlaceEnv()
    obs, _ = env.reset(seed=11)
    plain_obs, _ = plain.reset(seed=11)
    base.reset()
    for _ in range(4):                  # 4 chunks of 5 control steps
        with torch.inference_mode():
            action = base.model(torch.from_numpy(obs).unsqueeze(0))[0].reshape(-1).numpy()
        obs, _, _, _, info = env.step(action)
        assert info["control_steps"] == base.model.spec.chunk
        for _ in range(info["control_steps"]):
            plain_obs, *_ = plain.step(base.act(plain_obs))
        state = torch.from_numpy(flatten_obs(plain_obs, base.obs_spec)).unsqueeze(0)
        with torch.inference_mode():
            expected = base.model.normalize_obs(state)[0].numpy()
        np.testing.assert_allclose(obs, expected, rtol=0, atol=1e-6)
    env.close()
    plain.close()


def test_direct_finetune_commits_the_bc_policy_type_with_lineage(bc_run, capsys):
    """``mode=direct``: a checkpoint of the BC policy's own type and spec (so `clawgym eval`
    and policy_node run it as any BC checkpoint), parent = the BC checkpoint; same seed and
    workers, same id; PPO's actor started at the BC network and the trained weights came back
    into it (a learning rate of 1e-8 leaves them at the BC weights, the default moves them)."""
    from clawgym_ros.evaluation.rollout_check import run_episodes
    from clawgym_ros.tasks.pick_place import PickPlaceEnv
    from clawgym_ros.training.checkpoint import load_checkpoint, load_policy

    root, base_id = bc_run
    direct = ("--rl-option", "mode=direct")
    code, out, err = _finetune(capsys, root, base_id, *direct)
    assert code == 0, err
    store = ArtifactStore(root)
    art = store.resolve(out, C.KIND_CHECKPOINT)
    assert art.manifest.parents == [base_id]
    assert art.manifest.config["mode"] == "direct"
    assert art.manifest.summary["step"] >= 256          # simulated control steps
    code2, out2, _ = _finetune(capsys, root, base_id, *direct)
    assert code2 == 0 and out2 == out
    code3, residual, _ = _finetune(capsys, root, base_id, "--rl-option", "mode=residual")
    assert code3 == 0 and residual != out
    base, tuned = load_checkpoint(store, base_id), load_checkpoint(store, out)
    assert tuned.spec == base.spec and tuned.meta["init_checkpoint"] == base_id
    code4, still, _ = _finetune(capsys, root, base_id, *direct, "--rl-option", "lr=1.0e-8")
    assert code4 == 0
    kept = load_checkpoint(store, still)
    moved = max(float((tuned.weights[k] - w).abs().max()) for k, w in base.weights.items())
    stayed = max(float((kept.weights[k] - w).abs().max()) for k, w in base.weights.items())
    assert stayed < 1e-6 < moved, (stayed, moved)      # lr 1e-8 vs the default 3e-6
    policy = load_policy(store, out)
    outcome = run_episodes(policy, [7_000_000], env=PickPlaceEnv(), max_steps=30)
    assert outcome[0].steps == 30


def test_command_relative_checkpoint_fine_tunes_in_direct_mode_only(bc_command, capsys):
    root, base_id = bc_command
    code, out, _ = _finetune(capsys, root, base_id, "--rl-option", "mode=direct")
    assert code == 0
    tuned = ArtifactStore(root).resolve(out, C.KIND_CHECKPOINT)
    assert tuned.manifest.parents == [base_id]
    code, out, err = _finetune(capsys, root, base_id, "--rl-option", "mode=residual")
    # residual: one line, exit 2
    assert code == 2 and out == "" and "mode=direct" in err and err.count("\n") == 1


def test_reward_terms_reward_the_expert_over_random_and_stalled_actions(bc_run):
    """The shaped reward favours task progress: over 120 steps of the same episode, the BC
    policy's (trained on expert demonstrations) return beats a stalled arm's and random
    corrections' on the residual env."""
    from clawgym_ros.training.rl import FinetuneConfig, ResidualEnv

    root, base_id = bc_run
    cfg = FinetuneConfig(base_checkpoint=base_id, steps=1, seed=0, max_episode_steps=120)
    env = ResidualEnv(root, cfg)
    returns = {}
    rng = np.random.default_rng(0)
    for name in ("bc", "random"):
        env.reset(seed=5)
        total, done = 0.0, False
        while not done:
            shape = env.action_space.shape
            action = np.zeros(shape, np.float32) if name == "bc" else \
                rng.uniform(-1, 1, shape).astype(np.float32)
            _, reward, terminated, truncated, info = env.step(action)
            total += reward
            done = terminated or truncated
        returns[name] = total
        assert set(info["reward_terms"]) == set(TERMS)
    env.close()
    assert returns["bc"] > returns["random"], returns


@pytest.mark.parametrize("case", ["no_from", "dataset_too", "unknown_option", "bad_value",
                                  "layout", "residual_parent", "unknown_task",
                                  "undeclared_reward_term", "unknown_mode", "direct_cnn",
                                  "bc_residual", "bc_no_datasets", "warmup_without_fit",
                                  "chunk_residual"])
def test_finetune_bad_input_is_one_line_and_commits_nothing(bc_run, case, capsys, syn_run):
    root, base_id = bc_run
    store = ArtifactStore(root)
    before = len(store.list(C.KIND_CHECKPOINT))
    args = ["train", "--finetune", "rl", "--steps", "256", "--seed", "0", "--out", str(root)]
    expect = ""
    if case == "no_from":
        expect = "--from"
    elif case == "dataset_too":
        args += ["--from", base_id[:12], "--dataset", "abcdef12"]
        expect = "--dataset"
    elif case == "unknown_option":
        args += ["--from", base_id[:12], "--rl-option", "warp=9"]
        expect = "warp"
    elif case == "bad_value":
        args += ["--from", base_id[:12], "--rl-option", "gamma=2"]
        expect = "gamma"
    elif case == "undeclared_reward_term":
        args += ["--from", base_id[:12], "--rl-option", "reward_weights={smile: 1}"]
        expect = "reward_weights.smile"
    elif case == "unknown_mode":
        args += ["--from", base_id[:12], "--rl-option", "mode=both"]
        expect = "mode='both'"
    elif case == "direct_cnn":
        # A policy whose network reads images: PPO's actor cannot take it over.
        from clawgym_ros.training.bc import train
        from clawgym_ros.training.config import TrainConfig
        from clawgym_ros.training.synthetic import synthetic_table

        table = synthetic_table(root / "img_table", rows=200, episode_len=50, groups=1,
                                seed=0, image_size=24)
        cnn = train(table, TrainConfig(steps=2, seed=0, batch_size=16, policy=C.POLICY_CNN),
                    store, dataset_ids=[], tensorboard=False).checkpoint_id
        before = len(store.list(C.KIND_CHECKPOINT))
        args += ["--from", cnn[:12]]                # direct, the default mode
        expect = "is a cnn policy"
    elif case == "bc_residual":
        args += ["--from", base_id[:12], "--rl-option", "mode=residual", "--rl-option",
                 "bc_steps=5"]
        expect = "bc_steps=5"
    elif case == "bc_no_datasets":
        # the demonstration regularizer needs the parent's datasets: one trained on a table
        # given without dataset ids names none
        from clawgym_ros.training.bc import train
        from clawgym_ros.training.config import TrainConfig
        from clawgym_ros.training.data import open_training_table

        dataset_ids = list(store.get(base_id).manifest.parents)
        bare = train(open_training_table(store, dataset_ids),
                     TrainConfig(steps=2, seed=1, batch_size=16, chunk=5), store,
                     dataset_ids=[], tensorboard=False).checkpoint_id
        before = len(store.list(C.KIND_CHECKPOINT))
        args += ["--from", bare[:12], "--rl-option", "mode=direct", "--rl-option", "bc_steps=2"]
        expect = "names no datasets"
    elif case == "warmup_without_fit":
        args += ["--from", base_id[:12], "--rl-option", "value_epochs=0", "--rl-option",
                 "critic_warmup=3"]
        expect = "critic_warmup=3"
    elif case == "chunk_residual":
        args += ["--from", base_id[:12], "--rl-option", "mode=residual", "--rl-option",
                 "exploration=chunk"]
        expect = "exploration='chunk'"
    elif case == "unknown_task":
        args += ["--from", base_id[:12], "--task", "juggling"]
        expect = "juggling"
    elif case == "layout":
        # A checkpoint trained on a synthetic table (other object count, no goal).
        syn_root, dataset = syn_run
        assert main(["train", "--dataset", dataset[:12], "--steps", "5", "--seed", "0",
                     "--out", str(syn_root), "--batch-size", "16"]) == 0
        syn_id = capsys.readouterr().out.strip()
        args = ["train", "--finetune", "rl", "--from", syn_id[:12], "--steps", "256",
                "--seed", "0", "--out", str(syn_root)]
        store = ArtifactStore(syn_root)
        before = len(store.list(C.KIND_CHECKPOINT))
        expect = "does not fit task pick_place"
    elif case == "residual_parent":
        code, out, _ = _finetune(capsys, root, base_id, "--rl-option", "n_epochs=1",
                                 "--rl-option", "mode=residual")
        assert code == 0
        before = len(store.list(C.KIND_CHECKPOINT))
        args += ["--from", out[:12]]
        expect = "already RL fine-tuned"
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and expect in err, err
    assert len(store.list(C.KIND_CHECKPOINT)) == before


def test_trainer_node_finetune_goal_commits_what_the_cli_commits(bc_run, capsys, procs,
                                                                 rclpy_context, tmp_path):
    """A Train goal with ``finetune: rl`` (what the coordinator's RL lever sends) fine-tunes in
    trainer_node: same settings and seed, same checkpoint id as `clawgym train --finetune rl`;
    feedback per rollout; a goal naming an unknown task is aborted with one line."""
    import json

    from action_msgs.msg import GoalStatus

    from clawgym_interfaces.action import Train
    from test.conftest import read_logs, spin_until, trainer_action

    root, base_id = bc_run
    code, expected, err = _finetune(capsys, root, base_id)
    assert code == 0, err
    options = {k: float(v) if "." in v else int(v)
               for k, v in (opt.split("=") for opt in SMALL[1::2])}
    with trainer_action(procs, rclpy_context, tmp_path, "finetune_client") as (executor,
                                                                               action):
        def send(task: str, feedback: list):
            goal = Train.Goal(steps=256, seed=0, init_checkpoint_id=base_id[:12],
                              run_dir=str(root), finetune="rl", task=task, workers=1,
                              finetune_options_json=json.dumps(options))
            sent = action.send_goal_async(goal, feedback_callback=feedback.append)
            assert spin_until(executor, sent.done, 10.0)
            result = sent.result().get_result_async()
            assert spin_until(executor, result.done, 120.0), read_logs(tmp_path)
            return result.result()

        feedback: list = []
        response = send(C.TASK_PICK_PLACE, feedback)
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.message
        assert response.result.checkpoint_id == expected
        # one per rollout (direct, the default: 3 rollouts of 18 five-step chunks, shortened
        # so that the 256 steps hold the critic's two warm-up updates and one of the actor)
        assert [f.feedback.step for f in feedback] == [90, 180, 270]
        response = send("juggling", [])
        assert response.status == GoalStatus.STATUS_ABORTED
        assert "juggling" in response.result.message and "\n" not in response.result.message


#: The RL acceptance recipe (issue 22, docs/results/2026-12-05-rl-strong-bc.md): <= 500
#: time-optimal expert demonstrations, BC at the demo's recipe, then direct PPO on the BC network.
RL_ACCEPT_DEMOS = 500
RL_ACCEPT_BC_STEPS = 12000
RL_ACCEPT_RL_STEPS = 100_000
RL_ACCEPT_EVAL_SEEDS = range(7_000_000, 7_000_060)
#: episode limit of the held-out evaluation per task (pick_place: the BC acceptance's 800;
#: peg_insert: the task's own 1,500)
RL_ACCEPT_MAX_STEPS = {C.TASK_PICK_PLACE: 800, C.TASK_PEG_INSERT: 1500}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(os.environ.get("CLAWGYM_ACCEPTANCE") != "1",
                    reason="opt-in (CLAWGYM_ACCEPTANCE=1): synthesis, BC training and 100,000 "
                           "RL steps, ~10 min per task on 2 cores")
@pytest.mark.parametrize("task", [C.TASK_PICK_PLACE, C.TASK_PEG_INSERT])
def test_rl_acceptance_direct_finetuning_from_a_strong_bc_start(task, tmp_path, capsys):
    """Issue 22's RL bar, measured end to end through the CLI: from a BC checkpoint trained on
    500 time-optimal expert demonstrations (`clawgym synth --option timing=optimal --option
    acceleration_scale=2`, 12,000 BC steps), 100,000 simulated steps of direct PPO
    (`--rl-option mode=direct`, 1 worker, <= 30 min) must raise held-out nominal success by
    >= 0.15 or to >= 0.95 (60 episodes, seeds 7,000,000-7,000,059).

    Last measured (docs/results/2026-12-05-rl-strong-bc.md, seed 0, loaded 2-core machine):
    pick_place BC 52/60 -> RL 56/60 (+0.067, 0.93): the bar is NOT met; peg_insert BC 0/60 ->
    RL 0/60: NOT met. This test asserts the issue's bar as written and fails until a recipe
    meets it.
    """
    import time

    from clawgym_ros.evaluation.rollout_check import run_episodes
    from clawgym_ros.tasks.registry import task_entry
    from clawgym_ros.tasks.replay import env_class
    from clawgym_ros.training.checkpoint import load_policy

    run = str(tmp_path / "run")
    assert main(["synth", "--task", task, "--episodes", str(RL_ACCEPT_DEMOS), "--seed", "21",
                 "--workers", "2", "--out", run, "--option", "timing=optimal",
                 "--option", "acceleration_scale=2"]) == 0
    dataset = capsys.readouterr().out.split()[0]
    assert main(["train", "--dataset", dataset[:12], "--steps", str(RL_ACCEPT_BC_STEPS),
                 "--seed", "0", "--out", run]) == 0
    bc = capsys.readouterr().out.strip().splitlines()[-1]
    start = time.monotonic()
    assert main(["train", "--finetune", "rl", "--task", task, "--from", bc[:12],
                 "--steps", str(RL_ACCEPT_RL_STEPS), "--seed", "0", "--out", run,
                 "--workers", "1", "--rl-option", "mode=direct",
                 "--rl-option", f"max_episode_steps={RL_ACCEPT_MAX_STEPS[task]}"]) == 0
    rl_wall = time.monotonic() - start
    rl = capsys.readouterr().out.strip().splitlines()[-1]
    store = ArtifactStore(run)
    env = env_class(task_entry(task).env_id)()
    rates = {}
    for name, checkpoint in (("bc", bc), ("rl", rl)):
        outcome = run_episodes(load_policy(store, checkpoint[:12]), RL_ACCEPT_EVAL_SEEDS,
                               env=env, max_steps=RL_ACCEPT_MAX_STEPS[task])
        rates[name] = sum(o.success for o in outcome) / len(outcome)
    print(task, rates, f"rl wall {rl_wall:.0f} s")
    assert rl_wall <= 30 * 60
    assert rates["rl"] - rates["bc"] >= 0.15 or rates["rl"] >= 0.95, rates
