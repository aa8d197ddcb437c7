"""In-process evaluation rollouts (issue 8): determinism, worker-count independence, reports.

Runs the scripted pick-and-lift baseline (a cheap policy with mixed outcomes) on the bare
tabletop scene and on the pick_place task env; ~20 s on 2 cores.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.observation import (
    ObservationAssembler,
    arm_command,
    trajectory_points,
)
from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
from clawgym_ros.evaluation.ros_mode import StampedBuffer, graph_processes
from clawgym_ros.evaluation.suites import expand, load_suite
from clawgym_ros.evaluation.workers import (
    EvaluationCancelledError,
    WorkerPool,
    WorkerPoolError,
    run_specs,
)

POLICY = "scripted:pick_place:grasp_height=0.015"
SCENE = RolloutOptions(world="scene", max_steps=120)


@pytest.fixture(scope="module")
def specs():
    return expand(load_suite("smoke"), 0)


def test_workers_give_identical_results_in_spec_order(specs):
    source = PolicySource.parse(POLICY)
    one = run_specs(source, specs[:10], 1, SCENE)
    two = run_specs(source, specs[:10], 2, SCENE)
    assert [r.index for r in two] == list(range(10))
    assert [r.to_dict() for r in one] == [r.to_dict() for r in two]
    outcomes = [r.success for r in one]
    assert any(outcomes) and not all(outcomes), outcomes   # the policy is not trivial
    # Records carry the spec and a 20 Hz tool-speed series for the preference metrics.
    r = one[4]
    assert (r.seed, r.family, r.intensity) == (specs[4].seed, specs[4].family,
                                               specs[4].intensity)
    assert r.perturbation["lighting.intensity"] == pytest.approx(0.5)
    assert len(r.series.tool_speed) == pytest.approx(r.duration_s * 20 + 1, abs=1)
    assert r.stages == ("reach", "grasp", "lift")


def test_kept_pool_serves_several_policies_and_survives_a_dead_worker(specs):
    # A pool kept between evaluations (evaluator_node's) rebuilds a worker's runner when the
    # policy changes, gives the in-process results, and fails clearly when a worker dies.
    import os
    import signal

    other = PolicySource.parse("scripted:pick_place:grasp_height=0.03")
    with WorkerPool(2) as pool:
        for source in (PolicySource.parse(POLICY), other, PolicySource.parse(POLICY)):
            kept = pool.run(source, specs[:6], SCENE)
            assert [r.to_dict() for r in kept] == [
                r.to_dict() for r in run_specs(source, specs[:6], 1, SCENE)]
        # A worker's own error reaches the caller as itself; the pool stays up.
        # (built directly: PolicySource.parse refuses the unknown option before any worker)
        bogus = PolicySource("scripted", "pick_place", options=(("bogus", 1.0),))
        with pytest.raises(ConfigError, match="bogus"):
            pool.run(bogus, specs[:2], SCENE)
        assert pool.started
        os.kill(next(iter(pool._executor._processes)), signal.SIGKILL)
        with pytest.raises(WorkerPoolError, match="worker process died"):
            pool.run(other, specs[:6], SCENE)
        assert not pool.started
        assert len(pool.run(other, specs[:2], SCENE)) == 2     # fresh workers
        # Closed from another thread mid-evaluation (evaluator_node cleaned up): a cancel.
        import threading

        def close_after_first(done: int, total: int, successes: int) -> None:
            if done == 1:
                threading.Thread(target=pool.close).start()

        with pytest.raises(EvaluationCancelledError, match="pool was closed"):
            pool.run(other, specs[:12], SCENE, progress=close_after_first)


def test_pool_workers_exit_with_a_killed_caller(tmp_path):
    # kill -9 of the process holding a pool (evaluator_node) must not leave its forkserver
    # workers behind: they watch the caller and exit.
    import os
    import subprocess
    import sys
    import time

    script = tmp_path / "hold_pool.py"
    script.write_text(
        "import os, sys, time\n"
        "from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions\n"
        "from clawgym_ros.evaluation.suites import expand, load_suite\n"
        "from clawgym_ros.evaluation.workers import WorkerPool\n"
        "if __name__ == '__main__':\n"
        "    pool = WorkerPool(2)\n"
        f"    pool.run(PolicySource.parse({POLICY!r}), expand(load_suite('smoke'), 0)[:2],\n"
        "             RolloutOptions(world='scene', max_steps=20))\n"
        "    print(' '.join(str(p) for p in pool._executor._processes), flush=True)\n"
        "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
    finally:
        proc.kill()
        proc.wait()
    assert len(workers) == 2

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    deadline = time.monotonic() + 10.0
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in workers)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_process_group_stops_a_pooled_evaluation(tmp_path, sig):
    """`timeout`, `kill -- -PGID`, systemd and Ctrl-C signal the whole process group, the
    workers too: `clawgym eval --workers 2` stops with its one line. Under SIGTERM it used to
    hang for good (Python 3.11's pool never fails a cancelled future whose worker died: its
    manager thread dies on InvalidStateError, printing a traceback) while waiting for the
    running episodes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from test.conftest import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-m", "clawgym_ros.cli", "eval", "--policy", POLICY, "--suite",
         "perturbation_sweep", "--seed", "0", "--out", str(tmp_path), "--workers", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        # As from a shell: a pytest-xdist worker ignores SIGINT, and an ignored SIGINT is
        # inherited (the CLI, like any program started with `nohup ... &`, would not see it).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = b""
        deadline = time.monotonic() + 120.0
        while b"3/1500 episodes" not in seen and time.monotonic() < deadline:
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
        assert b"3/1500 episodes" in seen, seen.decode(errors="replace")[-2000:]
        os.killpg(proc.pid, getattr(signal, sig))
        try:
            rest = proc.communicate(timeout=60.0)[1]
        except subprocess.TimeoutExpired:
            raise AssertionError(f"clawgym eval still running 60 s after {sig}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = (seen + rest).decode(errors="replace")
    assert proc.returncode == {"SIGTERM": 143, "SIGINT": 130}[sig], err[-2000:]
    assert ("terminated (SIGTERM)" if sig == "SIGTERM" else "interrupted") in err
    assert "Traceback" not in err


def test_task_world_uses_the_task_tracker(specs):
    runner = Runner(PolicySource.parse("scripted:pick_place").load(),
                    RolloutOptions(world="task", max_steps=150))
    try:
        result = runner.run(specs[0])
    finally:
        runner.close()
    assert result.stages[:3] == ("reach", "grasp", "lift")
    assert "reach" in result.stages_reached
    assert not result.success   # the baseline lifts but never places


def test_cli_reports_are_identical_and_valid(tmp_path, capsys):
    from clawgym_ros.cli import main
    from clawgym_ros.report.schema import validate_report

    ids = []
    for name, workers in (("a", "2"), ("b", "1")):
        assert main(["eval", "--policy", POLICY, "--suite", "smoke", "--seed", "3", "--out",
                     str(tmp_path / name), "--workers", workers, "--world", "scene",
                     "--max-steps", "120"]) == 0
        out = capsys.readouterr().out.split("\n")
        ids.append(out[0])
        assert out[1].startswith("json: ") and out[2].startswith("html: ")
        report = json.loads(open(out[1][6:]).read())
        validate_report(report)
        assert report["n_episodes"] == 24 and report["suite"]["seed"] == 3
    texts = [(tmp_path / n / "artifacts" / "report" / i / "report.json").read_text()
             for n, i in zip("ab", ids)]
    assert texts[0] == texts[1] and ids[0] == ids[1]


def test_observation_assembly_matches_the_env():
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401

    env = gym.make(C.ENV_TABLETOP).unwrapped
    env.reset(seed=5)
    for _ in range(5):
        obs, *_ = env.step({C.ACT_JOINT_TARGET: np.zeros(7), C.ACT_GRIPPER: np.array([0.03])})
    b = env.backend
    names, pos, vel, _ = b.joint_state()
    rebuilt = ObservationAssembler().assemble({"joints": (names, pos, vel),
                                               "objects": obs[C.OBS_OBJECT_POSES]})
    for key in (C.OBS_JOINT_POS, C.OBS_JOINT_VEL, C.OBS_GRIPPER, C.OBS_OBJECT_POSES):
        np.testing.assert_array_equal(rebuilt[key], obs[key])
    # tool_pose by forward kinematics: the env's is one physics substep older (2 ms; the arm
    # moves fast here).
    np.testing.assert_allclose(rebuilt[C.OBS_TOOL_POSE][:3], obs[C.OBS_TOOL_POSE][:3], atol=0.02)
    env.close()


def test_commands_and_buffer():
    cmd = arm_command({C.ACT_JOINT_TARGET: np.ones(7), C.ACT_JOINT_VEL: np.zeros(7),
                       C.ACT_GRIPPER: np.array([0.02])})
    assert cmd.velocities is None and cmd.gripper == 0.02
    assert [p[0] for p in trajectory_points(cmd, 0.02)] == [0.0]
    moving = arm_command({C.ACT_JOINT_TARGET: np.ones(7), C.ACT_JOINT_VEL: np.full(7, 0.5)})
    points = trajectory_points(moving, 0.02)
    assert points[0][0] == 0.02 and np.all(points[0][2] == 0.5)

    buf = StampedBuffer(("joints", "objects"))
    buf.put("joints", 0.02, "j")
    assert buf.ready(0.0, 0.05) is None
    buf.put("objects", 0.02, "o")
    assert buf.ready(0.0, 0.05) == 0.02
    buf.acted = 0.02
    buf.put("joints", 0.04, "j2")
    buf.tick(0.04, 1.0)
    assert buf.ready(1.01, 0.05) is None          # objects of 0.04 may still come
    assert buf.ready(1.06, 0.05) == 0.04          # dropped: hold the last value
    assert buf.values() == {"joints": "j2", "objects": "o"}


def test_graph_processes_interpose_only_what_the_suite_needs(specs):
    procs = graph_processes(specs, POLICY, "")
    names = [p.name for p in procs]
    # Lighting and dynamics are applied by the lockstep driver through sim_node's services
    # right after each reset (where the wrappers apply them): no node for them.
    assert names == [C.NODE_SIM, C.NODE_SENSOR_NOISE, C.NODE_POLICY]
    # The observation interposer is reliable both ways in lockstep and holds dropped samples
    # itself: policy_node needs no /clock; its tool pose comes from the raw joints.
    assert procs[1].args == ("--ros-args", "-p", "reliable:=true")
    assert "hold_timeout:=0.0" in procs[-1].args and "publish_clock:=false" in procs[0].args
    assert "kinematics_topic:=joint_states_raw" in procs[-1].args
    assert not any(a.startswith("task:=") for a in procs[0].args + procs[-1].args)
    nominal = graph_processes([s for s in specs if not s.families], POLICY, "")
    assert [p.name for p in nominal] == [C.NODE_SIM, C.NODE_POLICY]
    assert "joint_states:=joint_states_raw" in nominal[-1].args
    # policy_node's chunk bound only when asked for (its default: MAX_CHUNK).
    assert not any("max_chunk" in a for a in nominal[-1].args)
    per_step = graph_processes(specs, POLICY, "", max_chunk=1)
    assert "max_chunk:=1" in per_step[-1].args
    # The task world: sim_node starts in the first spec's task world, policy_node is told
    # the suite's tasks (whose task_state carries keys such as place_goal).
    task = graph_processes(specs, POLICY, "", world="task")
    assert "task:=pick_place" in task[0].args and "task:=pick_place" in task[-1].args
    assert f"template:={specs[0].template}" in task[0].args


@pytest.mark.parametrize("task", ["pick_place", "peg_insert", "pill_handover", "gps_nav"])
def test_task_observation_keys_are_the_task_envs_non_sensor_keys(task):
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401
    from clawgym_ros.evaluation.ros_mode import (
        SENSOR_OBSERVATION_KEYS,
        task_observation_keys,
    )
    from clawgym_ros.tasks.registry import get_task

    spec = get_task(task)
    env = gym.make(spec.env_id).unwrapped
    try:
        keys = set(env.observation_space.spaces)
    finally:
        env.close()
    sensor = set(SENSOR_OBSERVATION_KEYS[spec.scene])
    assert sensor <= keys
    assert set(task_observation_keys()[task]) == keys - sensor


class _Layout:
    """A policy declaring its observation layout, as a TorchPolicy does."""

    def __init__(self, *keys: str) -> None:
        self.obs_spec = {k: 3 for k in keys}


def test_policy_layout_is_checked_against_what_the_topics_give():
    from clawgym_ros.evaluation.ros_mode import policy_task_keys

    arm = (C.OBS_JOINT_POS, C.OBS_TOOL_POSE, C.OBS_OBJECT_POSES)
    assert policy_task_keys(_Layout(*arm), "ck", C.SCENE_TABLETOP, (), "") == ()
    assert policy_task_keys(_Layout(*arm, C.OBS_PLACE_GOAL), "ck", C.SCENE_TABLETOP,
                            ("pick_place",), "") == (C.OBS_PLACE_GOAL,)
    assert policy_task_keys(object(), "scripted:x", C.SCENE_TABLETOP, (), "") == ()
    for tasks, where in (((), "the bare tabletop scene"), (("peg_insert",), "peg_insert"),
                         (("pick_place", "peg_insert"), "peg_insert")):
        with pytest.raises(ConfigError) as err:
            policy_task_keys(_Layout(*arm, C.OBS_PLACE_GOAL), "ck", C.SCENE_TABLETOP, tasks,
                             "")
        assert err.value.field == "policy" and "'place_goal'" in err.value.allowed, tasks
        assert where in err.value.allowed and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="'imu'"):
        policy_task_keys(_Layout(C.OBS_IMU), "ck", C.SCENE_TABLETOP, ("pick_place",), "")


