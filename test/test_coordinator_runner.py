"""LoopRunner: persistence, decisions, resume after a crash, idempotent steps, lineage.

The executor here runs in process: real datasets from the synthetic (physics-free) expert,
a toy "checkpoint" that records what it was trained on, and synthetic evaluation reports whose
robustness to a family grows with that family's share of the training data. The loop logic
under test (plan, persist, resume, final report) is the one coordinator_node runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.coordinator.config import loop_config_from_dict
from clawgym_ros.coordinator.runner import LoopError, LoopRunner, read_report

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "test" / "data" / "loop_toy_suite.yaml"
BASE_DROP = {"lighting": 1.0, "sensor_noise": 0.6}


def loop_cfg(**kw):
    data = {
        "name": "toy", "seed": 5, "iterations": 3, "episodes_per_iteration": 12,
        "train_steps": 10, "eval_suite": str(SUITE), "workers": 1,
        "mixture": [{"task": "pick_place", "family": "none", "weight": 2},
                    {"task": "pick_place", "family": "lighting", "weight": 1},
                    {"task": "pick_place", "family": "sensor_noise", "weight": 1}],
        "ranges": {"lighting": [0.0, 0.4], "sensor_noise": [0.0, 0.4]},
        "targets": {"functional": 0.99, "robustness": 0.99}, "mixture_floor": 0.1,
    }
    data.update(kw)
    return loop_config_from_dict(data)


class CrashError(RuntimeError):
    """Injected failure."""


class ToyExecutor:
    """In-process executor (see the module docstring); ``crash`` = (phase, iteration, when)."""

    def __init__(self, crash=None):
        self.calls = {"synthesize": 0, "train": 0, "evaluate": 0}
        self.crash = crash
        self.iteration = {"synthesize": 0, "train": 0, "evaluate": 0}

    def _maybe_crash(self, phase, when):
        if self.crash and self.crash[0] == phase and self.crash[2] == when and \
                self.iteration[phase] == self.crash[1]:
            self.crash = None
            raise CrashError(f"injected crash in {phase} ({when})")

    def synthesize(self, goal, progress):
        from clawgym_ros.dataset.writer import synthesize_dataset
        from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
        from clawgym_ros.synthesis.synthetic import SIGNOFF, synthetic_episode

        self._maybe_crash("synthesize", "before")
        self.calls["synthesize"] += 1
        mixture = MixtureSpec.from_entries(goal.mixture)
        specs = plan_episodes(mixture, goal.episodes, goal.seed, options={"steps": 12})
        art, _ = synthesize_dataset(
            ArtifactStore(goal.run_dir), specs, synthetic_episode, SIGNOFF, workers=1,
            generation={"seed": goal.seed, "episodes": goal.episodes,
                        "mixture": mixture.to_dict()}, seeds={"run": goal.seed})
        self._maybe_crash("synthesize", "after")
        self.iteration["synthesize"] += 1
        return art.id

    def train(self, goal, progress):
        from clawgym_ros.dataset.reader import open_dataset

        self._maybe_crash("train", "before")
        self.calls["train"] += 1
        store = ArtifactStore(goal.run_dir)
        counts: dict[str, int] = {}
        for ref in goal.dataset_ids:
            for row in open_dataset(store, ref).index:
                counts[row["family"]] = counts.get(row["family"], 0) + 1
        content = {"counts": counts, "group_weights": goal.group_weights, "seed": goal.seed}
        parents = list(goal.dataset_ids) + ([goal.init_checkpoint_id]
                                            if goal.init_checkpoint_id else [])
        art = store.put_files(
            C.KIND_CHECKPOINT, {"toy.json": json.dumps(content, sort_keys=True).encode()},
            config={"steps": goal.steps, "group_weights": goal.group_weights,
                    "frozen_groups": list(goal.frozen_groups), "policy": goal.policy,
                    "hardening_share": goal.hardening_share,
                    "hardening_intensity": goal.hardening_intensity},
            seeds={"train": goal.seed}, parents=parents)
        self._maybe_crash("train", "after")
        self.iteration["train"] += 1
        return art.id

    def evaluate(self, goal, progress):
        from clawgym_ros.evaluation.config import EvalConfig
        from clawgym_ros.evaluation.suites import expand, load_suite
        from clawgym_ros.evaluation.synthetic import SyntheticModel, synthetic_results
        from clawgym_ros.report.build import write_report

        self._maybe_crash("evaluate", "before")
        self.calls["evaluate"] += 1
        store = ArtifactStore(goal.run_dir)
        toy = json.loads(store.get(goal.checkpoint_id).file("toy.json").read_text())
        total = sum(toy["counts"].values())
        drop = {f: d * math.exp(-4.0 * toy["counts"].get(f, 0) / total)
                for f, d in BASE_DROP.items()}
        suite = load_suite(goal.suite)
        results = synthetic_results(expand(suite, seed=goal.seed),
                                    SyntheticModel(nominal=0.9, drop=drop))
        art = write_report(store, results, suite,
                           EvalConfig(suite=goal.suite, seed=goal.seed,
                                      checkpoint_id=goal.checkpoint_id),
                           parents=[goal.checkpoint_id])
        self.iteration["evaluate"] += 1
        return art.id


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted 3-iteration run."""
    run = tmp_path_factory.mktemp("ref")
    ex = ToyExecutor()
    state = LoopRunner(loop_cfg(), run, ex).run()
    return run, state, ex


