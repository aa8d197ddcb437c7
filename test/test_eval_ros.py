"""ROS evaluation mode (issue 8): sim_node in lockstep + policy_node vs the in-process path.

`clawgym eval --mode ros` starts sim_node (lockstep) and policy_node in an isolated domain,
drives 20 nominal pick_place episodes of the scripted baseline (mixed outcomes) and writes a
report; `--mode in_process` on the bare scene must give identical per-episode records
(success, stages, duration, violations, motion series and metrics). ~40 s on 2 cores.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.ros

POLICY = "scripted:pick_place:grasp_height=0.015"
SUITE = """\
name: ros_agreement
seed: 0
episodes_per_cell: 20
tasks:
  - task: pick_place
    templates: [cube]
cells:
  nominal: true
"""


def _report(main, capsys, out, suite, mode):
    args = ["eval", "--policy", POLICY, "--suite", str(suite), "--seed", "11", "--out",
            str(out), "--mode", mode, "--workers", "1", "--world", "scene", "--max-steps",
            "120"]
    assert main(args) == 0
    lines = capsys.readouterr().out.split("\n")
    return json.loads(open(lines[1][len("json: "):]).read())


def test_ros_lockstep_matches_in_process(tmp_path, capsys):
    pytest.importorskip("rclpy")
    from clawgym_ros.cli import main
    from clawgym_ros.report.schema import validate_report

    suite = tmp_path / "ros_agreement.yaml"
    suite.write_text(SUITE)
    ros = _report(main, capsys, tmp_path / "ros", suite, "ros")
    local = _report(main, capsys, tmp_path / "local", suite, "in_process")
    validate_report(ros)
    assert ros["n_episodes"] == local["n_episodes"] == 20
    pairs = list(zip(ros["per_episode"], local["per_episode"], strict=True))
    assert [a["seed"] for a, _ in pairs] == [b["seed"] for _, b in pairs]
    assert [a["success"] for a, _ in pairs] == [b["success"] for _, b in pairs]
    assert [a["stages_reached"] for a, _ in pairs] == [b["stages_reached"] for _, b in pairs]
    # Exact lockstep: sim/step waits for the command stamped with the current time, so the
    # whole record agrees, not only the outcome.
    for a, b in pairs:
        for key in ("duration_s", "violations", "stages", "metrics", "series", "perturbation"):
            assert a.get(key) == b.get(key), (a["index"], key)
        assert a == b, a["index"]
    successes = sum(a["success"] for a, _ in pairs)
    assert 0 < successes < 20
    # Children were stopped: their logs end and no node is left in the domain.
    logs = sorted((tmp_path / "ros" / "logs" / "eval").glob("*.log"))
    assert {p.stem for p in logs} == {"sim_node", "policy_node"}


def test_ros_lockstep_one_command_per_step_matches_in_process(tmp_path):
    """The same agreement without chunks (policy_node ``max_chunk:=1``): every step waits
    for its own command, as for a policy that reads every observation."""
    pytest.importorskip("rclpy")
    import yaml

    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.suites import expand, parse_suite
    from clawgym_ros.evaluation.workers import run_specs
    from clawgym_ros.ros_io.eval_graph import run_ros_graph

    suite = parse_suite({**yaml.safe_load(SUITE), "episodes_per_cell": 6}, "per_step")
    specs = expand(suite)
    ros = run_ros_graph(specs, POLICY, "", 120, log_dir=tmp_path / "logs", max_chunk=1)
    local = run_specs(PolicySource.parse(POLICY), specs, 1,
                      RolloutOptions(world="scene", max_steps=120))
    assert [r.to_dict() for r in ros] == [r.to_dict() for r in local]
