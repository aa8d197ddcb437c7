"""`clawgym train`: prints a checkpoint id; bad --weights/--freeze/--dataset are one clear line."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("torch")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.cli import main  # noqa: E402
from test.conftest import synthetic_train_run, train_cli  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return synthetic_train_run(tmp_path_factory)


def _train(capsys, run_dir, *extra: str) -> tuple[int, str, str]:
    return train_cli(capsys, run_dir, *extra)


def test_train_prints_the_checkpoint_id_with_lineage(run_dir, capsys, tmp_path):
    weights = tmp_path / "weights.yaml"
    store = ArtifactStore(run_dir[0])
    names = json.loads((store.get(run_dir[1]).path / "table.json").read_text())["group_names"]
    weights.write_text(f"{names[1]}: 4.0\n")
    code, out, err = _train(capsys, run_dir, "--weights", str(weights), "--freeze", "encoder")
    assert code == 0, err
    checkpoint_id = out.strip().splitlines()[-1]
    assert re.fullmatch(r"[0-9a-f]{64}", checkpoint_id)
    art = store.resolve(checkpoint_id, C.KIND_CHECKPOINT)
    assert art.manifest.parents == [run_dir[1]]
    assert art.manifest.seeds == {"train": 0}
    assert art.manifest.config["group_weights"] == {names[1]: 4.0}
    assert art.manifest.config["frozen_groups"] == ["encoder"]
    # The same command again resumes the finished run: the same checkpoint, no new training.
    code, again, _ = _train(capsys, run_dir, "--weights", str(weights), "--freeze", "encoder")
    assert code == 0 and again.strip() == checkpoint_id


@pytest.mark.parametrize("content, expected", [
    ("pick_place/t0/none: -2\n", ["group_weights.pick_place/t0/none", "-2", "[0, 1e+06]"]),
    ("nope/x/y: 1.0\n", ["group_weights.nope/x/y", "a group of the dataset",
                         "pick_place/t0/none"]),
    ("pick_place/t0/none: heavy\n", ["group_weights.pick_place/t0/none", "'heavy'", "number"]),
    ("- 1\n- 2\n", ["group_weights", "a mapping"]),
    ("a: [1\n", ["valid YAML"]),
])
def test_bad_weights_file_is_one_line_naming_file_field_value_allowed(
        run_dir, capsys, tmp_path, content, expected):
    weights = tmp_path / "w.yaml"
    weights.write_text(content)
    code, _, err = _train(capsys, run_dir, "--weights", str(weights))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(weights) in lines[0] and "Traceback" not in err
    for part in expected:
        assert part in lines[0], (part, lines[0])


def test_bad_freeze_and_unknown_dataset_are_one_line(run_dir, capsys, tmp_path):
    code, _, err = _train(capsys, run_dir, "--freeze", "wheels")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "frozen_groups[0]='wheels'" in err and "'encoder'" in err
    code = main(["train", "--dataset", "ab" * 32, "--steps", "5", "--seed", "0",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "unknown artifact id" in err and len(err.strip().splitlines()) == 1
    code, _, err = _train(capsys, run_dir, "--weights", str(tmp_path / "missing.yaml"))
    assert code == 2 and "missing.yaml" in err and "an existing YAML file" in err
    code, _, err = _train(capsys, run_dir, "--lr-schedule", "linear")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "lr_schedule='linear'" in err and "'cosine'" in err and "'constant'" in err
    code, _, err = _train(capsys, run_dir, "--hardening-intensity", "1.5")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "hardening_intensity=1.5 is invalid; allowed: [0, 1]" in err


def test_train_on_a_synthesized_mcap_dataset_end_to_end(capsys, tmp_path):
    """Real dataset path: MCAP episodes -> dataset.cache table -> `clawgym train` -> policy."""
    import numpy as np

    from clawgym_ros.dataset.cache import training_table
    from clawgym_ros.dataset.writer import synthesize_dataset
    from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
    from clawgym_ros.synthesis.synthetic import SIGNOFF, synthetic_episode
    from clawgym_ros.training.checkpoint import load_policy

    store = ArtifactStore(tmp_path)
    mix = MixtureSpec.from_entries([{"task": C.TASK_PICK_PLACE, "weight": 1}])
    specs = plan_episodes(mix, 6, 0, options={"steps": 24})
    dataset, _ = synthesize_dataset(store, specs, synthetic_episode, SIGNOFF, workers=1,
                                    generation={"seed": 0, "episodes": 6}, seeds={"run": 0})
    code = main(["train", "--dataset", dataset.id, "--steps", "30", "--seed", "1", "--out",
                 str(tmp_path), "--batch-size", "32", "--chunk", "2"])
    out = capsys.readouterr()
    assert code == 0, out.err
    table = training_table(store, [dataset.id])
    policy = load_policy(store, out.out.strip(), expected_obs_spec=table.obs_spec,
                         expected_action_spec=table.action_spec)
    obs = {k: np.asarray(table.obs[0][i:i + w]) for k, w, i in zip(
        table.obs_spec, table.obs_spec.values(),
        np.cumsum([0, *table.obs_spec.values()]))}
    action = policy.act(obs)
    assert list(action) == list(table.action_spec)
    assert all(np.all(np.isfinite(v)) for v in action.values())
