"""Policy acceptance on nominal pick_place (in-process rollouts, held-out env seeds), opt-in.

1. The recovery loop (issue 15): `clawgym loop --config pick_place_acceptance` (the real node
   graph: 4 iterations, 500 demonstrations in all including recovery episodes restarted from
   the evaluation's failure states, 40,000 training steps) gives a policy that succeeds in
   >= 90% of 60 held-out nominal episodes, with <= 15 min of training on 2 cores.
2. Behaviour cloning alone: a policy trained by `clawgym train` on 2 x 1000 synthesized
   demonstrations succeeds in >= 80% of the same episodes.

The real pipeline end to end, no shortcuts: `clawgym synth` (planner-driven expert, MuJoCo),
`clawgym train` (the default recipe of TrainConfig), `load_policy` (verified checkpoint), then
rollouts of the policy on the nominal task env with seeds that no training episode used. The
policy acts from the env's observation only; success is the env's own ``info["success"]``.

Sizing (2-core machine): 2 x 1000 demonstrations (two synthesis runs, seeds 11 and 12),
80,000 steps and 60 held-out episodes, the recipe measured in docs/notes/training.md
("pick_place acceptance"): with one 1000-demonstration dataset the success depended on the
draw (0.62-0.86 at 40,000 steps, 0.73 at 80,000).
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.cli import main  # noqa: E402
from clawgym_ros.evaluation.rollout_check import run_episodes, success_rate  # noqa: E402
from clawgym_ros.training.checkpoint import load_policy  # noqa: E402

#: Demonstrations synthesized for training, per synthesis run (run seeds below).
EPISODES = 1000
SYNTH_SEEDS = (11, 12)
#: `clawgym train` settings; everything else is TrainConfig's default recipe (relative joint
#: targets, chunks of 20, MLP 256x3, derived features, cosine learning rate, action shift 1).
TRAIN_STEPS = 80000
#: Held-out evaluation: env reset seeds far from anything the synthesis draws.
EVAL_SEEDS = range(7_000_000, 7_000_060)
BAR = 0.8


#: The recovery loop's bars (issue 15).
LOOP_BAR = 0.9
LOOP_MAX_DEMOS = 500
LOOP_MAX_TRAIN_S = 15 * 60

opt_in = pytest.mark.skipif(os.environ.get("CLAWGYM_ACCEPTANCE") != "1",
                            reason="opt-in (CLAWGYM_ACCEPTANCE=1): minutes of synthesis and "
                                   "training on 2 cores, see the test's docstring")


@pytest.mark.slow
@pytest.mark.timeout(3600)
@opt_in
def test_recovery_loop_policy_succeeds_on_held_out_nominal_pick_place(tmp_path, capsys):
    """~6 min on 2 cores (training 267 s of it); last run passed at 54/60 = 0.90
    (0.80-0.95), docs/notes/recovery.md."""
    run = tmp_path / "run"
    assert main(["loop", "--config", "pick_place_acceptance", "--out", str(run)]) == 0
    capsys.readouterr()
    state = json.loads((run / C.DIR_LOOP / C.FILE_LOOP_STATE).read_text())
    store = ArtifactStore(run)
    # The budget: <= 500 demonstrations planned (accepted or not), recovery ones included.
    assert state["episodes_used"] <= LOOP_MAX_DEMOS
    recovery = [it["recovery_dataset_id"] for it in state["iterations"]
                if it.get("recovery_dataset_id")]
    assert recovery, "no iteration synthesized recovery episodes"
    train_seeds: set[int] = set()
    for it in state["iterations"]:
        for dataset_id in filter(None, (it["dataset_id"], it.get("recovery_dataset_id"))):
            path = store.resolve(dataset_id, C.KIND_DATASET).path / "episodes.jsonl"
            train_seeds |= {int(json.loads(line)["seed"])
                            for line in path.read_text().splitlines() if line.strip()}
    assert not train_seeds & set(EVAL_SEEDS)
    # <= 15 min of training: optimizer steps x batch / measured samples per second, summed
    # over the iterations' checkpoints (table building and evaluation not counted).
    train_s = 0.0
    for it in state["iterations"]:
        art = store.resolve(it["checkpoint_id"], C.KIND_CHECKPOINT)
        summary, config = art.manifest.summary, art.manifest.config
        train_s += (summary["step"] - summary["resumed_from"]) * config["batch_size"] / \
            summary["samples_per_s"]
    policy = load_policy(store, state["iterations"][-1]["checkpoint_id"])
    outcomes = run_episodes(policy, EVAL_SEEDS)
    rate, (low, high) = success_rate(outcomes)
    failed = [(o.seed, o.template, o.stages[-1:] or ("none",)) for o in outcomes
              if not o.success]
    print(f"recovery loop, held-out nominal pick_place: {rate:.2f} (95% CI {low:.2f}-"
          f"{high:.2f}) over {len(outcomes)} episodes, {state['episodes_used']} demonstrations, "
          f"training {train_s:.0f} s; failed: {failed}")
    assert train_s <= LOOP_MAX_TRAIN_S
    assert {o.template for o in outcomes} == {"cube", "cylinder", "small_box", "two_bins"}
    assert rate >= LOOP_BAR, f"success {rate:.2f} (95% CI {low:.2f}-{high:.2f}); failed: {failed}"


@pytest.mark.slow
@pytest.mark.timeout(5400)
@opt_in
def test_trained_policy_succeeds_on_held_out_nominal_pick_place(tmp_path, capsys):
    run = tmp_path / "run"
    store = ArtifactStore(run)
    dataset_ids, train_seeds = [], set()
    for synth_seed in SYNTH_SEEDS:
        assert main(["synth", "--task", C.TASK_PICK_PLACE, "--episodes", str(EPISODES),
                     "--seed", str(synth_seed), "--workers", "2", "--out", str(run)]) == 0
        dataset_id = capsys.readouterr().out.split()[0]
        dataset = store.resolve(dataset_id, C.KIND_DATASET)
        rows = [json.loads(line) for line in
                (dataset.path / "episodes.jsonl").read_text().splitlines() if line.strip()]
        assert len(rows) >= 0.9 * EPISODES
        dataset_ids.append(dataset_id)
        train_seeds |= {int(r["seed"]) for r in rows}
    # Held out: no evaluation seed was a training episode's seed.
    assert not train_seeds & set(EVAL_SEEDS)

    args = ["train", "--steps", str(TRAIN_STEPS), "--seed", "0", "--out", str(run)]
    for dataset_id in dataset_ids:
        args += ["--dataset", dataset_id]
    assert main(args) == 0
    checkpoint_id = capsys.readouterr().out.strip().splitlines()[-1]

    policy = load_policy(store, checkpoint_id)
    outcomes = run_episodes(policy, EVAL_SEEDS)
    rate, (low, high) = success_rate(outcomes)
    failed = [(o.seed, o.template, o.stages[-1:] or ("none",)) for o in outcomes
              if not o.success]
    print(f"held-out nominal pick_place: {rate:.2f} (95% CI {low:.2f}-{high:.2f}) over "
          f"{len(outcomes)} episodes; failed: {failed}")
    assert len(outcomes) >= 50
    # Every training template was drawn, so the rate is over the nominal task, not one shape.
    assert {o.template for o in outcomes} == {"cube", "cylinder", "small_box", "two_bins"}
    assert rate >= BAR, f"success {rate:.2f} (95% CI {low:.2f}-{high:.2f}); failed: {failed}"
