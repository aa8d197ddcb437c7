"""Behaviour cloning: group weights, determinism, freezing, resume, checkpoints, policies."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.errors import CheckpointError, ConfigError  # noqa: E402
from clawgym_ros.evaluation.protocol import Policy  # noqa: E402
from clawgym_ros.training.bc import train  # noqa: E402
from clawgym_ros.training.checkpoint import (  # noqa: E402
    complete_steps,
    load_checkpoint,
    load_policy,
)
from clawgym_ros.training.config import TrainConfig  # noqa: E402
from clawgym_ros.training.data import TableSampler  # noqa: E402
from clawgym_ros.training.hardening import (  # noqa: E402
    hardening_layout,
    perturb_observations,
    perturb_sensor_noise,
    sensor_noise_std,
)
from clawgym_ros.training.policies import PolicySpec, build_policy, parameter_groups  # noqa: E402
from clawgym_ros.training.synthetic import ACTION_SPEC, OBS_SPEC, synthetic_table  # noqa: E402

#: Small and fast, but real: a few hundred optimizer steps on a few thousand rows. The synthetic
#: table pairs each row's observation with that row's action (a map per group, no episodes'
#: time structure), so the recipe settings meant for recorded episodes are off here: no action
#: shift, no excluded keys, absolute targets, no derived features.
SMALL = dict(hidden=(32, 32), chunk=1, batch_size=64, log_interval=10, val_interval=20,
             checkpoint_interval=20, val_samples=512, action_shift=0, exclude_obs_keys=(),
             action_mode=C.ACTION_MODE_ABSOLUTE, features=())


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return synthetic_table(tmp_path_factory.mktemp("table"), rows=6000, episode_len=50,
                           groups=3, seed=1)


def _weights(store: ArtifactStore, checkpoint_id: str) -> dict[str, torch.Tensor]:
    return load_checkpoint(store, checkpoint_id).weights


def test_weighted_group_loss_falls_faster_than_with_uniform_weights(table, tmp_path):
    favoured = table.group_names[0]
    results = {}
    for name, weights in (("uniform", {}), ("weighted", {favoured: 10.0})):
        # Constant lr: the effect of the weights alone (a cosine schedule shrinks late steps).
        cfg = TrainConfig(steps=200, seed=0, group_weights=weights, lr_schedule="constant",
                          **SMALL)
        results[name] = train(table, cfg, ArtifactStore(tmp_path / name), dataset_ids=[],
                              tensorboard=False)
    uniform, weighted = results["uniform"], results["weighted"]
    assert weighted.group_losses[favoured] < 0.8 * uniform.group_losses[favoured]
    # The price is paid by the other groups: the weighting really moved capacity.
    others = [g for g in table.group_names if g != favoured]
    assert sum(weighted.group_losses[g] for g in others) > \
        sum(uniform.group_losses[g] for g in others)
    summary = json.loads((weighted.artifact.path / C.FILE_TRAIN_SUMMARY).read_text())
    assert summary["group_weights"] == {favoured: 10.0}
    first = summary["history"][0]["group_losses"][favoured]
    assert summary["history"][-1]["group_losses"][favoured] < first


def test_same_seed_same_table_gives_bitwise_identical_weights(table, tmp_path):
    cfg = TrainConfig(steps=60, seed=5, hardening_share=0.5, **SMALL)
    a = train(table, cfg, ArtifactStore(tmp_path / "a"), dataset_ids=[], tensorboard=False)
    b = train(table, cfg, ArtifactStore(tmp_path / "b"), dataset_ids=[], tensorboard=False)
    c = train(table, dataclasses.replace(cfg, seed=6), ArtifactStore(tmp_path / "c"),
              dataset_ids=[], tensorboard=False)
    wa, wb, wc = (_weights(ArtifactStore(tmp_path / n), r.checkpoint_id)
                  for n, r in (("a", a), ("b", b), ("c", c)))
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a.checkpoint_id == b.checkpoint_id  # content-addressed: every file is identical
    assert not torch.equal(wa["head.weight"], wc["head.weight"])


def test_frozen_groups_stay_bitwise_unchanged(table, tmp_path):
    cfg = TrainConfig(steps=30, seed=2, frozen_groups=("encoder", "trunk"), **SMALL)
    store = ArtifactStore(tmp_path)
    result = train(table, cfg, store, dataset_ids=[], tensorboard=False)
    trained = _weights(store, result.checkpoint_id)
    spec = PolicySpec(type=C.POLICY_MLP, obs_dim=sum(OBS_SPEC.values()),
                      act_dim=sum(ACTION_SPEC.values()), hidden=cfg.hidden)
    initial = build_policy(spec, table.stats, seed=cfg.seed)
    groups = parameter_groups(initial)
    assert {name.split(".")[0] for g in groups.values() for name, _ in g} == \
        {"encoder", "trunk", "head"}
    for group in ("encoder", "trunk"):
        for name, param in groups[group]:
            assert torch.equal(trained[name], param.detach()), name
    for name, param in groups["head"]:
        assert not torch.equal(trained[name], param.detach()), name
    with pytest.raises(ConfigError, match="frozen_groups"):
        TrainConfig(frozen_groups=("encoder", "wheels"))
    with pytest.raises(ConfigError, match="at least one group trainable"):
        train(table, TrainConfig(steps=5, frozen_groups=("encoder", "trunk", "head"), **SMALL),
              store, dataset_ids=[], tensorboard=False)


def test_resume_continues_to_the_uninterrupted_result(table, tmp_path):
    cfg = TrainConfig(steps=70, seed=3, hardening_share=0.25, **SMALL)
    full = train(table, cfg, ArtifactStore(tmp_path / "full"), dataset_ids=[])

    # Cancelled at step 30: a resume point is written at the cancel step, nothing published.
    store = ArtifactStore(tmp_path / "cancel")
    cancelled = train(table, cfg, store, dataset_ids=[], should_stop=lambda step: step >= 30)
    assert cancelled.cancelled and cancelled.checkpoint_id is None and cancelled.step == 30
    assert store.list(C.KIND_CHECKPOINT) == []
    resumed = train(table, cfg, store, dataset_ids=[])
    assert resumed.resumed_from == 30
    full_w, resumed_w = _weights(ArtifactStore(tmp_path / "full"), full.checkpoint_id), \
        _weights(store, resumed.checkpoint_id)
    assert all(torch.equal(full_w[k], resumed_w[k]) for k in full_w)
    assert resumed.checkpoint_id == full.checkpoint_id

    # Crashed at step 50: the newest step folder is 40 (checkpoint_interval 20).
    store = ArtifactStore(tmp_path / "crash")

    def crash(step: int) -> bool:
        if step >= 50:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        train(table, cfg, store, dataset_ids=[], should_stop=crash)
    resumed = train(table, cfg, store, dataset_ids=[])
    assert resumed.resumed_from == 40
    assert resumed.checkpoint_id == full.checkpoint_id
    assert list((tmp_path / "crash" / C.DIR_LOGS / C.DIR_TENSORBOARD).iterdir())


def test_checkpoint_tree_and_refusals(table, tmp_path):
    store = ArtifactStore(tmp_path)
    cfg = TrainConfig(steps=40, seed=0, **SMALL)
    result = train(table, cfg, store, dataset_ids=[], tensorboard=False)
    art = result.artifact
    assert (art.path / C.FILE_LAST).read_text().strip() == "40"
    # The final step only (resume points are not results); the work folder keeps just it.
    assert sorted(p.name for p in art.path.iterdir()) == sorted(
        ["40", C.FILE_LAST, C.FILE_TRAIN_SUMMARY, C.FILE_MANIFEST])
    assert complete_steps(result.work_dir) == [40]
    again = train(table, cfg, store, dataset_ids=[], tensorboard=False)
    assert again.checkpoint_id == result.checkpoint_id and again.resumed_from == 40
    files = {p.name for p in (art.path / "40").iterdir()}
    assert files == {C.FILE_MODEL, C.FILE_CHECKPOINT_CONFIG, C.FILE_TRAINING_STATE,
                     C.FILE_TRAINING_STATE_JSON}
    meta = json.loads((art.path / "40" / C.FILE_CHECKPOINT_CONFIG).read_text())
    assert meta["obs_spec"] == [[k, v] for k, v in OBS_SPEC.items()]
    assert meta["train_config"]["seed"] == 0 and meta["group_names"] == table.group_names
    assert art.manifest.seeds == {"train": 0}

    policy = load_policy(store, result.checkpoint_id, expected_obs_spec=OBS_SPEC,
                         expected_action_spec=ACTION_SPEC)
    assert isinstance(policy, Policy)

    # Mismatched observation layout (same keys, another order) -> refused, naming both.
    reordered = dict(reversed(list(OBS_SPEC.items())))
    with pytest.raises(CheckpointError, match="observation spec") as err:
        load_policy(store, result.checkpoint_id, expected_obs_spec=reordered)
    assert "tool_pose:7" in str(err.value)

    # Tampered weights (same size, one byte flipped) -> refused before any tensor is read.
    model = art.path / "40" / C.FILE_MODEL
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="refused.*40/model.safetensors.*modified"):
        load_policy(store, result.checkpoint_id)


def test_warm_start_and_group_weight_validation(table, tmp_path):
    store = ArtifactStore(tmp_path)
    base = train(table, TrainConfig(steps=20, seed=0, **SMALL), store, dataset_ids=[],
                 tensorboard=False)
    warm = train(table, TrainConfig(steps=20, seed=1, hidden=(8,), **{
        k: v for k, v in SMALL.items() if k != "hidden"}), store, dataset_ids=[],
        init_checkpoint=base.checkpoint_id[:12], tensorboard=False)
    assert warm.artifact.manifest.parents == [base.checkpoint_id]
    assert warm.artifact.manifest.config["hidden"] == [32, 32]  # the checkpoint's spec wins
    assert warm.val_loss < base.val_loss
    with pytest.raises(ConfigError, match="group_weights.nope"):
        train(table, TrainConfig(steps=5, group_weights={"nope": 1.0}, **SMALL), store,
              dataset_ids=[])
    with pytest.raises(ConfigError, match="group_weights"):
        TrainConfig(group_weights={table.group_names[0]: -1.0})
    zero = {g: 0.0 for g in table.group_names}
    with pytest.raises(ConfigError, match="weight > 0"):
        train(table, TrainConfig(steps=5, group_weights=zero, **SMALL), store, dataset_ids=[])


def test_sampler_splits_by_episode_and_chunks_within_episodes(table):
    sampler = TableSampler(table, val_fraction=0.2, chunk=4, seed=0, resident_budget_mb=64,
                           batch_size=32)
    episodes = np.asarray(table.episode)
    train_eps = {int(e) for s, t in zip(sampler.train.starts, sampler.train.ends)
                 for e in np.unique(episodes[s:t])}
    val_eps = {int(e) for s, t in zip(sampler.val.starts, sampler.val.ends)
               for e in np.unique(episodes[s:t])}
    assert train_eps and val_eps and not train_eps & val_eps
    assert len(val_eps) == round(0.2 * len(train_eps | val_eps))
    batch = sampler.sample(256, torch.Generator().manual_seed(0))
    assert batch.action.shape == (256, 4, sum(ACTION_SPEC.values()))
    # The last row of an episode repeats its action for the rest of the chunk.
    end = int(sampler.train.ends[0]) - 1
    chunk = sampler.gather(np.array([end]), np.array([end + 1])).action[0]
    assert np.array_equal(chunk[0], chunk[3]) and np.array_equal(chunk[0], table.action[end])
    chunk = sampler.gather(np.array([end - 3]), np.array([end + 1])).action[0]
    assert np.array_equal(chunk, np.asarray(table.action[end - 3:end + 1]))


def test_hardening_perturbs_only_the_share_and_the_keys():
    obs_spec = {C.OBS_JOINT_POS: 3, C.OBS_TOOL_POSE: 2, C.OBS_OBJECT_POSES: 2}
    layout = hardening_layout(obs_spec, [C.OBS_JOINT_POS, C.OBS_OBJECT_POSES])
    obs = torch.zeros(8, 7)
    out = perturb_observations(obs, 3, layout, 0.1, 0.5, torch.Generator().manual_seed(0))
    again = perturb_observations(obs, 3, layout, 0.1, 0.5, torch.Generator().manual_seed(0))
    assert torch.equal(out, again) and torch.equal(obs, torch.zeros(8, 7))
    assert torch.count_nonzero(out[3:]) == 0 and torch.count_nonzero(out[:, 3:5]) == 0
    assert torch.count_nonzero(out[:3, :3]) == 9 and torch.count_nonzero(out[:3, 5:]) == 6


def test_sensor_noise_hardening_uses_the_evaluation_noise_in_physical_units():
    import math

    from clawgym_ros.perturbations.sensor_noise import SensorNoiseConfig

    noise = SensorNoiseConfig()
    obs_spec = {C.OBS_JOINT_POS: 2, C.OBS_TOOL_POSE: 2, C.OBS_OBJECT_POSES: 14,
                C.OBS_JOINT_VEL: 2}
    keys = (C.OBS_JOINT_POS, C.OBS_OBJECT_POSES, C.OBS_JOINT_VEL)
    std = sensor_noise_std(obs_spec, keys, horizon_s=8.0)
    # joint: sample std and a bias walk over 8 s (rms sqrt(8 / 2) = 2 walk units)
    joint = math.hypot(noise.joint_pos_std, 2.0 * noise.joint_pos_bias_walk)
    position = math.hypot(noise.pose_position_std, 2.0 * noise.pose_position_bias_walk)
    pose = [position] * 3 + [noise.pose_orientation_std / 2.0] * 4
    expected = [joint] * 2 + [0.0, 0.0] + pose * 2 + [noise.joint_vel_std] * 2
    assert std.tolist() == pytest.approx(expected)
    assert sensor_noise_std(obs_spec, (C.OBS_JOINT_POS,), 8.0)[2:].abs().sum() == 0

    obs = torch.ones(4000, std.numel())
    out = perturb_sensor_noise(obs, 3000, std, 0.3, torch.Generator().manual_seed(0))
    again = perturb_sensor_noise(obs, 3000, std, 0.3, torch.Generator().manual_seed(0))
    assert torch.equal(out, again) and torch.equal(obs, torch.ones_like(obs))
    assert torch.equal(out[3000:], obs[3000:]) and torch.equal(out[:, 2:4], obs[:, 2:4])
    # Row intensities ~ U[0, 0.3]: the noise std is std * sqrt(E[i^2]) = std * 0.3 / sqrt(3).
    measured = (out[:3000] - 1.0).std(dim=0)
    assert measured[0].item() == pytest.approx(joint * 0.3 / math.sqrt(3), rel=0.1)
    assert perturb_sensor_noise(obs, 3000, std, 0.0, torch.Generator()) is obs
    with pytest.raises(ConfigError, match="hardening_noise"):
        TrainConfig(hardening_noise="pink")


def test_torch_policy_executes_action_chunks_from_a_queue(table, tmp_path):
    store = ArtifactStore(tmp_path)
    result = train(table, TrainConfig(steps=20, seed=0, **{**SMALL, "chunk": 4}), store,
                   dataset_ids=[], tensorboard=False)
    policy = load_policy(store, result.checkpoint_id)
    calls = []
    policy.model.register_forward_hook(lambda *_: calls.append(1))
    obs = {k: np.zeros(w) for k, w in OBS_SPEC.items()}
    actions = [policy.act(obs) for _ in range(6)]
    assert len(calls) == 2  # 4 actions per network call
    assert set(actions[0]) == set(ACTION_SPEC)
    assert actions[0][C.ACT_JOINT_TARGET].shape == (7,)
    assert actions[0][C.ACT_GRIPPER].shape == (1,)
    policy.reset()
    policy.act(obs)
    assert len(calls) == 3
    policy.reset()
    with pytest.raises(Exception, match="lacks key"):
        policy.act({C.OBS_JOINT_POS: np.zeros(7)})


def test_cnn_policy_trains_on_images(tmp_path):
    table = synthetic_table(tmp_path / "img", rows=600, episode_len=50, groups=2, seed=0,
                            image_size=24)
    store = ArtifactStore(tmp_path / "run")
    result = train(table, TrainConfig(steps=10, seed=0, policy=C.POLICY_CNN, **SMALL), store,
                   dataset_ids=[], tensorboard=False)
    policy = load_policy(store, result.checkpoint_id)
    obs = {k: np.zeros(w) for k, w in OBS_SPEC.items()}
    obs[C.OBS_IMAGE] = np.zeros((24, 24, 3), np.uint8)
    assert policy.act(obs)[C.ACT_JOINT_TARGET].shape == (7,)
    assert any(k.startswith("encoder.convs") for k in policy.model.state_dict())
    with pytest.raises(Exception, match="needs camera images"):
        train(synthetic_table(tmp_path / "noimg", rows=200, seed=0),
              TrainConfig(steps=2, policy=C.POLICY_CNN, **SMALL), store, dataset_ids=[])


def test_early_stopping_and_tensorboard_scalars(table, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # Any decrease smaller than min_delta is no improvement: the 2nd check stops the run.
    cfg = TrainConfig(steps=200, seed=0, patience=1, min_delta=10.0, **SMALL)
    store = ArtifactStore(tmp_path)
    progress = []
    result = train(table, cfg, store, dataset_ids=[], on_progress=progress.append)
    assert result.stopped_early and result.step == 2 * cfg.val_interval
    summary = json.loads((result.artifact.path / C.FILE_TRAIN_SUMMARY).read_text())
    assert summary["stopped_early"] and summary["step"] == 40 and summary["steps"] == 200
    assert (result.artifact.path / C.FILE_LAST).read_text().strip() == "40"
    assert [p.step for p in progress] == [10, 20, 30, 40]
    assert np.isnan(progress[0].val_loss) and progress[-1].val_loss > 0
    events = EventAccumulator(str(result.log_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"loss/train", "loss/val", "lr", "grad_norm"} <= tags
    assert {f"loss_group/{g}" for g in table.group_names} <= tags
    assert [e.step for e in events.Scalars("loss/train")] == [10, 20, 30, 40]
    assert all(e.value > 0 for e in events.Scalars("grad_norm"))


def test_bench_train_quick_reports_ratio_and_rss():
    from clawgym_ros.bench.train import bench_train

    result = bench_train(quick=True)
    assert result["samples_per_s_trainer"] > 0 and result["samples_per_s_bare"] > 0
    assert result["ratio"] == pytest.approx(
        result["samples_per_s_trainer"] / result["samples_per_s_bare"], rel=1e-2)
    assert result["cpu_us_per_step_trainer"] > 0 and result["cpu_us_per_step_bare"] > 0
    assert result["cpu_ratio"] == pytest.approx(
        result["cpu_us_per_step_bare"] / result["cpu_us_per_step_trainer"], rel=1e-2)
    assert result["vision"]["samples_per_s_trainer"] > 0   # cnn on 84x84 images
    rss = result["rss"]
    assert rss["table_10x_mb"] > 9 * rss["table_mb"]
    assert rss["peak_rss_mb"] > 0 and rss["peak_rss_10x_mb"] > 0


def _mapped_kb(path) -> int:
    """Resident kB of this process' mapping(s) of ``path`` (from /proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_sampler_keeps_the_mapped_table_within_its_budget(tmp_path):
    table = synthetic_table(tmp_path, rows=200_000, seed=0)
    obs_kb = table.obs.nbytes // 1024
    resident = {}
    for budget in (4.0, 1e6):
        sampler = TableSampler(table, val_fraction=0.1, chunk=1, seed=0,
                               resident_budget_mb=budget, batch_size=256)
        gen = torch.Generator().manual_seed(0)
        peak = 0
        for step in range(60):
            sampler.sample(256, gen)
            if step % 10 == 9:     # reading smaps costs ~0.1 s in a process with torch loaded
                peak = max(peak, _mapped_kb(tmp_path / "obs.npy"))
        resident[budget] = peak
    # Without releases random gathers map nearly the whole column (it only grows); with them
    # the mapping is dropped after each step (the peak within a step is measured by
    # `clawgym bench train`).
    assert resident[1e6] > 0.8 * obs_kb
    assert resident[4.0] < 0.6 * obs_kb


