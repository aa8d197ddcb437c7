"""Simulation speed: Env core vs raw ``mj_step`` on the same compiled model, render fps.

Compared per *physics step*: the env advances ``substeps`` (10) physics steps per ``env.step``
(one control step of 20 ms, including action handling and the state observation dict); raw is
``mujoco.mj_step(model, data)`` called once per physics step in a Python loop on a second
MjData of the same MjModel, from the same state with the same controls. Both are timed in the
same run in alternating blocks of 25 control steps (so load from other processes hits both
alike); the reported ratio is the median of the per-block ratios (the ratio of totals is also
given).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np


def bench_sim(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Measure env vs raw physics steps/s (ratio) and render fps at 84x84 and 320x240."""
    os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is first imported
    from clawgym_ros import constants as C
    from clawgym_ros.sim.envs import TabletopEnv
    from clawgym_ros.sim.world import ENGINE_VERSION, MujocoPhysics

    env = TabletopEnv()
    env.reset(seed=seed)
    backend = env.backend
    model = backend.model
    sub = backend.substeps
    home = np.asarray(backend.scene.robot.home)
    action = {C.ACT_JOINT_TARGET: home, C.ACT_JOINT_VEL: np.zeros(7),
              C.ACT_GRIPPER: np.array([0.08])}
    raw = MujocoPhysics(model)                   # a second MjData of the same model
    block = 25                                   # control steps per timed block
    blocks = 8 if quick else 40
    env_time = raw_time = 0.0
    ratios = []
    env.reset(seed=seed)
    raw.copy_state_from(MujocoPhysics(model, backend.data))
    for _ in range(blocks):
        # env and raw blocks alternate, so load from other processes hits both alike
        start = time.perf_counter()
        for _ in range(block):
            env.step(action)
        env_s = time.perf_counter() - start
        start = time.perf_counter()
        raw.step(block * sub)                    # mj_step in a Python loop
        raw_s = time.perf_counter() - start
        env_time, raw_time = env_time + env_s, raw_time + raw_s
        ratios.append(raw_s / env_s)
    env_best = blocks * block * sub / env_time
    raw_best = blocks * block * sub / raw_time
    result: dict[str, Any] = {
        "scene": backend.scene.name,
        "compare": "physics steps/s (env: control steps x substeps, state observations)",
        "substeps_per_env_step": sub,
        "physics_timestep_s": model.opt.timestep,
        "control_dt_s": backend.control_dt,
        "env_physics_steps_per_s": round(env_best, 1),
        "env_steps_per_s": round(env_best / sub, 1),
        "raw_mj_step_per_s": round(raw_best, 1),
        "env_over_raw_ratio": round(float(np.median(ratios)), 3),
        "env_over_raw_ratio_total": round(env_best / raw_best, 3),
        "target_ratio": 0.8,
    }
    frames = 30 if quick else 200
    for width, height in ((84, 84), (320, 240)):
        try:
            backend.render(C.CAMERA_WRIST, width, height)  # context + warm-up
            start = time.perf_counter()
            for _ in range(frames):
                backend.step()
                backend.render(C.CAMERA_WRIST, width, height)
            elapsed = time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(frames):
                backend.step()
            elapsed -= time.perf_counter() - start
            result[f"render_fps_{width}x{height}"] = round(frames / elapsed, 1)
        except Exception as err:  # no GL on this machine: report, don't fail the state bench
            result[f"render_fps_{width}x{height}"] = None
            result["render_error"] = f"{type(err).__name__}: {err}"
    result["mujoco_gl"] = os.environ.get("MUJOCO_GL", "")
    result["mujoco_version"] = ENGINE_VERSION
    env.close()
    return result
