"""Trainer throughput against a bare torch loop, and peak RSS as the dataset grows.

- ``samples_per_s_trainer``: the full trainer (memory-mapped table, streaming gather,
  normalization, group weights, per-group losses, validation, TensorBoard, checkpoints).
- ``samples_per_s_bare``: the same model (the trainer's policy spec: its input has the derived
  features too), batch size and thread count trained by a bare loop on the whole table made
  into in-memory tensors once (features, normalization and targets computed before the
  timing): per step a random index, forward, MSE, backward, AdamW.
- ``ratio`` = trainer / bare (target >= 0.92, issue 24). Both are measured twice,
  alternating, in this one process; the best of each is kept so that a burst of load from
  other work hurts neither. ``cpu_ratio``: the same in process CPU time per sample (least of
  each), which load from other processes moves less than wall time.
- ``vision``: samples/s of the same trainer with the ``cnn`` policy (84x84 camera images,
  augmentation on) beside the MLP's ``samples_per_s_trainer``, same batch size and threads.
- ``rss``: peak RSS of a child process that trains on the default table and on one ten times
  larger (``rss_growth`` = growth of peak RSS / growth of table bytes; sub-linear < 1).
- ``rl`` (full runs only): RL fine-tuning's environment steps/s (``clawgym train --finetune
  rl``, residual and direct, 1 and 2 workers) beside raw env steps/s measured just before each
  run, from a small BC checkpoint trained here (:data:`RL_BC`): the ``finetune_throughput``
  section of ``clawgym bench rl`` (target ``over_raw`` >= 0.7, issue 22).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The benchmark's model: an MLP 256x256 predicting one action (the bare loop trains the same
#: network on the same targets); the pipeline overhead it measures does not depend on it.
BENCH_MODEL = {"hidden": (256, 256), "chunk": 1}
DEFAULT_ROWS = 50_000
QUICK_ROWS = 10_000
#: The BC checkpoint the ``rl`` section fine-tunes: pick_place demonstrations, training steps
#: (throughput does not need a good policy; episodes of a weak one run to the step limit).
RL_BC = (8, 300)


def _bare_loop(table: Any, cfg: Any, steps: int) -> tuple[float, float]:
    """Samples/s and CPU seconds per sample of a bare loop with the trainer's model on
    in-memory tensors."""
    import numpy as np
    import torch

    from clawgym_ros.training.bc import input_stats, policy_spec, select_obs
    from clawgym_ros.training.policies import build_policy

    obs_spec, obs_cols = select_obs(table.obs_spec, cfg.exclude_obs_keys)
    spec = policy_spec(table, cfg, obs_spec)
    torch.set_num_threads(cfg.num_threads)
    model = build_policy(spec, input_stats(table, obs_cols, spec, cfg.std_floor),
                         seed=cfg.seed)
    with torch.no_grad():
        raw = torch.from_numpy(np.array(table.obs)[:, obs_cols])
        x = model.normalize_obs(raw)
        action = torch.from_numpy(np.array(table.action))[:, None, :]
        y = model.normalize_action(model.to_relative(action.expand(-1, spec.chunk, -1), raw))
    optim = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        idx = torch.randint(x.shape[0], (cfg.batch_size,), generator=gen)
        loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
    samples = steps * cfg.batch_size
    return (samples / (time.perf_counter() - start),
            (time.process_time() - cpu_start) / samples)


#: Camera image side of the vision figure (what synthesis records and the cnn policy reads).
VISION_IMAGE_SIZE = 84


def _vision(root: Path, cfg: Any, quick: bool, seed: int, mlp: float) -> dict[str, Any]:
    """The trainer's samples/s with the cnn policy on a table of 84x84 images (best of two
    runs, as for the MLP's ``mlp`` samples/s; one short run with ``quick``)."""
    import dataclasses

    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.synthetic import synthetic_table

    rows, steps, reps = (500, 4, 1) if quick else (10_000, 60, 2)
    table = synthetic_table(root / "vision_table", rows=rows, seed=seed,
                            image_size=VISION_IMAGE_SIZE)
    # A smaller validation batch than the MLP's: its forward passes count in the run's time.
    vcfg = dataclasses.replace(cfg, steps=steps, policy=C.POLICY_CNN, val_samples=256)
    rates = [train(table, vcfg, ArtifactStore(root / f"vision{rep}"), dataset_ids=[],
                   resume=False, tensorboard=False).samples_per_s for rep in range(reps)]
    return {"policy": C.POLICY_CNN, "image_shape": [VISION_IMAGE_SIZE, VISION_IMAGE_SIZE, 3],
            "rows": rows, "steps": steps, "batch_size": vcfg.batch_size,
            "samples_per_s_trainer": round(max(rates), 1),
            "mlp_samples_per_s_trainer": round(mlp, 1),
            "cnn_to_mlp": round(max(rates) / mlp, 4)}