def test_deterministic_sets_and_restores_the_flag_without_loading_the_compiler():
    """Training turns torch's deterministic algorithms on for its duration and restores them,
    without torch.use_deterministic_algorithms' import of inductor (~1 s a process, measured);
    a fresh interpreter, since this one may have loaded it already."""
    code = ("import sys, torch\n"
            "from clawgym_ros.training.bc import deterministic\n"
            "with deterministic(1):\n"
            "    assert torch.are_deterministic_algorithms_enabled()\n"
            "    assert torch.get_num_threads() == 1\n"
            "assert not torch.are_deterministic_algorithms_enabled()\n"
            "assert 'torch._inductor.config' not in sys.modules\n"
            "import torch._inductor.config\n"
            "with deterministic(1):\n"
            "    assert torch._inductor.config.deterministic\n"
            "assert not torch._inductor.config.deterministic\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]


def test_update_step_weights_each_sample_by_its_group():
    from clawgym_ros.training.bc import TensorBatch, update_step

    spec = PolicySpec(type=C.POLICY_MLP, obs_dim=4, act_dim=2, hidden=(8,))
    policy = build_policy(spec, seed=0)
    gen = torch.Generator().manual_seed(0)
    batch = TensorBatch(obs=torch.randn(6, 4, generator=gen),
                        target=torch.randn(6, 1, 2, generator=gen),
                        group=torch.tensor([0, 0, 1, 1, 1, 2]))
    with torch.no_grad():
        per = (policy(batch.obs) - batch.target).pow(2).mean(dim=(1, 2))
    optim = torch.optim.SGD(policy.parameters(), lr=0.1)
    metrics = update_step(policy, batch, optim, group_weights=torch.tensor([0.0, 1.0, 3.0]),
                          compute_grad_norm=True)
    expected = (per[2:5].sum() + 3 * per[5]) / 6.0
    assert torch.allclose(metrics["loss"], expected)
    assert torch.allclose(metrics["group_loss_sum"], torch.stack(
        [per[:2].sum(), per[2:5].sum(), per[5]]))
    assert metrics["group_count"].tolist() == [2.0, 3.0, 1.0]
    assert metrics["grad_norm"] > 0
    # Weight 0 for a group: its samples contribute nothing to the gradient.
    only = build_policy(spec, seed=0)
    optim = torch.optim.SGD(only.parameters(), lr=0.1)
    update_step(only, TensorBatch(batch.obs[:5], batch.target[:5], batch.group[:5]), optim,
                group_weights=torch.tensor([0.0, 1.0]))
    ref = build_policy(spec, seed=0)
    optim = torch.optim.SGD(ref.parameters(), lr=0.1)
    update_step(ref, TensorBatch(batch.obs[2:5], batch.target[2:5], batch.group[2:5]), optim)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(only.parameters(),
                                                               ref.parameters()))


