"""The peers' side of ``clawgym bench peers``: robosuite Lift and metaworld pick-place timed in
*their* interpreter (a separate virtual environment: their MuJoCo pin conflicts with ours).

Run as a script by that interpreter (``python peers_child.py STEPS SEED``); prints one JSON
object: per peer control steps/s without and with an 84x84 camera image per step, physics
steps per control step and so physics steps/s, and the versions; a peer that cannot be
imported or built is ``{"skipped": "<why>"}``. Imports nothing from clawgym_ros (that
environment does not have it), and nothing at module level.
"""

from __future__ import annotations

import json
import os
import sys
import time

#: Camera image size of the camera runs (the size our policies' images default to).
SIZE = 84


def camera_steps(steps: int) -> int:
    """Control steps of a camera run (the peers render a few frames per second here)."""
    return max(steps // 5, 20)


def _rate(step, steps: int, warmup: int) -> float:
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def robosuite_lift(steps: int, seed: int) -> dict:
    from importlib.metadata import version

    import numpy as np
    import robosuite

    out: dict = {"env": "robosuite Lift (Panda, default controller)",
                 "version": version("robosuite"), "mujoco": version("mujoco")}
    rng = np.random.default_rng(seed)
    for camera in (False, True):
        env = robosuite.make("Lift", robots="Panda", has_renderer=False,
                             has_offscreen_renderer=camera, use_camera_obs=camera,
                             camera_names="agentview", camera_heights=SIZE, camera_widths=SIZE,
                             control_freq=20, seed=seed)
        env.reset()
        low, high = env.action_spec
        substeps = int(round(env.control_timestep / env.model_timestep))
        def step(env=env, low=low, high=high) -> None:
            if env.step(rng.uniform(low, high))[2]:       # done (its horizon)
                env.reset()

        _measure(out, step, steps, camera, substeps)
        env.close()
    return _with_physics_rate(out)


def _measure(out: dict, step, steps: int, camera: bool, substeps: int) -> None:
    """Time ``step`` (fewer steps with a camera) into ``out``'s control-step rate."""
    n = camera_steps(steps) if camera else steps
    rate = _rate(step, n, max(n // 10, 5))
    out["camera_control_steps_per_s" if camera else "control_steps_per_s"] = round(rate, 1)
    out["physics_steps_per_control_step"] = substeps


def _with_physics_rate(out: dict) -> dict:
    out["physics_steps_per_s"] = round(out["control_steps_per_s"]
                                       * out["physics_steps_per_control_step"], 1)
    return out


def metaworld_pick_place(steps: int, seed: int) -> dict:
    from importlib.metadata import version

    import gymnasium as gym
    import metaworld  # noqa: F401 (registers the Meta-World ids)

    out: dict = {"env": "metaworld pick-place-v3 (MT1)", "version": version("metaworld")}
    for camera in (False, True):
        kwargs = {"render_mode": "rgb_array", "width": SIZE, "height": SIZE} if camera else {}
        env = gym.make("Meta-World/MT1", env_name="pick-place-v3", seed=seed, **kwargs)
        env.reset(seed=seed)
        env.action_space.seed(seed)
        substeps = int(env.unwrapped.frame_skip)

        def step(env=env, camera=camera) -> None:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if camera:
                env.render()
            if terminated or truncated:                  # 500-step episodes
                env.reset()

        _measure(out, step, steps, camera, substeps)
        env.close()
    return _with_physics_rate(out)


def main(argv: list[str]) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")
    steps, seed = int(argv[0]), int(argv[1])
    result: dict = {"python": sys.version.split()[0]}
    for name, run in (("robosuite_lift", robosuite_lift),
                      ("metaworld_pick_place", metaworld_pick_place)):
        try:
            result[name] = run(steps, seed)
        except Exception as err:  # noqa: BLE001 (a peer that cannot run is reported, not fatal)
            result[name] = {"skipped": f"{type(err).__name__}: {err}"}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
