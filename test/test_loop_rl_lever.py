"""The coordinator's RL lever: when functional success plateaus below its target, a share of
the iteration's episodes is spent as RL fine-tuning steps (equal simulated steps), the
fine-tuned checkpoint is evaluated, and the decision says why.

Plan and runner run in process with the toy executor of test_coordinator_runner (synthetic
demonstrations and reports, whose functional success is flat: a plateau); the trainer node's
RL goal is checked against the real fine-tuning in test_rl_finetune.
"""

from __future__ import annotations

import json

import pytest

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.coordinator.plan import LoopState, initial_state, next_plan
from clawgym_ros.coordinator.runner import LoopRunner
from clawgym_ros.dataset.reader import open_dataset
from clawgym_ros.errors import ConfigError
from test.test_coordinator_runner import CrashError, ToyExecutor, loop_cfg

LEVER = {"share": 0.25, "plateau_iterations": 1, "plateau_delta": 0.02,
         "options": {"n_steps": 64}}


def _scores(functional: float) -> dict:
    return {C.DIM_FUNCTIONAL: {"value": functional}}


def _state(cfg, values) -> LoopState:
    state = initial_state(cfg)
    history = tuple({"iteration": i, "scores": _scores(v), "report_id": f"{i:08x}"}
                    for i, v in enumerate(values))
    return LoopState(**{**state.__dict__, "iteration": len(values), "history": history})


def _report(functional: float) -> dict:
    return {"scores": _scores(functional), "aggregated": {}, "gaps": []}


class RlToyExecutor(ToyExecutor):
    """The toy executor plus a toy RL fine-tuning: a checkpoint child of the base with the
    base's content and the manifest config a real fine-tuning records."""

    def __init__(self, crash=None):
        super().__init__(crash)
        self.calls["finetune"] = 0
        self.iteration["finetune"] = 0
        self.goals = []

    def finetune(self, goal, progress):
        from clawgym_ros.training.rl import FinetuneConfig

        self._maybe_crash("finetune", "before")
        self.calls["finetune"] += 1
        self.goals.append(goal)
        store = ArtifactStore(goal.run_dir)
        base = store.resolve(goal.checkpoint_id)
        cfg = FinetuneConfig(base_checkpoint=base.id, steps=goal.steps, seed=goal.seed,
                             task=goal.task, workers=goal.workers, **goal.options)
        toy = {**json.loads(base.file("toy.json").read_text()), "rl": cfg.to_json()}
        art = store.put_files(C.KIND_CHECKPOINT,
                              {"toy.json": json.dumps(toy, sort_keys=True).encode()},
                              config={**cfg.to_json(), "finetune": "rl"},
                              seeds={"train": goal.seed}, parents=[base.id])
        self._maybe_crash("finetune", "after")
        self.iteration["finetune"] += 1
        return art.id


def test_lever_is_off_by_default_and_leaves_the_config_id_alone():
    cfg = loop_cfg()
    assert not cfg.rl.enabled and "rl" not in cfg.to_dict()
    assert loop_cfg(rl=LEVER).to_dict()["rl"]["share"] == 0.25


@pytest.mark.parametrize("rl, field", [
    ({"share": 1.5}, "rl.share"),
    ({"share": 0.2, "options": {"nope": 1}}, "rl.options.nope"),
    ({"share": 0.2, "options": {"lr": -1.0}}, "rl.options.lr"),
    ({"share": 0.2, "plateau_iterations": 0}, "rl.plateau_iterations"),
])
def test_bad_lever_settings_name_the_field(rl, field):
    with pytest.raises(ConfigError) as err:
        loop_cfg(rl=rl)
    assert err.value.field == field


def test_lever_mode_must_fit_the_loop_policy():
    """No mode fine-tunes a policy that reads camera images: a cnn loop's lever says so when
    the config is read (direct mode, the default, takes over an mlp network only; residual
    mode's env feeds no images either)."""
    for options in ({}, {"mode": "residual"}):
        with pytest.raises(ConfigError) as err:
            loop_cfg(rl={"share": 0.2, "options": options}, policy="cnn", record_images=True)
        assert err.value.field == "rl.share" and "no images" in err.value.allowed
    assert loop_cfg(rl={"share": 0.2}, policy="mlp").rl.enabled