def test_uninterrupted_run_persists_state_decisions_and_final_report(reference):
    run, state, ex = reference
    assert state.done and "iteration budget" in state.stop_reason
    assert ex.calls == {"synthesize": 3, "train": 3, "evaluate": 3}
    saved = json.loads((run / C.DIR_LOOP / C.FILE_LOOP_STATE).read_text())
    assert saved["final_report_id"] == state.final_report_id
    decisions = [json.loads(x) for x in (run / C.DIR_LOOP / C.FILE_DECISIONS).read_text()
                 .splitlines()]
    assert [d["iteration"] for d in decisions] == [0, 1, 2, 3]
    assert decisions[-1]["stop"] and not decisions[0]["stop"]
    assert any("lighting" in r for r in decisions[1]["reasons"])
    report = json.loads((run / C.FILE_REPORT_JSON).read_text())
    assert [h["iteration"] for h in report["history"]] == [0, 1, 2]
    assert set(report["scores"]) == set(C.DIMENSIONS)
    assert (run / C.FILE_REPORT_HTML).is_file()
    # The steering reacts: the cells with the largest deviation gain share.
    for before, decision in zip(decisions, decisions[1:]):
        devs = {k: max(d["deviation"] for d in v) for k, v in decision["drivers"].items()}
        assert devs
        top = max(devs.values())
        for key, dev in devs.items():
            if dev == top:
                assert decision["weights"][key] > before["weights"][key]


def test_lineage_reaches_every_artifact_config_and_seed(reference):
    run, state, _ = reference
    tree = ArtifactStore(run).lineage(state.final_report_id)
    found = {}

    def walk(node):
        found[node["id"]] = node
        for parent in node["parents"]:
            walk(parent)

    walk(tree)
    for it in state.iterations:
        for key in ("dataset_id", "checkpoint_id", "report_id"):
            assert it[key] in found
    assert found[state.config_id]["kind"] == C.KIND_CONFIG
    assert found[state.config_id]["seeds"] == {"loop": 5}
    assert all(found[it["dataset_id"]]["seeds"]["run"] == it["plan"]["seeds"]["synthesize"]
               for it in state.iterations)


def test_training_hardening_follows_the_plan(tmp_path):
    """With a hardening gain the Train goals carry each plan's share: the base share first,
    more once a sensor-noise gap shows (the toy policy is weak under sensor noise)."""
    mixture = [{"task": "pick_place", "family": "none", "weight": 2},
               {"task": "pick_place", "family": "sensor_noise", "weight": 0.05}]
    cfg = loop_cfg(iterations=2, hardening_share=0.1, hardening_gain=1.0, mixture=mixture,
                   mixture_floor=0.02, ranges={"sensor_noise": [0.0, 0.4]})
    state = LoopRunner(cfg, tmp_path, ToyExecutor()).run()
    store = ArtifactStore(tmp_path)
    shares = [store.get(it["checkpoint_id"]).manifest.config["hardening_share"]
              for it in state.iterations]
    assert shares == [it["plan"]["hardening_share"] for it in state.iterations]
    assert shares[0] == 0.1 and 0.1 < shares[1] <= 0.5
    # Hardened rows draw up to the top of each plan's (ADR-moved) sensor-noise range.
    assert [store.get(it["checkpoint_id"]).manifest.config["hardening_intensity"]
            for it in state.iterations] == [it["plan"]["ranges"]["sensor_noise"][1]
                                            for it in state.iterations]


@pytest.mark.parametrize("crash", [("train", 1, "before"), ("train", 1, "after"),
                                   ("synthesize", 2, "after")])
def test_crash_then_resume_equals_uninterrupted(reference, tmp_path, crash):
    _, ref_state, _ = reference
    ex = ToyExecutor(crash=crash)
    with pytest.raises(CrashError):
        LoopRunner(loop_cfg(), tmp_path, ex).run()
    saved = json.loads((tmp_path / C.DIR_LOOP / C.FILE_LOOP_STATE).read_text())
    assert saved["phase"] == crash[0] and not saved["done"]
    ex2 = ToyExecutor()
    state = LoopRunner(loop_cfg(), tmp_path, ex2).run()
    assert state.final_report_id == ref_state.final_report_id
    # No completed step was recomputed: every step ran once over both processes, except
    # the one that crashed before its artifact existed.
    phase, _, when = crash
    for step in ("synthesize", "train", "evaluate"):
        assert ex.calls[step] + ex2.calls[step] == 3 + (0 if when == "before" or
                                                         step != phase else 1) - (
            1 if when == "after" and step == phase else 0)
    lines = (tmp_path / C.DIR_LOOP / C.FILE_DECISIONS).read_text().splitlines()
    assert len(lines) == 4


