"""The closed loop through the real node graph (`clawgym loop`: synthesis, trainer, evaluator and
coordinator nodes as separate processes): kill -9 of the synthesis node mid-recovery-
synthesis, rerun, kill -9 of the trainer mid-iteration, rerun, and the final report equals an
uninterrupted run's; `clawgym lineage` traces that report to every dataset, checkpoint,
config and seed.

Sized small (2 iterations x 6 episodes x 300 training steps, a 6-episode suite of 150 steps;
iteration 1 gives 3 of its 6 episodes to recovery synthesis from iteration 0's failures) so
one loop run takes ~1 minute on 2 cores; the demo-sized loop is `make demo`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test.conftest import ROOT

pytestmark = pytest.mark.ros

SUITE = """name: resume_small
description: kill -9 resume test - nominal, one lighting point, held-out template.
seed: 0
episodes_per_cell: 2
schedule: constant
max_steps: 150
tasks:
  - task: pick_place
    templates: [cube]
    held_out_templates: [cylinder]
cells:
  nominal: true
  sweeps:
    - family: lighting
      intensities: [0.5]
"""

LOOP = """loop:
  name: resume_small
  seed: 7
  iterations: 2
  episodes_per_iteration: 6
  train_steps: 300
  eval_suite: suite.yaml
  mixture:
    - {task: pick_place, family: none, weight: 2.0}
    - {task: pick_place, family: lighting, weight: 1.0}
  ranges:
    lighting: [0.0, 0.4]
  targets: {functional: 0.99, robustness: 0.99}
  recovery_gain: 1.0
  max_recovery_share: 0.5
  workers: 1
  warm_start: true
  accumulate: true
"""


def _write_config(tmp_path: Path) -> Path:
    """The small loop's config (and its suite) under ``tmp_path/cfg``; returns the config."""
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "suite.yaml").write_text(SUITE)
    config = cfg_dir / "loop.yaml"
    config.write_text(LOOP)
    return config


def _loop_cli(config: Path, out: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "clawgym_ros.cli", "loop", "--config", str(config), "--out",
         str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"clawgym loop did not finish in {timeout:g} s:\n{err[-3000:]}"
                             ) from None
    return proc.returncode, out, err


def _command_lines():
    """(pid, argv) of every process this user can read."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        yield int(entry.name), [a.decode(errors="replace") for a in argv]


def _worker_pid(run_dir: Path, node: str) -> int | None:
    """The ``node`` process (trainer_node, synthesis_node) serving ``run_dir`` (found by its
    own command line)."""
    want = f"run_dir:={run_dir}"
    return next((pid for pid, args in _command_lines()
                 if f"clawgym_ros.nodes.{node}" in args and want in args), None)


def _node_pids(run_dir: Path) -> list[int]:
    """Node processes of the loop writing to ``run_dir`` (by their command lines)."""
    return [pid for pid, args in _command_lines()
            if any(a.startswith("clawgym_ros.nodes.") for a in args)
            and any(str(run_dir) in a for a in args)]


def _state(run_dir: Path) -> dict | None:
    from clawgym_ros import constants as C

    try:
        return json.loads((run_dir / C.DIR_LOOP / C.FILE_LOOP_STATE).read_text())
    except (OSError, ValueError):
        return None


def _manifest(run_dir: Path, kind: str, art_id: str) -> dict:
    from clawgym_ros import constants as C

    return json.loads((run_dir / "artifacts" / kind / art_id / C.FILE_MANIFEST).read_text())


def _kill9_when(proc: subprocess.Popen, run: Path, node: str, ready, what: str) -> dict:
    """Poll until ``ready()``, kill -9 ``node`` of the loop writing to ``run``, check that the
    loop stopped naming it; returns the loop state it left."""
    killed = None
    # Generous: on a loaded 2-core machine (a second suite, a loop) 240 s ran out once.
    deadline = time.monotonic() + 600
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        if ready():
            killed = _worker_pid(run.resolve(), node)
            assert killed is not None
            os.kill(killed, signal.SIGKILL)
            break
        time.sleep(0.02)
    if killed is None:
        ended = proc.poll()
        if ended is None:
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        raise AssertionError(f"never saw {what} (loop "
                             f"{'exited ' + str(ended) if ended is not None else 'running'}"
                             f", state {_state(run)}):\n{err[-3000:]}")
    code, _, err = _finish(proc, 120)
    assert code != 0
    assert f"{node} stopped (signal 9)" in err, err[-3000:]
    assert "run the same command again to resume" in err
    crashed = _state(run)
    assert crashed["iteration"] == 1 and not crashed["done"]
    return crashed


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict]:
    """The small loop's config and the final state of its uninterrupted run."""
    tmp_path = tmp_path_factory.mktemp("reference")
    config = _write_config(tmp_path)
    ref = tmp_path / "ref"
    code, out, err = _finish(_loop_cli(config, ref), 600)
    assert code == 0, err[-3000:]
    ref_state = _state(ref)
    assert ref_state["done"] and len(ref_state["history"]) == 2
    assert f"final report {ref_state['final_report_id']}" in out
    # Iteration 1 synthesized recovery episodes from iteration 0's failure states.
    assert ref_state["iterations"][1]["plan"]["recovery_episodes"] == 3
    assert ref_state["iterations"][1]["recovery_dataset_id"]
    return config, ref_state