def test_sampler_shift_pairs_each_observation_with_the_next_action(table):
    sampler = TableSampler(table, val_fraction=0.0, chunk=3, seed=0, resident_budget_mb=64,
                           batch_size=8, shift=1, obs_columns=np.array([0, 2]))
    end = int(sampler.train.ends[0])
    batch = sampler.gather(np.array([end - 3]), np.array([end]))
    # Row t's target chunk starts at row t + 1 and repeats the episode's last action.
    assert np.array_equal(batch.action[0], np.asarray(table.action)[[end - 2, end - 1, end - 1]])
    assert np.array_equal(batch.obs[0], np.asarray(table.obs)[end - 3][[0, 2]])


def test_recipe_policy_reads_a_subset_with_features_and_delta_targets(table, tmp_path):
    """Default recipe knobs on the synthetic table: the checkpoint lists only the keys it
    reads, derived features and relative targets are inside the policy, and acting on a raw
    observation (with extra keys) gives the same action as the network on that row."""
    store = ArtifactStore(tmp_path)
    cfg = TrainConfig(steps=20, seed=0, **{**SMALL, "action_mode": C.ACTION_MODE_DELTA,
                                           "exclude_obs_keys": (C.OBS_JOINT_VEL,),
                                           "features": ("object_rel_tool", "object_yaw")})
    result = train(table, cfg, store, dataset_ids=[], tensorboard=False)
    loaded = load_checkpoint(store, result.checkpoint_id)
    assert C.OBS_JOINT_VEL not in loaded.obs_spec
    assert loaded.spec.features == ("object_rel_tool", "object_yaw")
    assert loaded.spec.relative == ((0, 0, 7),)         # joint_target vs joint_pos
    assert loaded.spec.input_dim == loaded.spec.obs_dim + 3 + 4
    policy = load_policy(store, result.checkpoint_id, expected_obs_spec=OBS_SPEC)
    with pytest.raises(CheckpointError, match="observation spec"):
        load_policy(store, result.checkpoint_id,
                    expected_obs_spec=dict(reversed(list(OBS_SPEC.items()))))
    row = np.asarray(table.obs[5])
    at = np.cumsum([0, *OBS_SPEC.values()])
    obs = {k: row[at[i]:at[i + 1]] for i, k in enumerate(OBS_SPEC)}
    action = policy.act(obs)
    model = loaded.build_model()
    raw = torch.from_numpy(np.concatenate([obs[k] for k in loaded.obs_spec]))[None].float()
    with torch.no_grad():
        expected = model.unnormalize_action(model(model.normalize_obs(raw)))[0, 0].numpy()
    assert np.allclose(action[C.ACT_JOINT_TARGET], expected[:7] + obs[C.OBS_JOINT_POS],
                       atol=1e-5)