def test_other_config_in_same_run_dir_is_refused(reference):
    run, _, _ = reference
    with pytest.raises(LoopError, match="another config"):
        LoopRunner(loop_cfg(seed=6), run, ToyExecutor()).load()


def test_config_id_follows_the_suite_content_not_the_checkout_folder(tmp_path):
    """A suite file is stored in the config artifact and loop.json names the stored copy, so
    the same loop has the same config id (and so the same final report id) in every clone."""
    ids = []
    for folder in ("a", "b/c"):
        suite = tmp_path / folder / SUITE.name
        suite.parent.mkdir(parents=True)
        suite.write_bytes(SUITE.read_bytes())
        runner = LoopRunner(loop_cfg(eval_suite=str(suite)), tmp_path / folder / "run",
                            ToyExecutor())
        ids.append(runner.config_artifact())
        art = ArtifactStore(tmp_path / folder / "run").get(ids[-1], C.KIND_CONFIG)
        assert json.loads(art.file("loop.json").read_text())["eval_suite"] == \
            f"suite/{SUITE.name}"
        assert art.manifest.config["eval_suite"] == str(suite)      # where it was read
    repo = LoopRunner(loop_cfg(), tmp_path / "r", ToyExecutor())     # the test's own copy
    assert ids[0] == ids[1] == repo.config_ids()[0]
    suite.write_text(suite.read_text() + "\n# edited\n")
    assert LoopRunner(loop_cfg(eval_suite=str(suite)), tmp_path / "d",
                      ToyExecutor()).config_ids()[0] != ids[0]


def test_a_run_made_with_the_absolute_suite_path_in_its_config_resumes(reference, tmp_path):
    """Run directories from before the portable config id (loop.json held the suite's
    absolute path) resume under their own config artifact; another config is still refused."""
    import shutil

    run, state, _ = reference
    old = tmp_path / "old"
    shutil.copytree(run, old)
    runner = LoopRunner(loop_cfg(), old, ToyExecutor())
    portable, legacy = runner.config_ids()
    assert state.config_id == portable != legacy
    saved = json.loads((old / C.DIR_LOOP / C.FILE_LOOP_STATE).read_text())
    saved["config_id"] = legacy
    (old / C.DIR_LOOP / C.FILE_LOOP_STATE).write_text(json.dumps(saved))
    assert runner.load().config_id == legacy
    with pytest.raises(LoopError, match="another config"):
        LoopRunner(loop_cfg(seed=6), old, ToyExecutor()).load()


def test_reports_are_paired_across_iterations(reference):
    run, state, _ = reference
    store = ArtifactStore(run)
    seeds = {read_report(store, h["report_id"])["suite"]["seed"] for h in state.history}
    assert len(seeds) == 1


def test_synthesis_options_reach_every_synthesis_goal_and_are_checked(tmp_path):
    from clawgym_ros.errors import ConfigError

    options = {"timing": "optimal", "acceleration_scale": 2.0}
    cfg = loop_cfg(iterations=1, synthesis_options=options)
    assert cfg.to_dict()["synthesis_options"] == options
    assert "synthesis_options" not in loop_cfg().to_dict()     # config ids stay without it
    state = LoopRunner(cfg, tmp_path / "run", ToyExecutor()).run()
    goal = state.iterations[0]["goals"]["synthesize"]
    assert goal["options"] == options

    # Recovery synthesis uses the same expert options (a resumed step sends the recorded goal).
    class RecordedError(RuntimeError):
        pass

    class RecordingExecutor(ToyExecutor):
        def synthesize(self, goal, progress):
            raise RecordedError(goal)

    runner = LoopRunner(cfg, tmp_path / "run", RecordingExecutor())
    report = state.history[-1]["report_id"]
    with pytest.raises(RecordedError) as recorded:
        runner._synthesize_recovery(state, state.iterations[-1], {
            "recovery_episodes": 3, "seeds": {"recover": 11}, "recovery_report": report})
    (recovery,) = recorded.value.args
    assert recovery.from_report == report and recovery.options == options
    for bad, match in (({"timing": "fast"}, "synthesis_options.timing='fast'"),
                       ({"speed": 1}, "synthesis_options.speed"),
                       ({"acceleration_scale": 9}, "synthesis_options.acceleration_scale")):
        with pytest.raises(ConfigError, match=match):
            loop_cfg(synthesis_options=bad)
