"""Vision policies end to end in small: the cnn policy's image augmentation, the evaluator
rendering the camera a policy reads at the size it was trained on, and the refusal of any
other image size (one line, exit 2)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.errors import ClawgymError, ConfigError  # noqa: E402
from clawgym_ros.training.policies import PolicySpec, build_policy  # noqa: E402

SIZE = 24
SMALL = dict(hidden=(32, 32), chunk=1, batch_size=32, log_interval=5, val_interval=5,
             checkpoint_interval=5, val_samples=64, action_shift=0)


def _cnn(options=None, size=16):
    spec = PolicySpec(type=C.POLICY_CNN, obs_dim=4, act_dim=2, hidden=(8, 8),
                      image_shape=(size, size, 3), options=options or {})
    return build_policy(spec, seed=0)


@pytest.fixture(scope="module")
def cnn_run(tmp_path_factory):
    """A tiny cnn checkpoint trained on synthetic 24x24 images: (run dir, checkpoint id)."""
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig
    from clawgym_ros.training.synthetic import synthetic_table

    root = tmp_path_factory.mktemp("cnn")
    table = synthetic_table(root / "table", rows=200, episode_len=50, groups=1, seed=0,
                            image_size=SIZE)
    result = train(table, TrainConfig(steps=5, seed=0, policy=C.POLICY_CNN, **SMALL),
                   ArtifactStore(root / "run"), dataset_ids=[], tensorboard=False)
    return root / "run", result.checkpoint_id


def test_cnn_augmentation_shifts_and_scales_images_from_the_generator():
    rng = np.random.default_rng(0)
    image = torch.from_numpy(rng.integers(40, 200, (8, 16, 16, 3), dtype=np.uint8))
    policy = _cnn({"shift_pad": 3, "brightness": 0.0})
    out = policy.augment(image, torch.Generator().manual_seed(1))
    again = policy.augment(image, torch.Generator().manual_seed(1))
    assert out.dtype == torch.uint8 and out.shape == image.shape
    assert torch.equal(out, again)                       # reproducible from the seed
    assert not torch.equal(out, image)
    # Each image is a copy shifted by (dy, dx) in [-3, 3]^2, edge pixels repeated.
    idx = np.arange(16)
    for b in range(8):
        found = [(dy, dx) for dy in range(-3, 4) for dx in range(-3, 4)
                 if np.array_equal(out[b].numpy(), image[b].numpy()[
                     np.clip(idx + dy, 0, 15)][:, np.clip(idx + dx, 0, 15)])]
        assert found, f"image {b} is no shifted copy"
    bright = _cnn({"shift_pad": 0, "brightness": 0.3}).augment(
        image, torch.Generator().manual_seed(2))
    ratio = bright.double().mean(dim=(1, 2, 3)) / image.double().mean(dim=(1, 2, 3))
    assert ((ratio > 0.69) & (ratio < 1.31)).all() and ratio.std() > 0.01
    off = _cnn({"shift_pad": 0, "brightness": 0.0})
    assert off.augment(image, torch.Generator()) is image
    with pytest.raises(ConfigError, match="shift_pad=64.*0, 32"):
        _cnn({"shift_pad": 64})
    with pytest.raises(ConfigError,
                       match="options of the cnn policy: relative_base, shift_pad, brightness"):
        _cnn({"jitter": 1})


def test_cnn_downsample_keeps_every_nth_pixel_in_training_and_acting():
    rng = np.random.default_rng(0)
    image = torch.from_numpy(rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8))
    obs = torch.zeros(4, 4)
    policy = _cnn({"downsample": 2, "shift_pad": 0, "brightness": 0.0})
    small = policy.augment(image, torch.Generator().manual_seed(0))
    assert small.shape == (4, 8, 8, 3) and torch.equal(small, image[:, ::2, ::2])
    dropped = image.clone()
    dropped[:, 1::2] = 0
    dropped[:, :, 1::2] = 0
    full = _cnn({"shift_pad": 0, "brightness": 0.0})
    with torch.no_grad():
        # acting (full frame) and training (augmented, already downsampled) see the same pixels
        assert torch.equal(policy(obs, image), policy(obs, small))
        # only every second row and column reaches the encoder
        assert torch.equal(policy(obs, image), policy(obs, dropped))
        assert not torch.equal(full(obs, image), full(obs, dropped))
    shifted = _cnn({"downsample": 2, "shift_pad": 2, "brightness": 0.0}).augment(
        image, torch.Generator().manual_seed(1))
    assert shifted.shape == (4, 8, 8, 3)
    for bad in (0, 9):
        with pytest.raises(ConfigError, match=f"downsample={bad}.*1, 8"):
            _cnn({"downsample": bad})


def test_evaluator_renders_the_camera_at_the_trained_size_and_refuses_others(cnn_run):
    from clawgym_ros.evaluation.rollout import RolloutOptions, image_options
    from clawgym_ros.training.checkpoint import load_policy

    run_dir, ckpt = cnn_run
    policy = load_policy(ArtifactStore(run_dir), ckpt)
    options = image_options(policy, RolloutOptions(world="task"))
    assert options.cameras == (C.CAMERA_WRIST,) and options.image_size == SIZE
    assert image_options(policy, RolloutOptions(image_size=SIZE)).image_size == SIZE
    with pytest.raises(ConfigError, match=f"image_size=32.*{SIZE} \\(the size this policy"):
        image_options(policy, RolloutOptions(image_size=32))
    # A state policy: cameras as given, the default size.
    from clawgym_ros.evaluation.rollout import PolicySource

    scripted = PolicySource.parse("scripted:pick_place").load()
    assert image_options(scripted, RolloutOptions()) == RolloutOptions(image_size=84)
    # Acting on an image of another size (a camera topic at another resolution): one line.
    from clawgym_ros.training.synthetic import OBS_SPEC

    obs = {k: np.zeros(w) for k, w in OBS_SPEC.items()}
    obs[C.OBS_IMAGE] = np.zeros((32, 32, 3), np.uint8)
    with pytest.raises(ClawgymError, match=f"camera image is 32x32x3 .*trained on "
                                           f"{SIZE}x{SIZE}x3 images"):
        policy.act(obs)
    obs[C.OBS_IMAGE] = np.zeros((SIZE, SIZE, 3), np.uint8)
    assert policy.act(obs)[C.ACT_JOINT_TARGET].shape == (7,)


class _Looker:
    """A policy that reads images (declared as a checkpoint's model declares it), holds the
    arm still and keeps the images it was given."""

    uses_image = True

    def __init__(self, size: int):
        from types import SimpleNamespace

        self.model = SimpleNamespace(spec=SimpleNamespace(image_shape=(size, size, 3)))
        self.images: list[np.ndarray] = []

    def reset(self) -> None:
        pass

    def act(self, obs):
        self.images.append(np.array(obs[C.OBS_IMAGE]))
        return {C.ACT_JOINT_TARGET: np.array(obs[C.OBS_JOINT_POS]),
                C.ACT_GRIPPER: np.array([0.04])}


@pytest.mark.parametrize("family", [C.FAMILY_LIGHTING, C.FAMILY_CAMERA_POSE, C.FAMILY_COLOUR])
def test_in_process_episodes_render_the_wrist_camera_under_visual_perturbations(family):
    from clawgym_ros.evaluation.rollout import RolloutOptions, Runner
    from clawgym_ros.evaluation.suites import expand, parse_suite

    suite = parse_suite({"name": "look", "seed": 0, "episodes_per_cell": 1,
                         "tasks": [{"task": "pick_place", "templates": ["cube"]}],
                         "cells": {"nominal": True, "sweeps": [
                             {"family": family, "intensities": [1.0]}]}}, "look")
    nominal, lit = expand(suite, 0)
    lit = dataclasses.replace(lit, seed=nominal.seed)
    policy = _Looker(SIZE)
    runner = Runner(policy, RolloutOptions(world="task", max_steps=2, failure_states=False))
    try:
        runner.run(nominal)
        plain = policy.images[0]
        policy.images.clear()
        runner.run(lit)
    finally:
        runner.close()
    assert plain.shape == (SIZE, SIZE, 3) and plain.dtype == np.uint8 and plain.std() > 1
    # Same scene and seed, lighting or a moved camera at intensity 1: another image.
    assert np.abs(policy.images[0].astype(int) - plain.astype(int)).mean() > 2


def test_eval_cli_refuses_an_image_size_the_policy_was_not_trained_on(cnn_run, capsys):
    from clawgym_ros.cli import main as cli_main

    run_dir, ckpt = cnn_run
    assert cli_main(["eval", "--checkpoint", ckpt, "--suite", "smoke", "--seed", "0",
                     "--out", str(run_dir), "--workers", "1", "--image-size", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "image_size=32" in err[0] and f"{SIZE} (the size" in err[0]
    assert not (run_dir / "artifacts" / C.KIND_REPORT).exists()



def test_ros_graph_gives_policy_node_the_camera_at_the_trained_size(cnn_run):
    """`clawgym eval --mode ros` of a cnn checkpoint: sim_node renders at the trained size and
    policy_node reads the wrist camera (read from the checkpoint's config, no torch)."""
    from clawgym_ros.evaluation.ros_mode import graph_processes
    from clawgym_ros.evaluation.suites import expand, parse_suite
    from clawgym_ros.ros_io.eval_graph import _image_size

    run_dir, ckpt = cnn_run
    assert _image_size(ckpt[:12], str(run_dir)) == SIZE
    assert _image_size("scripted:pick_place", "") == 0
    assert _image_size("f" * 12, str(run_dir)) == 0          # unknown: policy_node says so
    suite = parse_suite({"name": "g", "seed": 0, "episodes_per_cell": 1,
                         "tasks": [{"task": "pick_place", "templates": ["cube"]}],
                         "cells": {"nominal": True}}, "g")
    procs = {p.name: p.args for p in graph_processes(expand(suite, 0), ckpt, str(run_dir),
                                                     image=True, image_size=SIZE)}
    assert f"image_width:={SIZE}" in procs[C.NODE_SIM]
    assert f"image_height:={SIZE}" in procs[C.NODE_SIM]
    assert "publish_camera:=true" in procs[C.NODE_SIM]
    assert f"image_key:={C.CAMERA_WRIST}_rgb" in procs[C.NODE_POLICY]