def test_features_outside_the_batch_dependent_set_are_row_exact():
    """The trainer featurizes a window of minibatches at once where that gives the bits a
    batch at a time gives: every derived feature not in BATCH_DEPENDENT_FEATURES must be the
    same whatever rows are computed together (object_yaw's sin/cos/atan2 are not: a new
    feature like it must be listed, or windowed training would change checkpoint ids)."""
    import torch

    from clawgym_ros.training.policies import BATCH_DEPENDENT_FEATURES, FEATURES, Featurizer

    layout = ((C.OBS_TOOL_POSE, 7), (C.OBS_OBJECT_POSES, 21), (C.OBS_PLACE_GOAL, 3))
    obs = torch.from_numpy(np.random.default_rng(0).normal(size=(1000, 31)).astype(np.float32))
    cuts = (0, 1, 8, 21, 85, 256, 1000)
    exact = {}
    for name in FEATURES:
        featurizer = Featurizer((name,), layout)
        parts = torch.cat([featurizer(obs[a:b]) for a, b in zip(cuts, cuts[1:])])
        exact[name] = torch.equal(featurizer(obs), parts)
    assert {name for name, same in exact.items() if not same} <= BATCH_DEPENDENT_FEATURES
    assert not exact[next(iter(BATCH_DEPENDENT_FEATURES))]   # the check can tell
