"""Early validation (issue 18): what a long run needs is checked before any node starts or any
file is written; each problem is one line, exit code 2."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clawgym_ros.errors import ConfigError
from test.test_hostile_inputs import assert_one_line_error, clawgym

ROOT = Path(__file__).resolve().parents[1]
LOOP = ROOT / "config" / "loop" / "pick_place.yaml"


def loop_config(tmp_path: Path, old: str, new: str) -> Path:
    text = LOOP.read_text()
    assert old in text
    path = tmp_path / "loop.yaml"
    # the shipped suite, found from the copy
    path.write_text(text.replace(old, new).replace("eval_suite: suites/",
                                                   f"eval_suite: {LOOP.parent}/suites/"))
    return path


def test_loop_config_naming_a_missing_suite_fails_at_load(tmp_path):
    from clawgym_ros.coordinator.config import load_loop_config

    path = loop_config(tmp_path, "eval_suite: suites/pick_place_demo_eval.yaml",
                       "eval_suite: suites/missing.yaml")
    with pytest.raises(ConfigError, match=r"loop.yaml: eval_suite=.*missing.yaml"):
        load_loop_config(path)
    path = loop_config(tmp_path, "eval_suite: suites/pick_place_demo_eval.yaml",
                       "eval_suite: no_such_suite")
    with pytest.raises(ConfigError, match=r"loop.yaml: eval_suite='no_such_suite'"):
        load_loop_config(path)


def test_loop_config_with_an_unknown_template_fails_at_load(tmp_path):
    from clawgym_ros.coordinator.config import load_loop_config

    path = loop_config(tmp_path, "{task: pick_place, template: cube, family: none",
                       "{task: pick_place, template: dodecahedron, family: none")
    with pytest.raises(ConfigError, match=r"loop.yaml: mixture\[0\].template='dodecahedron'"):
        load_loop_config(path)


@pytest.mark.parametrize("field", ["train_steps", "episodes_per_iteration"])
def test_loop_config_amounts_are_capped(tmp_path, field):
    from clawgym_ros.coordinator.config import load_loop_config

    old = {"train_steps": "train_steps: 4000", "episodes_per_iteration":
           "episodes_per_iteration: 100"}[field]
    path = loop_config(tmp_path, old, f"{field}: {10**30}")
    with pytest.raises(ConfigError, match=rf"{field}=10+ is invalid; allowed: an integer in "
                                          r"\[1, 10000000\]"):
        load_loop_config(path)


def test_cli_loop_with_a_missing_suite_starts_nothing(tmp_path):
    path = loop_config(tmp_path, "eval_suite: suites/pick_place_demo_eval.yaml",
                       "eval_suite: suites/missing.yaml")
    out = tmp_path / "out"
    result = clawgym("loop", "--config", str(path), "--out", str(out), timeout=60)
    assert_one_line_error(result, str(path), "eval_suite")
    assert not out.exists()


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "0", "1e9"])
def test_server_timeout_out_of_range_starts_nothing(tmp_path, value):
    from clawgym_ros.commands.loop import run_loop_command

    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"--server-timeout=.* is invalid; allowed: .*86400"):
        run_loop_command("pick_place", str(out), server_timeout=float(value))
    assert not out.exists()


@pytest.mark.parametrize("command", ["synth", "train", "eval", "loop"])
def test_empty_out_is_refused_and_nothing_is_written(tmp_path, command):
    args = {
        "synth": ["synth", "--task", "pick_place", "--episodes", "1", "--seed", "1"],
        "train": ["train", "--dataset", "ab" * 32, "--steps", "5", "--seed", "1"],
        "eval": ["eval", "--policy", "scripted:pick_place", "--suite", "smoke", "--seed", "1"],
        "loop": ["loop", "--config", "pick_place"],
    }[command]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    result = clawgym(*args, "--out", "", cwd=cwd, timeout=60)
    assert_one_line_error(result, "--out=''", "not empty")
    assert list(cwd.iterdir()) == []


def test_train_steps_are_capped_and_the_cap_is_said(tmp_path):
    result = clawgym("train", "--dataset", "ab" * 32, "--steps", str(10**30), "--seed", "1",
                     "--out", str(tmp_path / "out"))
    assert_one_line_error(result, "steps=", "10000000")
    assert not (tmp_path / "out").exists()


def test_scripted_policy_of_an_unknown_task_or_bad_option_fails_at_parse():
    from clawgym_ros.evaluation.rollout import PolicySource

    with pytest.raises(ConfigError, match="policy task='pick_plaice'.*pick_place"):
        PolicySource.parse("scripted:pick_plaice")
    for bad in ("nan", "inf", "-inf"):
        with pytest.raises(ConfigError, match="policy option grasp_height=.*finite"):
            PolicySource.parse(f"scripted:pick_place:grasp_height={bad}")
    with pytest.raises(ConfigError, match="policy option='speed'.*speed_steps"):
        PolicySource.parse("scripted:pick_place:speed=3")
    ok = PolicySource.parse("scripted:pick_place:grasp_height=0.02")
    assert ok.options == (("grasp_height", 0.02),) and math.isfinite(ok.options[0][1])


def test_cli_eval_of_an_unknown_scripted_task_writes_nothing(tmp_path):
    out = tmp_path / "out"
    result = clawgym("eval", "--policy", "scripted:nope", "--suite", "smoke", "--seed", "1",
                     "--out", str(out), "--workers", "1")
    assert_one_line_error(result, "policy task='nope'")
    assert not out.exists()
