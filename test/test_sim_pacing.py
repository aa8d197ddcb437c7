"""Pacing of a node-driven simulator: real-time factor and per-sensor decimation."""

from __future__ import annotations

import pytest

from clawgym_ros.errors import ConfigError
from clawgym_ros.sim.pacing import EveryN, RealTimePacer


def test_pacer_follows_real_time_factor():
    pacer = RealTimePacer(control_dt=0.02, real_time_factor=2.0, max_steps_per_tick=100)
    steps = 0
    pacer.start(100.0, steps)
    for k in range(1, 101):
        steps += pacer.due(100.0 + 0.01 * k, steps)
    # 1 s of wall time at 2x real time = 2 s of simulation = 100 steps of 0.02 s.
    assert steps == 100


def test_pacer_never_bursts_and_reanchors_when_behind():
    pacer = RealTimePacer(control_dt=0.01, real_time_factor=1.0, max_steps_per_tick=5)
    pacer.start(0.0, 0)
    assert pacer.due(1.0, 0) == 5          # 100 due, at most 5 at once
    assert pacer.behind == 95
    assert pacer.due(1.0, 5) == 0          # re-anchored: nothing more due at the same time
    assert pacer.due(1.02, 5) == 2
    assert pacer.due(0.5, 7) == 0          # wall time going backwards gives nothing


def test_pacer_validates_arguments():
    with pytest.raises(ConfigError):
        RealTimePacer(control_dt=0.0)
    with pytest.raises(ConfigError):
        RealTimePacer(control_dt=0.01, real_time_factor=-1.0)


def test_every_n_fires_on_multiples_including_reset():
    camera = EveryN(control_rate=50.0, rate=10.0)
    assert camera.n == 5
    assert camera.crossed(-1, 0)           # right after reset
    assert not camera.crossed(0, 4)
    assert camera.crossed(4, 5)
    assert camera.crossed(0, 12)
    fired = [s for s in range(0, 20) if camera.crossed(s, s + 1)]
    assert fired == [4, 9, 14, 19]
    assert EveryN(50.0, 500.0).n == 1
    off = EveryN(50.0, 0.0)
    assert not off.enabled and not off.crossed(-1, 100)
