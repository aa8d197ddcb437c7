"""Online distillation (issue 23 item 3) and calibration_node (item 1).

The loop watches a folder of robot logs: before each iteration a log it has not seen is fitted
(the same job as ``clawgym calibrate --bag``), the iteration's simulators run at the new
calibration, and the decision with each parameter's shift goes to decisions.jsonl. The runner
is driven in process (the toy executor of test_coordinator_runner, with a real fit); the
Calibrate action is exercised against a real calibration_node, through the coordinator's own
action executor.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.calibration.job import CalibrateRequest, run_calibration
from clawgym_ros.coordinator.runner import LoopRunner
from test.test_coordinator_runner import CrashError, ToyExecutor, loop_cfg

#: what each stand-in robot log hides: damping only (the one parameter fitted here)
ROBOTS = {"a_robot.mcap": 2.0, "c_robot.mcap": 3.0}


def twin_log(path: Path, damping: float, seed: int) -> Path:
    from clawgym_ros.calibration.excitation import ExcitationConfig, make_excitation
    from clawgym_ros.calibration.twin import record

    excitation = make_excitation(ExcitationConfig(seed=seed, duration_s=6.0, hold_s=0.5,
                                                  ramp_s=1.0))
    path.write_bytes(record(excitation, {"damping_scale": damping}, seed=seed).mcap)
    return path


@pytest.fixture(scope="module")
def robot_logs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("robot_logs")
    for i, (name, damping) in enumerate(ROBOTS.items()):
        twin_log(folder / name, damping, seed=i + 1)
    (folder / "b_truncated.mcap").write_bytes((folder / "a_robot.mcap").read_bytes()[:5000])
    return folder


class DistillExecutor(ToyExecutor):
    """The toy executor plus a real calibration fit (``crash``: after committing the n-th)."""

    def __init__(self, crash_after_fit: int = -1):
        super().__init__()
        self.fits = 0
        self.crash_after_fit = crash_after_fit

    def calibrate(self, goal, progress):
        request = CalibrateRequest(bag=goal.bag, params=goal.params, bounds=goal.bounds,
                                   seed=goal.seed, starts=goal.starts)
        artifact, _ = run_calibration(goal.run_dir, request)
        self.fits += 1
        if self.fits - 1 == self.crash_after_fit:
            raise CrashError("injected crash after a fit")
        return artifact.id


def run_with_arrivals(run: Path, logs: Path, executor) -> tuple[LoopRunner, object]:
    """Run a 3-iteration toy loop watching ``run/logs``: the first log is there from the
    start, the truncated one arrives before iteration 1, the second robot before 2."""
    watched = run / "watched"
    watched.mkdir(parents=True, exist_ok=True)
    arrivals = {0: "a_robot.mcap", 1: "b_truncated.mcap", 2: "c_robot.mcap"}
    cfg = loop_cfg(iterations=3, distill={"logs": str(watched), "params": ["damping_scale"],
                                          "starts": 1})
    runner = LoopRunner(cfg, run, executor)
    state = runner.load()
    while not state.done:
        if state.current is None and state.iteration in arrivals:
            name = arrivals[state.iteration]
            if not (watched / name).exists():
                shutil.copyfile(logs / name, watched / name)
        state = runner.step(state)
    return runner, state


@pytest.fixture(scope="module")
def distilled(robot_logs, tmp_path_factory):
    run = tmp_path_factory.mktemp("distill_run")
    executor = DistillExecutor()
    runner, state = run_with_arrivals(run, robot_logs, executor)
    return run, runner, state, executor


def decisions(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "loop" / "decisions.jsonl").read_text()
            .splitlines()]


def test_new_logs_recalibrate_the_next_iteration(distilled):
    run, runner, state, executor = distilled
    assert executor.fits == 2
    cal = [it["calibration"]["id"] for it in state.iterations]
    assert cal[0] and cal[0] == cal[1] != cal[2]
    # every simulating step of an iteration ran at its calibration
    for it, cid in zip(state.iterations, cal, strict=True):
        for phase in ("synthesize", "evaluate"):
            assert it["goals"][phase]["calibration_id"] == cid
    d = [x["calibration"] for x in decisions(run) if "calibration" in x]
    assert [x["changed"] for x in d] == [True, False, True]
    assert d[0]["log"]["name"] == "a_robot.mcap" and d[0]["previous"] == ""
    shift = d[0]["shift"]["damping_scale"]
    assert shift["before"] == 1.0 and shift["after"] == pytest.approx(2.0, rel=0.05)
    assert shift["interval"][0] <= shift["after"] <= shift["interval"][1]
    # the truncated log is refused with its reason; it is seen and not tried again
    assert d[1]["log"]["name"] == "b_truncated.mcap" and "refused" in d[1]["reason"]
    assert d[2]["log"]["name"] == "c_robot.mcap" and d[2]["previous"] == cal[0]
    assert d[2]["shift"]["damping_scale"]["before"] == pytest.approx(shift["after"])
    assert d[2]["shift"]["damping_scale"]["after"] == pytest.approx(3.0, rel=0.05)
    assert [e["name"] for e in state.iterations[2]["calibration"]["logs"]] == [
        "a_robot.mcap", "b_truncated.mcap", "c_robot.mcap"]
    # the final report's lineage reaches both calibrations
    parents = ArtifactStore(run).get(state.final_report_id).manifest.parents
    assert set(cal) <= set(parents)


def test_a_crash_after_a_fit_resumes_without_fitting_again(robot_logs, distilled, tmp_path):
    run = tmp_path / "run"
    with pytest.raises(CrashError):
        run_with_arrivals(run, robot_logs, DistillExecutor(crash_after_fit=1))
    again = DistillExecutor()
    _, state = run_with_arrivals(run, robot_logs, again)
    assert again.fits == 0             # the committed fit is found, not redone
    reference = distilled[2]
    assert [it["calibration"]["id"] for it in state.iterations] == [
        it["calibration"]["id"] for it in reference.iterations]
    assert [h["report_id"] for h in state.history] == [
        h["report_id"] for h in reference.history]


def test_distill_config_errors_name_the_field(tmp_path):
    from clawgym_ros.coordinator.config import load_loop_config
    from clawgym_ros.errors import ConfigError

    path = tmp_path / "loop.yaml"
    path.write_text("loop:\n  mixture: [{task: pick_place, family: none}]\n"
                    "  distill: {logs: no_such_folder}\n")
    with pytest.raises(ConfigError, match=r"loop.yaml: distill.logs=.*no_such_folder"):
        load_loop_config(path)
    path.write_text("loop:\n  mixture: [{task: pick_place, family: none}]\n"
                    "  distill: {logs: ., bounds: {damping_scale: [2, 3]}}\n")
    with pytest.raises(ConfigError, match=r"distill.bounds.damping_scale.*nominal"):
        load_loop_config(path)


@pytest.mark.ros
def test_calibration_node_fits_what_the_cli_fits(robot_logs, procs, rclpy_context, tmp_path):
    """A Calibrate goal sent by the coordinator's ActionExecutor to a real calibration_node
    commits the artifact `clawgym calibrate --bag` commits; a bad goal fails naming the
    parameter and commits nothing."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Calibrate
    from clawgym_ros import constants as C
    from clawgym_ros.coordinator.runner import CalibrateGoal
    from clawgym_ros.nodes.coordinator_node import ActionExecutor, StepFailedError
    from clawgym_ros.ros_io.action_client import ThreadSafeActionClient
    from test.conftest import configure_and_activate, read_logs

    log = str(robot_logs / "a_robot.mcap")
    reference, _ = run_calibration(tmp_path / "cli", CalibrateRequest(
        bag=log, params=("damping_scale",), starts=1, seed=3))
    run = tmp_path / "run"
    procs.start_module(C.NODE_CALIBRATION, "clawgym_ros.nodes.calibration_node",
                       ["--ros-args", "-p", f"run_dir:={run}"])
    node = Node("calibrate_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    spinning = threading.Event()

    def spin() -> None:
        while not spinning.is_set():
            executor.spin_once(timeout_sec=0.05)

    try:
        configure_and_activate(node, executor, C.NODE_CALIBRATION, tmp_path, 60.0)

        class Host:      # what ActionExecutor uses of CoordinatorNode
            options = type("O", (), {"server_timeout_s": 60.0})()
            stopping = threading.Event()
            calibrate = ThreadSafeActionClient(node, Calibrate, C.ACTION_CALIBRATE)

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
        stages: list[str] = []
        goal = CalibrateGoal(bag=log, params=("damping_scale",), bounds={}, seed=3, starts=1,
                             run_dir=str(run))
        cal_id = ActionExecutor(Host()).calibrate(goal, lambda d, t, text: stages.append(text))
        assert cal_id == reference.id, read_logs(tmp_path)
        assert any("refinement" in s for s in stages), stages
        bad = CalibrateGoal(bag=log, params=("no_such_param",), bounds={}, seed=3, starts=1,
                            run_dir=str(tmp_path / "bad_run"))
        with pytest.raises(StepFailedError, match="no_such_param"):
            ActionExecutor(Host()).calibrate(bad, lambda *_: None)
        assert not (tmp_path / "bad_run" / "artifacts" / "calibration").exists()
    finally:
        spinning.set()
        executor.shutdown()
        node.destroy_node()


def test_a_loop_calibration_missing_from_the_run_directory_is_refused_first(tmp_path):
    from clawgym_ros.coordinator.runner import LoopError

    runner = LoopRunner(loop_cfg(calibration="ab" * 32), tmp_path / "run", DistillExecutor())
    with pytest.raises(LoopError, match=r"calibration: .*clawgym calibrate --out"):
        runner.load()
    assert not (tmp_path / "run" / "artifacts").exists() or not any(
        (tmp_path / "run" / "artifacts").rglob("manifest.json"))


def test_ablate_copies_the_configs_calibration_into_each_arm(robot_logs, tmp_path):
    from clawgym_ros.commands.ablate import _calibration, _copy_artifact
    from clawgym_ros.errors import ConfigError

    out = tmp_path / "ablation"
    cal, _ = run_calibration(out, CalibrateRequest(
        bag=str(robot_logs / "a_robot.mcap"), params=("damping_scale",), starts=1))
    found = _calibration(out, cal.id[:12], Path("loop.yaml"))
    for arm in ("closed", "open"):
        _copy_artifact(found, out / "seed0" / arm)
        # the arm's loop finds the calibration: its runner loads without refusing it
        runner = LoopRunner(loop_cfg(calibration=cal.id), out / "seed0" / arm,
                            DistillExecutor())
        assert runner.load().iteration == 0
        assert ArtifactStore(out / "seed0" / arm).get(cal.id).file("calibration.json") \
            .read_bytes() == cal.file("calibration.json").read_bytes()
    with pytest.raises(ConfigError, match="calibration of --out's run directory"):
        _calibration(tmp_path / "elsewhere", cal.id, Path("loop.yaml"))