def test_plan_spends_a_share_on_rl_only_at_a_plateau_below_target():
    cfg = loop_cfg(rl=LEVER)
    # Rising success: no RL.
    plan = next_plan(_state(cfg, [0.3, 0.5]), _report(0.5), cfg)
    assert plan.rl_episodes == 0 and plan.episodes == cfg.episodes_per_iteration
    assert any("rl: none (functional rose +0.200" in r for r in plan.decision["reasons"])
    # Too little history for a plateau.
    plan = next_plan(_state(cfg, [0.5]), _report(0.5), cfg)
    assert plan.rl_episodes == 0
    # Flat: 3 of 12 episodes become RL steps on the (only) task.
    plan = next_plan(_state(cfg, [0.5, 0.51]), _report(0.51), cfg)
    assert (plan.rl_episodes, plan.rl_task, plan.episodes) == (3, C.TASK_PICK_PLACE, 9)
    assert plan.decision["rl_episodes"] == 3 and "finetune" in plan.seeds
    assert any(r.startswith("rl: 3 of 12 episodes") for r in plan.decision["reasons"])
    # Flat but at target: no RL.
    at_target = loop_cfg(rl=LEVER, targets={"functional": 0.5})
    assert next_plan(_state(at_target, [0.5, 0.5]), _report(0.5), at_target).rl_episodes == 0
    # The open loop never: it synthesizes every episode.
    open_cfg = loop_cfg(rl=LEVER, mode="open")
    plan = next_plan(_state(open_cfg, [0.5, 0.5]), _report(0.5), open_cfg)
    assert plan.rl_episodes == 0 and plan.episodes == 12


@pytest.fixture(scope="module")
def lever_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("rl_lever")
    ex = RlToyExecutor()
    state = LoopRunner(loop_cfg(rl=LEVER), run, ex).run()
    return run, state, ex


def test_loop_finetunes_at_the_plateau_and_evaluates_the_finetuned_checkpoint(lever_run):
    run, state, ex = lever_run
    # The toy reports' functional success is flat: iteration 2 (after two reports) fine-tunes.
    assert ex.calls == {"synthesize": 3, "train": 3, "finetune": 1, "evaluate": 3}
    last = state.iterations[-1]
    assert last["plan"]["rl_episodes"] == 3 and last["plan"]["episodes"] == 9
    store = ArtifactStore(run)
    demo_steps = [row["steps"] for row in open_dataset(store, last["dataset_id"]).index]
    goal = ex.goals[0]
    assert goal.steps == round(3 * sum(demo_steps) / len(demo_steps)) == last["rl_steps"]
    assert goal.checkpoint_id == last["checkpoint_id"] and goal.options == {"n_steps": 64}
    assert last["rl_checkpoint_id"] != last["checkpoint_id"]
    report = store.get(last["report_id"])
    assert report.manifest.config["checkpoint_id"] == last["rl_checkpoint_id"]
    # Equal budget: the RL episodes count like synthesized ones.
    assert state.episodes_used == 3 * 12
    # The next plan would warm-start BC from the iteration's BC checkpoint, and the final
    # report's lineage reaches the fine-tuned one.
    final = store.get(state.final_report_id)
    assert last["rl_checkpoint_id"] in final.manifest.parents
    decisions = [json.loads(x) for x in
                 (run / C.DIR_LOOP / C.FILE_DECISIONS).read_text().splitlines()]
    assert decisions[2]["rl_episodes"] == 3
    assert any(r.startswith("rl: 3 of 12") for r in decisions[2]["reasons"])


@pytest.mark.parametrize("when", ["before", "after"])
def test_crash_in_finetune_resumes_to_the_same_ids(lever_run, tmp_path, when):
    run, state, _ = lever_run
    ex = RlToyExecutor(crash=("finetune", 0, when))
    with pytest.raises(CrashError):
        LoopRunner(loop_cfg(rl=LEVER), tmp_path, ex).run()
    resumed = LoopRunner(loop_cfg(rl=LEVER), tmp_path, ex).run()
    assert resumed.final_report_id == state.final_report_id
    # A fine-tuning that committed before the crash is found again, not rerun.
    assert ex.calls["finetune"] == 1
