"""`clawgym bench peers` (opt-in): our pick_place env beside robosuite Lift and metaworld
pick-place, in one process tree on one machine.

The peers pin another MuJoCo (robosuite 1.5.2 and metaworld 3.1.1 resolve to mujoco 3.3.0
and numpy 1.26; ours is mujoco 4.0.0), so they cannot share this environment: they live in a
separate virtual environment (``requirements-peers.txt``) whose interpreter is named by
``$CLAWGYM_PEERS_PYTHON``; :mod:`clawgym_ros.bench.peers_child` runs there as a child of this
process, after our env has been timed here. Without that variable, or where a peer does not
import, the peer is ``{"skipped": "<why>"}`` and ours is still measured.

Per env: control steps/s with random actions in its action space (seeded; episodes reset at
their end), the same with an 84x84 camera image rendered every step (a fifth of the steps;
ours: the wrist camera in the observation; robosuite: ``agentview`` camera observations;
metaworld: ``render()``), and physics steps/s
(control steps/s x physics steps per control step: 10 here, 25 in robosuite at 20 Hz, 5 in
metaworld). ``lead`` divides ours by each peer's. Rendering is MuJoCo's (EGL here: Mesa
llvmpipe on a machine without a GPU). Load is recorded: other jobs move all numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Interpreter of the peers' virtual environment.
PEERS_PYTHON_ENV = "CLAWGYM_PEERS_PYTHON"
#: Seconds the peers' child may run.
PEERS_TIMEOUT_S = 900.0
SIZE = 84


def _ours(steps: int, seed: int) -> dict[str, Any]:
    import gymnasium as gym

    import clawgym_ros.sim.registration  # noqa: F401 (registers the env ids)
    from clawgym_ros import constants as C
    from clawgym_ros.bench.peers_child import camera_steps
    from clawgym_ros.tasks.registry import get_task

    env_id = get_task("pick_place").env_id
    out: dict[str, Any] = {"env": f"{env_id} (RL interface, flat action)"}
    for camera in (False, True):
        kwargs = {"cameras": (C.CAMERA_WRIST,), "image_width": SIZE,
                  "image_height": SIZE} if camera else {}
        env = gym.make(env_id, **kwargs)
        env.reset(seed=seed)
        env.action_space.seed(seed)

        def step(env=env) -> None:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()

        n = camera_steps(steps) if camera else steps
        for _ in range(max(n // 10, 5)):
            step()
        start = time.perf_counter()
        for _ in range(n):
            step()
        rate = n / (time.perf_counter() - start)
        out["camera_control_steps_per_s" if camera else "control_steps_per_s"] = round(rate, 1)
        out["physics_steps_per_control_step"] = int(env.unwrapped.backend.substeps)
        env.close()
    out["physics_steps_per_s"] = round(out["control_steps_per_s"]
                                       * out["physics_steps_per_control_step"], 1)
    return out


def _peers(steps: int, seed: int) -> dict[str, Any]:
    python = os.environ.get(PEERS_PYTHON_ENV, "")
    if not python:
        why = (f"${PEERS_PYTHON_ENV} is not set (the interpreter of a virtual environment "
               "with requirements-peers.txt; robosuite and metaworld pin another MuJoCo)")
        return {"robosuite_lift": {"skipped": why}, "metaworld_pick_place": {"skipped": why}}
    if not (Path(python).is_file() or shutil.which(python)):
        why = f"${PEERS_PYTHON_ENV}={python!r} is not an interpreter"
        return {"robosuite_lift": {"skipped": why}, "metaworld_pick_place": {"skipped": why}}
    child = Path(__file__).with_name("peers_child.py")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("_ROS_WHEELS") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("MUJOCO_GL", "egl")
    done = subprocess.run([python, str(child), str(steps), str(seed)], env=env,
                          capture_output=True, text=True, timeout=PEERS_TIMEOUT_S, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        why = f"{python} peers_child.py exited {done.returncode}: {tail}"
        return {"robosuite_lift": {"skipped": why}, "metaworld_pick_place": {"skipped": why}}
    return json.loads(lines[-1])


def bench_peers(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Ours beside robosuite Lift and metaworld pick-place (control steps/s, with a camera,
    physics steps/s) and our lead over each."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    steps = 50 if quick else 500
    load_before = os.getloadavg()[0]
    ours = _ours(steps, seed)
    peers = _peers(steps, seed)
    result: dict[str, Any] = {"steps": steps, "image_size": SIZE,
                              "python": sys.version.split()[0], "ours": ours, **peers}
    lead: dict[str, Any] = {}
    for name in ("robosuite_lift", "metaworld_pick_place"):
        peer = result.get(name, {})
        if "skipped" in peer or "control_steps_per_s" not in peer:
            continue
        lead[name] = {key: round(ours[key] / peer[key], 2) for key in (
            "control_steps_per_s", "camera_control_steps_per_s", "physics_steps_per_s")
            if peer.get(key)}
    result["lead"] = lead
    result["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result