def _recovery_started(run_dir: Path) -> bool:
    """Iteration 1 is synthesizing its recovery episodes and the synthesis node has begun
    writing them (a dataset staging folder with content)."""
    from clawgym_ros import constants as C
    from clawgym_ros.coordinator.plan import PHASE_SYNTHESIZE

    state = _state(run_dir)
    if not state or state["iteration"] != 1 or state["phase"] != PHASE_SYNTHESIZE:
        return False
    cur = state["iterations"][-1]
    if not cur["dataset_id"] or not cur["goals"].get(PHASE_SYNTHESIZE, {}).get(
            "from_report"):
        return False
    staging = run_dir / "artifacts" / C.DIR_STAGING
    return staging.is_dir() and any(
        d.name.startswith(C.KIND_DATASET) and any(d.iterdir()) for d in staging.iterdir())


def test_kill9_synthesis_then_trainer_each_rerun_equals_uninterrupted(reference, tmp_path,
                                                                       capsys):
    """One run killed twice in iteration 1: the synthesis node mid-recovery-synthesis, then
    (rerun) the trainer after it saved a step; the second rerun ends at the reference's
    final report with nothing completed lost or recomputed."""
    from clawgym_ros import constants as C
    from clawgym_ros.cli import main
    from clawgym_ros.training.checkpoint import complete_steps

    config, ref_state = reference
    run = (tmp_path / "run").resolve()

    # 1. kill -9 the synthesis node while it writes iteration 1's recovery episodes.
    proc = _loop_cli(config, run)
    crashed = _kill9_when(proc, run, "synthesis_node", lambda: _recovery_started(run),
                          "iteration 1 synthesizing recovery episodes")
    dataset_1 = crashed["iterations"][1]["dataset_id"]
    assert dataset_1 and not crashed["iterations"][1].get("recovery_dataset_id")
    dataset_1_created = _manifest(run, C.KIND_DATASET, dataset_1)["created"]

    # 2. Rerun; kill -9 the trainer while iteration 1 trains, after it saved a step.
    proc = _loop_cli(config, run)
    work = run / C.DIR_TRAIN_WORK
    before: set[str] | None = None

    def saved_a_step() -> bool:
        nonlocal before
        state = _state(run)
        if not (state and state["iteration"] == 1 and state["phase"] == "train"):
            return False
        if before is None:
            before = {p.name for p in work.iterdir()} if work.is_dir() else set()
        new = [p for p in work.iterdir() if p.name not in before] if work.is_dir() else []
        return any(complete_steps(p) for p in new)

    crashed = _kill9_when(proc, run, "trainer_node", saved_a_step,
                          "iteration 1 training with a saved step")
    assert crashed["iterations"][1]["dataset_id"] and not crashed["iterations"][1][
        "checkpoint_id"]
    kept = {k: crashed["iterations"][0][k] for k in ("dataset_id", "checkpoint_id",
                                                     "report_id")}
    kept["dataset_1"] = crashed["iterations"][1]["dataset_id"]
    assert kept["dataset_1"] == dataset_1      # the first rerun kept it (same file, same time)
    assert _manifest(run, C.KIND_DATASET, dataset_1)["created"] == dataset_1_created
    kept["recovery_1"] = crashed["iterations"][1]["recovery_dataset_id"]
    created = {
        kept[key]: _manifest(run, C.KIND_DATASET, kept[key])["created"]
        for key in ("dataset_id", "dataset_1", "recovery_1")} | {
        kept["checkpoint_id"]: _manifest(run, C.KIND_CHECKPOINT,
                                         kept["checkpoint_id"])["created"],
        kept["report_id"]: _manifest(run, C.KIND_REPORT, kept["report_id"])["created"],
    }

    # 3. Rerun the same command again: it resumes and ends with the reference's final report.
    code, out, err = _finish(_loop_cli(config, run), 600)
    assert code == 0, err[-3000:]
    state = _state(run)
    assert state["final_report_id"] == ref_state["final_report_id"]
    assert [it["report_id"] for it in state["iterations"]] == \
        [it["report_id"] for it in ref_state["iterations"]]
    # Nothing completed was lost or recomputed: same artifacts, same creation times, no extra
    # datasets; the trainer continued iteration 1 from its saved step.
    assert state["iterations"][0]["dataset_id"] == kept["dataset_id"]
    assert state["iterations"][1]["dataset_id"] == kept["dataset_1"]
    assert state["iterations"][1]["recovery_dataset_id"] == kept["recovery_1"]
    for art_id, when in created.items():
        kind = next(k for k in (C.KIND_DATASET, C.KIND_CHECKPOINT, C.KIND_REPORT)
                    if (run / "artifacts" / k / art_id).is_dir())
        assert _manifest(run, kind, art_id)["created"] == when
    # The killed synthesis node's half-written recovery dataset left nothing behind: three
    # datasets (iteration 0, iteration 1, iteration 1's recovery episodes), no staging folder.
    assert len(list((run / "artifacts" / C.KIND_DATASET).iterdir())) == 3
    staging = run / "artifacts" / C.DIR_STAGING
    assert not staging.is_dir() or not list(staging.iterdir())
    for it, ref_it in zip(state["iterations"], ref_state["iterations"], strict=True):
        for key in ("dataset_id", "recovery_dataset_id", "checkpoint_id", "report_id"):
            assert it.get(key) == ref_it.get(key), key
    ckpt_1 = _manifest(run, C.KIND_CHECKPOINT, state["iterations"][1]["checkpoint_id"])
    assert ckpt_1["summary"]["resumed_from"] >= 100
    decisions = (run / C.DIR_LOOP / C.FILE_DECISIONS).read_text().splitlines()
    assert len(decisions) == 3   # iterations 0 and 1, then the stop decision
    assert (run / C.FILE_REPORT_HTML).is_file()
    report = json.loads((run / C.FILE_REPORT_JSON).read_text())
    assert [h["report_id"] for h in report["history"]] == \
        [it["report_id"] for it in state["iterations"]][:len(report["history"])]

    # 4. `clawgym lineage` traces the final report to every dataset, checkpoint, config, seed.
    capsys.readouterr()
    assert main(["lineage", state["final_report_id"][:16], "--run-dir", str(run),
                 "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    found: dict[str, dict] = {}

    def walk(node: dict) -> None:
        found[node["id"]] = node
        for parent in node["parents"]:
            walk(parent)

    walk(tree)
    for it in state["iterations"]:
        for key in ("dataset_id", "checkpoint_id", "report_id"):
            assert it[key] in found
        assert found[it["dataset_id"]]["seeds"]["run"] == it["plan"]["seeds"]["synthesize"]
        assert found[it["checkpoint_id"]]["seeds"]["train"] == it["plan"]["seeds"]["train"]
        assert found[it["report_id"]]["seeds"]["suite"] == it["plan"]["seeds"]["evaluate"]
    recovery = found[state["iterations"][1]["recovery_dataset_id"]]
    assert state["iterations"][0]["report_id"] in {p["id"] for p in recovery["parents"]}
    assert found[state["config_id"]]["kind"] == C.KIND_CONFIG
    assert found[state["config_id"]]["seeds"] == {"loop": 7}
    kinds = {n["kind"] for n in found.values()}
    assert kinds == {C.KIND_REPORT, C.KIND_CHECKPOINT, C.KIND_DATASET, C.KIND_CONFIG}


def test_sigterm_stops_the_loop_and_every_node(tmp_path):
    """`kill <clawgym pid>` (SIGTERM, as a job scheduler or a CI timeout sends) unwinds like
    Ctrl-C: exit 143 and no node process left behind."""
    config = _write_config(tmp_path)
    run = (tmp_path / "run").resolve()
    proc = _loop_cli(config, run)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        state = _state(run)
        if state and state["phase"] == "train" and _node_pids(run):
            break
        time.sleep(0.1)
    assert proc.poll() is None and _node_pids(run), "the loop never reached training"
    try:
        proc.send_signal(signal.SIGTERM)     # the CLI only, not its process group
        code, _, err = _finish(proc, 60)
        assert code == 143, err[-3000:]
        assert "terminated (SIGTERM)" in err
        deadline = time.monotonic() + 10
        while _node_pids(run) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _node_pids(run) == []
    finally:
        for pid in _node_pids(run):      # a failed check leaves nothing running
            os.kill(pid, signal.SIGKILL)


def test_ablate_runs_both_arms_and_a_final_evaluation(tmp_path, capsys):
    """`clawgym ablate` end to end on the small loop (1 seed, 1 iteration per arm, the arms
    side by side with --jobs 2): both arms spend the same budget, the loops' last reports and
    the final evaluation (more episodes, another seed) are compared per dimension; a rerun
    (one graph) resumes without recomputing."""
    from clawgym_ros.cli import main

    config = _write_config(tmp_path)
    out = tmp_path / "ablate"
    argv = ["ablate", "--config", str(config), "--seeds", "1", "--iterations", "1",
            "--out", str(out), "--final-episodes", "3", "--final-seed", "99"]
    # held-out episodes without a final evaluation: one line, exit 2, nothing run or written
    assert main([*argv[:-4], "--final-episodes", "0", "--final-held-out-episodes", "5"]) == 2
    assert "--final-held-out-episodes=5 is invalid" in capsys.readouterr().err
    assert not out.exists()
    argv += ["--final-held-out-episodes", "5"]
    # Both arms side by side where there are two CPUs (a graph each, pinned to a CPU of its
    # own: logs in job0/job1); the reruns below resume them one graph at a time.
    jobs = min(2, len(os.sched_getaffinity(0)))
    assert main([*argv, "--jobs", str(jobs)]) == 0
    assert jobs == 1 or {p.name for p in (out / "logs").iterdir()} >= {"job0", "job1"}
    printed = capsys.readouterr().out
    assert "loops' last reports" in printed and "final evaluation" in printed
    data = json.loads((out / "ablation.json").read_text())
    budgets = data["budgets"]
    assert budgets["closed"]["0"] == {**budgets["open"]["0"],
                                      "final_report_id": budgets["closed"]["0"]["final_report_id"]}
    final = data["final"]
    assert final["seed"] == 99 and final["episodes_per_cell"] == 3
    assert final["held_out_episodes_per_cell"] == 5
    suite = (out / "final_suite.yaml").read_text()
    assert "episodes_per_cell: 3" in suite and "name: resume_small_final" in suite
    assert "held_out_episodes_per_cell: 5" in suite
    for mode in ("closed", "open"):
        report = final["scores"][mode]["0"]
        assert set(report) >= {"functional", "robustness"}
        assert report["functional"]["n"] == 3          # 3 nominal training-template episodes
    assert set(final["differences"]) == {"functional", "robustness", "generalization",
                                         "preference"}
    figures = final["design_figures"]                   # the design's bars, from the records
    assert figures["counts"]["closed"]["nominal"][1] == 3
    assert figures["counts"]["closed"]["held_out"][1] == 5   # the held-out cylinder's cell
    assert set(figures) >= {"functional_gain", "generalization_ratio", "combined_stability"}
    assert "the design's figures" in printed
    reports = sorted((out / "seed0" / "closed" / "artifacts" / "report").iterdir())
    assert main(argv) == 0                             # resumes: nothing is recomputed
    assert sorted((out / "seed0" / "closed" / "artifacts" / "report").iterdir()) == reports
    assert json.loads((out / "ablation.json").read_text())["final"] == final
    # Another held-out count rewrites the final suite: the loops resume, the final reports
    # (same checkpoint, same suite path, other content) are made again, not reused.
    assert main([*argv[:-1], "6"]) == 0
    again = json.loads((out / "ablation.json").read_text())["final"]
    assert again["design_figures"]["counts"]["open"]["held_out"][1] == 6
    assert len(list((out / "seed0" / "closed" / "artifacts" / "report").iterdir())) == \
        len(reports) + 1
    # --jobs beyond the CPUs (or 0): one line, exit 2, nothing written. (The first run above
    # ran both arms side by side where there are two CPUs; its loops resumed one at a time.)
    side = tmp_path / "side_by_side"
    for jobs in (0, len(os.sched_getaffinity(0)) + 1):
        assert main(["ablate", "--config", str(config), "--out", str(side),
                     "--jobs", str(jobs)]) == 2
        assert f"--jobs={jobs} is invalid" in capsys.readouterr().err and not side.exists()
