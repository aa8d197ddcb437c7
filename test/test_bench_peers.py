"""`clawgym bench peers`: our env is always measured; a peer whose environment is absent is
skipped with the reason (the peers need their own virtual environment, another MuJoCo)."""

from __future__ import annotations

import json


def test_bench_peers_measures_ours_and_skips_absent_peers_with_a_reason(monkeypatch, capsys,
                                                                         tmp_path):
    from clawgym_ros.bench.peers import PEERS_PYTHON_ENV
    from clawgym_ros.cli import main

    missing = tmp_path / "no-such-python"
    monkeypatch.setenv(PEERS_PYTHON_ENV, str(missing))
    assert main(["bench", "peers", "--quick", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ours = result["ours"]
    assert ours["control_steps_per_s"] > 0 and ours["camera_control_steps_per_s"] > 0
    assert ours["physics_steps_per_s"] == round(
        ours["control_steps_per_s"] * ours["physics_steps_per_control_step"], 1)
    for peer in ("robosuite_lift", "metaworld_pick_place"):
        assert str(missing) in result[peer]["skipped"]
    assert result["lead"] == {}
    monkeypatch.delenv(PEERS_PYTHON_ENV)
    from clawgym_ros.bench.peers import _peers

    assert PEERS_PYTHON_ENV in _peers(5, 0)["robosuite_lift"]["skipped"]