@pytest.mark.parametrize("family", ["none", "dynamics"])
def test_scene_world_state_is_what_forward_kinematics_of_the_joints_gives(family):
    """The scene world scores the backend's state; the ROS evaluator rebuilds it from joint
    states by forward kinematics on the nominal model. Bit for bit the same, each step (also
    under the dynamics family, which changes masses, damping and gains, not the kinematics)."""
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401
    from clawgym_ros.evaluation.observation import ObservationAssembler
    from clawgym_ros.evaluation.rollout import perturbations_of, scene_env_of
    from clawgym_ros.evaluation.suites import expand, parse_suite
    from clawgym_ros.perturbations.wrappers import wrap

    cells = {"nominal": True} if family == "none" else \
        {"sweeps": [{"family": family, "intensities": [1.0]}]}
    spec = expand(parse_suite({"name": "fk", "seed": 4, "episodes_per_cell": 1,
                               "tasks": [{"task": "pick_place", "templates": ["cube"]}],
                               "cells": cells}, "fk"))[-1]
    assert (family in spec.families) == (family != "none")
    env = gym.make(scene_env_of("pick_place")).unwrapped
    perturbations = perturbations_of(spec)
    wrapped = wrap(env, perturbations) if perturbations else env
    assembler = ObservationAssembler(C.SCENE_TABLETOP)
    rng = np.random.default_rng(0)
    try:
        obs, _ = wrapped.reset(seed=spec.seed)
        for _ in range(40):
            q = obs[C.OBS_JOINT_POS] + rng.uniform(-0.05, 0.05, 7)
            obs, *_ = wrapped.step({C.ACT_JOINT_TARGET: q,
                                    C.ACT_GRIPPER: rng.uniform(0.0, 0.08, 1)})
            backend = env.backend
            names, pos, vel, _ = backend.joint_state()
            rebuilt = assembler.joints(names, pos, vel)
            state = backend.observation(cameras=())
            for key, value in rebuilt.items():
                assert np.array_equal(value, state[key]), key
    finally:
        wrapped.close()
