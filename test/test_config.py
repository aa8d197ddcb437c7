"""Config helpers: errors name field, value and allowed range; nested dataclasses load."""

from __future__ import annotations

import dataclasses

import pytest

from clawgym_ros.config import check_choice, check_int, check_range, from_dict, load_yaml
from clawgym_ros.errors import ConfigError


@dataclasses.dataclass
class Inner:
    gain: float = 1.0

    def __post_init__(self) -> None:
        check_range("inner.gain", self.gain, 0.0, 10.0, low_open=True)


@dataclasses.dataclass
class Outer:
    inner: Inner = dataclasses.field(default_factory=Inner)
    mode: str = "free"

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, ("free", "lockstep"))


def test_check_range_message_names_field_value_and_range():
    with pytest.raises(ConfigError) as err:
        check_range("intensity", 1.5, 0.0, 1.0)
    assert str(err.value) == "intensity=1.5 is invalid; allowed: [0, 1]"
    with pytest.raises(ConfigError, match=r"allowed: \(0, 10\]"):
        check_range("gain", 0.0, 0.0, 10.0, low_open=True)
    with pytest.raises(ConfigError, match="a finite number"):
        check_range("x", float("nan"))
    with pytest.raises(ConfigError, match="a number"):
        check_range("x", "3")
    with pytest.raises(ConfigError, match="an integer"):
        check_int("steps", 2.5, 1)


def test_from_dict_builds_nested_dataclasses_with_string_annotations():
    cfg = from_dict(Outer, {"inner": {"gain": 2.0}, "mode": "lockstep"})
    assert cfg.inner == Inner(2.0) and cfg.mode == "lockstep"


def test_from_dict_rejects_unknown_keys_and_bad_values_with_the_source():
    with pytest.raises(ConfigError, match="loop.yaml: modee="):
        from_dict(Outer, {"modee": "free"}, source="loop.yaml")
    with pytest.raises(ConfigError, match="loop.yaml: inner.gain=-1"):
        from_dict(Outer, {"inner": {"gain": -1.0}}, source="loop.yaml")


def test_load_yaml_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="an existing YAML file"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="bad.yaml.*line"):
        load_yaml(bad)


def test_exponent_floats_read_as_floats_in_files_and_options(tmp_path):
    """YAML 1.2's floats without a dot or exponent sign (``3e-6``, ``1.0e5``) are numbers in
    config files and in ``--*-option KEY=VALUE`` items; integers stay integers and text that
    is no number stays text."""
    from clawgym_ros.commands.train import parse_policy_options
    from clawgym_ros.safe_load import load_scalar

    path = tmp_path / "c.yaml"
    path.write_text("lr: 3e-6\nbig: 1.0e5\nold: 3.0e-6\nn: 30\nname: 1e\nneg: -2E+3\n")
    assert load_yaml(path) == {"lr": 3e-6, "big": 1e5, "old": 3e-6, "n": 30, "name": "1e",
                               "neg": -2000.0}
    assert isinstance(load_yaml(path)["n"], int)
    assert parse_policy_options(["lr=3e-6", "n_steps=2048", "mode=direct"]) == {
        "lr": 3e-6, "n_steps": 2048, "mode": "direct"}
    assert load_scalar("{a: 1e-3}") == {"a": 1e-3}
