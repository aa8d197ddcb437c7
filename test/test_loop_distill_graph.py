"""Online distillation through the real node graph (`clawgym loop` with ``distill:``): a robot
log present at the start calibrates iteration 0 through calibration_node, a second log moved
into the watched folder during iteration 0's training recalibrates iteration 1, and every
synthesis and evaluation of an iteration runs at its calibration.

~2-3 min on 2 cores (two fits of 20 s logs, two tiny loop iterations): opt-in with
CLAWGYM_ACCEPTANCE=1, like the other long runs (docs/results/2026-12-05-online-distillation.md
is this run by hand).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from test.conftest import ROOT, tiny_suite_yaml

pytestmark = [pytest.mark.ros, pytest.mark.skipif(
    os.environ.get("CLAWGYM_ACCEPTANCE") != "1",
    reason="a loop through the node graph with two fits (~2-3 min): set CLAWGYM_ACCEPTANCE=1")]

SUITE = tiny_suite_yaml(2, "online distillation - nominal pick_place cube") + "max_steps: 150\n"

LOOP = """loop:
  name: distill_small
  seed: 0
  iterations: 2
  episodes_per_iteration: 6
  train_steps: 200
  eval_suite: suite.yaml
  workers: 1
  mixture:
    - {task: pick_place, template: cube, family: none, weight: 1.0}
  targets: {functional: 0.99}
  distill: {logs: logs, starts: 1}
"""


def test_logs_arriving_during_a_loop_recalibrate_it(tmp_path):
    from clawgym_ros.calibration.twin import write_twin_log

    cfg = tmp_path / "cfg"
    (cfg / "logs").mkdir(parents=True)
    (cfg / "suite.yaml").write_text(SUITE)
    (cfg / "loop.yaml").write_text(LOOP)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for seed in (1, 2):
        write_twin_log(incoming / f"robot_{seed}.mcap", seed, 20.0)
    shutil.move(incoming / "robot_1.mcap", cfg / "logs" / "robot_1.mcap")
    out = tmp_path / "run"
    output = (tmp_path / "loop.out").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawgym_ros.cli", "loop", "--config", str(cfg / "loop.yaml"),
         "--out", str(out)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=output, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        state_path = out / "loop" / "state.json"
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            text = state_path.read_text() if state_path.is_file() else ""
            if '"phase": "train"' in text and (incoming / "robot_2.mcap").exists():
                shutil.move(incoming / "robot_2.mcap", cfg / "logs" / "robot_2.mcap")
            time.sleep(0.5)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        output.close()
    assert proc.returncode == 0, (tmp_path / "loop.out").read_text()[-3000:]
    assert not (incoming / "robot_2.mcap").exists()
    state = json.loads(state_path.read_text())
    cal = [it["calibration"]["id"] for it in state["iterations"]]
    assert cal[0] and cal[1] and cal[0] != cal[1], cal
    decisions = [json.loads(line) for line in
                 (out / "loop" / "decisions.jsonl").read_text().splitlines()]
    logs = [d["calibration"]["log"]["name"] for d in decisions if "calibration" in d]
    assert logs == ["robot_1.mcap", "robot_2.mcap"]
    for it, cid in zip(state["iterations"], cal, strict=True):
        report = json.loads(next((out / "artifacts" / "report").glob(
            f"{it['report_id']}/report.json")).read_text())
        assert report["config"]["calibration"] == cid
        info = json.loads((out / "artifacts" / "dataset" / it["dataset_id"] / "info.json")
                          .read_text())
        assert info["generation"]["options"]["calibration"]["id"] == cid
    assert (out / "logs" / "calibration_node.log").is_file()
