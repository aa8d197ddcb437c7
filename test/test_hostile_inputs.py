"""Hostile inputs (issue 18): every YAML/JSON file goes through the one safe loader, and the CLI
answers each bad input with one line naming the file, exit code 2, quickly, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawgym_ros.errors import ConfigError, shorten
from clawgym_ros.safe_load import MAX_CONFIG_BYTES, load_yaml, parse_json, parse_yaml, read_text

ROOT = Path(__file__).resolve().parents[1]


def alias_bomb() -> str:
    """A "billion laughs" YAML flow list (~300 bytes, 9^9 strings once expanded)."""
    levels = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        levels.append(f"&{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "[" + ", ".join(levels) + "]"


#: Each config input with the bomb where validation walks it (the old loader hung on each).
BOMBS = {
    "loop": "loop:\n  name: BOMB\n",
    "mixture": "mixture:\n  - {task: pick_place, weight: BOMB}\n",
    "weights": "trunk: BOMB\n",
    "suite": (ROOT / "config" / "suites" / "smoke.yaml").read_text().replace(
        "\nname: smoke\n", "\nname: BOMB\n"),
}


def clawgym(*args: str, timeout: float = 60, cwd: Path | None = None
            ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[:2000]
    assert "Traceback" not in result.stderr and "internal error" not in lines[0]
    assert len(lines[0]) < 1200, len(lines[0])
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# --- the loader ---------------------------------------------------------------------------

def test_alias_bomb_is_refused_fast_naming_the_file(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS["loop"].replace("BOMB", alias_bomb()))
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"bomb.yaml: alias='\*a'.*no YAML aliases.*line 2"):
        load_yaml(path)
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("text, match", [
    ("a: " + "[" * 200 + "]" * 200, "nesting"),
    ("a: " + "[" * 100_000, "nesting|valid YAML"),
    ("a: " + "9" * 6000, "valid YAML values"),
    ("a: [1, 2\n", "line"),
    ("a: 1\n\x00", "valid YAML"),
    ("? [a, b]\n: 1\n", "valid YAML"),
])
def test_bad_yaml_is_one_config_error(text, match):
    with pytest.raises(ConfigError, match=match) as err:
        parse_yaml(text, "f.yaml")
    assert str(err.value).startswith("f.yaml: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("text, match", [
    ("[" * 100_000, "nesting"),
    ("[" + "9" * 6000 + "]", "valid JSON values"),
    ('{"a": 1', "line 1 column"),
])
def test_bad_json_is_one_config_error(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_json(text, "f.json")


def test_read_text_refuses_big_binary_and_special_files(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(ConfigError, match=r"big.yaml: size=.*at most"):
        read_text(big)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\x00\x01")
    with pytest.raises(ConfigError, match=r"bin.yaml: encoding='byte 0xff at offset 6'.*UTF-8"):
        read_text(binary, "YAML file")
    with pytest.raises(ConfigError, match="regular"):
        read_text(tmp_path)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="regular"):   # would block forever in open()
        read_text(fifo)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_yaml(bom) == {"a": 1}


def test_error_messages_shorten_values():
    assert len(shorten("x" * 10_000_000)) < 260
    assert shorten("x" * 300).endswith("(300 chars)")
    assert shorten([1] * 1000).endswith("chars)")
    assert shorten("ok") == "'ok'"
    err = ConfigError("task", "y" * 1_000_000, "one of 'pick_place'", "m.yaml")
    assert len(str(err)) < 400 and err.value == "y" * 1_000_000


# --- through the CLI ----------------------------------------------------------------------

@pytest.mark.parametrize("command", ["loop", "synth", "train", "eval", "ablate"])
def test_cli_refuses_alias_bombs_in_every_config_input(tmp_path, command):
    kind = {"synth": "mixture", "train": "weights", "eval": "suite"}.get(command, "loop")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMBS[kind].replace("BOMB", alias_bomb()))
    out = tmp_path / "out"
    args = {
        "loop": ["loop", "--config", str(bomb), "--out", str(out)],
        "synth": ["synth", "--mixture", str(bomb), "--episodes", "2", "--seed", "1",
                  "--out", str(out)],
        "train": ["train", "--dataset", "ab" * 32, "--steps", "5", "--seed", "1",
                  "--out", str(out), "--weights", str(bomb)],
        "eval": ["eval", "--policy", "scripted:pick_place", "--suite", str(bomb),
                 "--seed", "1", "--out", str(out)],
        "ablate": ["ablate", "--config", str(bomb), "--seeds", "2", "--out", str(out)],
    }[command]
    result = clawgym(*args, timeout=20)
    assert_one_line_error(result, str(bomb), "alias")
    assert not out.exists()


def test_cli_names_a_binary_config_file(tmp_path):
    binary = tmp_path / "loop.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    result = clawgym("loop", "--config", str(binary), "--out", str(tmp_path / "out"))
    assert_one_line_error(result, str(binary), "UTF-8")


def test_cli_judgments_file_not_utf8_or_too_deep(tmp_path):
    bad = tmp_path / "j.csv"
    bad.write_bytes(b"item_a,item_b,preferred\n\xff,b,a\n")
    result = clawgym("prefs", "ingest", str(bad), "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(result, str(bad), "UTF-8")
    deep = tmp_path / "j.json"
    deep.write_text("[" * 50_000)
    result = clawgym("prefs", "ingest", str(deep), "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(result, str(deep), "nesting")


def test_cli_error_line_is_short_for_a_huge_value(tmp_path):
    mixture = tmp_path / "mix.yaml"
    mixture.write_text("mixture:\n- task: pick_place\n  weight: " + "x" * 900_000 + "\n")
    result = clawgym("synth", "--mixture", str(mixture), "--episodes", "2", "--seed", "1",
                     "--out", str(tmp_path / "out"))
    assert_one_line_error(result, str(mixture), "chars")


# --- found by test_fuzz_inputs.py ---------------------------------------------------------

def test_non_string_yaml_keys_are_refused_naming_where():
    with pytest.raises(ConfigError, match=r"f.yaml: loop.ranges key=1 .*string key"):
        parse_yaml("loop:\n  ranges:\n    1: [0, 1]\n", "f.yaml")
    with pytest.raises(ConfigError, match=r"\(top level\) key=True"):
        parse_yaml("on: 1\n", "f.yaml")                  # YAML 1.1 reads `on` as true


def test_numbers_beyond_floats_and_overlong_names_are_config_errors(tmp_path):
    from clawgym_ros.config import check_range
    from clawgym_ros.coordinator.graph import find_loop_config
    from clawgym_ros.coordinator.runner import LoopError
    from clawgym_ros.evaluation.suites import load_suite

    with pytest.raises(ConfigError, match="a finite number"):
        check_range("intensity", 10**400, 0.0, 1.0)
    with pytest.raises(ConfigError, match="suite='yyyy"):
        load_suite("y" * 5000)                           # ENAMETOOLONG, not an OSError
    with pytest.raises(LoopError, match=r"\(5000 chars\)"):
        find_loop_config("y" * 5000)


def test_mixture_file_with_an_unknown_task_is_named(tmp_path):
    from clawgym_ros.synthesis.mixture import load_mixture

    path = tmp_path / "mix.yaml"
    path.write_text("mixture:\n- {task: pick_plaice, weight: 1}\n")
    with pytest.raises(ConfigError, match=r"mix.yaml: mixture\[0\].task='pick_plaice'"):
        load_mixture(path)


def test_loop_freeze_groups_must_be_a_list(tmp_path):
    from clawgym_ros.coordinator.config import load_loop_config

    text = (ROOT / "config" / "loop" / "gps_nav.yaml").read_text()
    path = tmp_path / "loop.yaml"
    path.write_text(text.replace("eval_suite: suites/", f"eval_suite: {ROOT}/config/loop/suites/")
                    .replace("freeze_when_functional_met: [head]",
                             "freeze_when_functional_met: 3"))
    with pytest.raises(ConfigError, match="freeze_when_functional_met=3"):
        load_loop_config(path)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("loop:\n  name: a\n  iterations: 3\n  iterations: 300\n")
    with pytest.raises(ConfigError, match=r"loop.yaml: key='iterations'.*once.*line 4"):
        load_yaml(path)
    assert parse_yaml("- {x: 1}\n- {x: 2}\n", "f") == [{"x": 1}, {"x": 2}]


@pytest.mark.parametrize("args", [
    ("train", "--steps", "abc", "--dataset", "x", "--seed", "1", "--out", "o"),
    (),
    ("bogus",),
    ("synth", "--episodes", "9" * 5000, "--seed", "1", "--out", "o"),
])
def test_argument_errors_are_one_line_too(args):
    result = clawgym(*args)
    line = assert_one_line_error(result, "error: ", "--help")
    assert "usage:" not in result.stderr and len(line) < 2100


def test_unknown_suite_templates_are_named_with_the_file_at_load(tmp_path):
    """A suite template typo failed after the first episodes had run, without the file."""
    from clawgym_ros.evaluation.suites import load_suite

    suite = tmp_path / "suite.yaml"
    suite.write_text((ROOT / "config" / "suites" / "smoke.yaml").read_text().replace(
        "templates: [cube, cylinder]", "templates: [cube, cylindr]"))
    with pytest.raises(ConfigError, match=r"suite.yaml: tasks\[0\].templates='cylindr'.*cube"):
        load_suite(suite)
