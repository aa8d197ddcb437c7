"""Simulation: backend interface, MuJoCo backend + Gymnasium envs, scene spec -> MJCF/SDF.

Importing this package registers the ``clawgym/...`` Gymnasium ids (entry points are strings,
so MuJoCo is only imported when an env is made).
"""

import os

# Headless rendering by default; must be set before mujoco is first imported.
os.environ.setdefault("MUJOCO_GL", "egl")

from clawgym_ros.sim.registration import register_envs  # noqa: E402

register_envs()