def _peak_rss_mb() -> float:
    """Peak RSS of this process (VmHWM: per address space, so not inherited from a parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_child(table_dir: str, steps: int, seed: int) -> None:
    """Child process: train on a table, print peak RSS (MB) as JSON."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.dataset.table import TrainingTable
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig

    table = TrainingTable.open(table_dir)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(table, TrainConfig(steps=steps, seed=seed, **BENCH_MODEL),
                       ArtifactStore(tmp), dataset_ids=[])
    print(json.dumps({"peak_rss_mb": round(_peak_rss_mb(), 1),
                      "samples_per_s": round(result.samples_per_s, 1)}))


def _measure_rss(table_dirs: list[Path], steps: int, seed: int) -> list[dict[str, float]]:
    """Peak RSS of a training run on each table, each in a child process of its own; the
    children run side by side (a peak RSS is per process; the time is not reported)."""
    code = ("import sys; from clawgym_ros.bench.train import _rss_child; "
            "_rss_child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(d), str(steps), str(seed)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for d in table_dirs]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=900)
            if proc.returncode:
                raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def _table_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*.npy"))


def bench_train(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Run the training benchmark (see the module docstring)."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig
    from clawgym_ros.training.synthetic import synthetic_table

    rows = QUICK_ROWS if quick else DEFAULT_ROWS
    steps = 150 if quick else 1500
    cfg = TrainConfig(steps=steps, seed=seed, **BENCH_MODEL)
    out: dict[str, Any] = {"rows": rows, "steps": steps, "batch_size": cfg.batch_size,
                           "hidden": list(cfg.hidden), "num_threads": cfg.num_threads}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        table = synthetic_table(root / "table", rows=rows, seed=seed)
        trainer, bare, trainer_cpu, bare_cpu = [], [], [], []
        for rep in range(2):
            rate, cpu = _bare_loop(table, cfg, steps)
            bare.append(rate)
            bare_cpu.append(cpu)
            result = train(table, cfg, ArtifactStore(root / f"run{rep}"), dataset_ids=[],
                           resume=False)
            trainer.append(result.samples_per_s)
            trainer_cpu.append(result.cpu_s_per_sample)
        out["samples_per_s_trainer"] = round(max(trainer), 1)
        out["samples_per_s_bare"] = round(max(bare), 1)
        out["ratio"] = round(max(trainer) / max(bare), 3)
        out["ratio_target"] = 0.92
        out["cpu_us_per_step_trainer"] = round(min(trainer_cpu) * cfg.batch_size * 1e6, 1)
        out["cpu_us_per_step_bare"] = round(min(bare_cpu) * cfg.batch_size * 1e6, 1)
        out["cpu_ratio"] = round(min(bare_cpu) / min(trainer_cpu), 3)
        out["load_avg"] = round(os.getloadavg()[0], 2)
        out["vision"] = _vision(root, cfg, quick, seed, max(trainer))

        rss_steps = 200 if quick else 2000
        synthetic_table(root / "table10x", rows=rows * 10, seed=seed)
        small, big = _measure_rss([root / "table", root / "table10x"], rss_steps, seed)
        small_bytes, big_bytes = _table_bytes(root / "table"), _table_bytes(root / "table10x")
        if not quick:
            out["rl"] = _rl_throughput(root, seed)
    table_growth_mb = (big_bytes - small_bytes) / 2**20
    rss_growth_mb = big["peak_rss_mb"] - small["peak_rss_mb"]
    out["rss"] = {
        "steps": rss_steps,
        "table_mb": round(small_bytes / 2**20, 1),
        "table_10x_mb": round(big_bytes / 2**20, 1),
        "peak_rss_mb": small["peak_rss_mb"],
        "peak_rss_10x_mb": big["peak_rss_mb"],
        "rss_ratio_10x": round(big["peak_rss_mb"] / small["peak_rss_mb"], 3),
        "rss_growth_per_table_growth": round(rss_growth_mb / table_growth_mb, 3),
        "sublinear": big["peak_rss_mb"] < 10 * small["peak_rss_mb"]
        and rss_growth_mb < table_growth_mb,
    }
    return out


def _rl_throughput(root: Path, seed: int) -> dict[str, Any]:
    """RL fine-tuning env steps/s beside raw env steps/s (see the module docstring)."""
    from clawgym_ros.bench.eval import train_pick_place_checkpoint
    from clawgym_ros.bench.rl import finetune_throughput

    run = root / "rl"
    demos, steps = RL_BC
    checkpoint, made = train_pick_place_checkpoint(str(run), demos, steps, seed,
                                                   tensorboard=False)
    return {**finetune_throughput(False, seed, checkpoint, str(run)), "bc_trained_here": made}
