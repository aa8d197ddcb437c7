"""Evaluation suites: shipped files load, expansion is deterministic and paired, errors name
file, field, value and what is allowed."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.suites import (
    available_suites,
    expand,
    load_suite,
    parse_suite,
    suite_dirs,
)

BASE = {
    "name": "t", "seed": 5, "episodes_per_cell": 3,
    "tasks": [{"task": "pick_place", "templates": ["cube", "cylinder"],
               "held_out_templates": ["stack"]}],
    "cells": {"nominal": True, "sweeps": [{"family": "lighting", "intensities": [0.5, 1.0]}],
              "combinations": [{"families": ["sensor_noise", "lighting"],
                                "intensities": [0.5]}]},
}


def test_shipped_suites_load_and_cover_the_issue():
    names = available_suites()
    assert {"nominal", "perturbation_sweep", "held_out", "handover"} <= set(names)
    sweep = load_suite("perturbation_sweep")
    families = {c.label for c in sweep.cells}
    assert {"none", "lighting", "sensor_noise", "gps_dropout", "dynamics"} <= families
    assert any(len(c.families) > 1 for c in sweep.cells)
    assert all(t.held_out_templates for t in load_suite("held_out").tasks)
    assert [t.task for t in load_suite("handover").tasks] == ["pill_handover"]
    assert load_suite(suite_dirs()[0] / "nominal.yaml").name == "nominal"


def test_expansion_is_deterministic_counted_and_paired_across_cells():
    suite = parse_suite(copy.deepcopy(BASE), "t.yaml")
    specs = expand(suite)
    # train: (1 nominal + 2 sweep + 1 combination cells) x 3; held-out: nominal only x 3
    assert len(specs) == 4 * 3 + 3
    assert {s.family for s in specs if s.split == "held_out"} == {"none"}
    assert [s.index for s in specs] == list(range(len(specs)))
    assert specs == expand(parse_suite(copy.deepcopy(BASE), "t.yaml"))
    nominal = [s for s in specs if s.family == "none" and s.split == "train"]
    lit = [s for s in specs if s.family == "lighting" and s.intensity == 1.0]
    assert [s.seed for s in nominal] == [s.seed for s in lit]           # paired scenes
    assert {s.perturbation_seed for s in nominal}.isdisjoint({s.perturbation_seed for s in lit})
    assert len({s.seed for s in specs if s.split == "train" and s.family == "none"}) == 3
    assert {s.template for s in nominal} == {"cube", "cylinder"}
    assert specs[11].family == "lighting+sensor_noise"
    other = expand(suite, seed=6)
    assert {s.seed for s in other}.isdisjoint({s.seed for s in specs})


def test_adding_a_cell_keeps_the_other_seeds():
    more = copy.deepcopy(BASE)
    more["cells"]["sweeps"].append({"family": "dynamics", "intensities": [0.3]})
    key = lambda s: (s.task, s.template, s.split, s.family, s.intensity, s.seed,  # noqa: E731
                     s.perturbation_seed)
    before = {key(s) for s in expand(parse_suite(copy.deepcopy(BASE), "t.yaml"))}
    after = {key(s) for s in expand(parse_suite(more, "t.yaml"))}
    assert before < after


def test_held_out_cells_can_run_more_episodes_and_keep_the_first_ones():
    """``held_out_episodes_per_cell`` adds held-out episodes only; its first
    ``episodes_per_cell`` are the suite's held-out episodes without the key (seeds included),
    and the suite's description (hence report ids) changes only when the key is set."""
    more = copy.deepcopy(BASE) | {"held_out_episodes_per_cell": 7}
    base, dense = parse_suite(copy.deepcopy(BASE), "t.yaml"), parse_suite(more, "t.yaml")
    assert "held_out_episodes_per_cell" not in base.to_dict()
    assert dense.to_dict()["held_out_episodes_per_cell"] == 7
    strip = lambda specs, split: [dataclasses.replace(s, index=0) for s in specs  # noqa: E731
                                  if s.split == split]
    before, after = expand(base), expand(dense)
    assert strip(after, "train") == strip(before, "train")
    held_before, held_after = strip(before, "held_out"), strip(after, "held_out")
    assert len(held_before) == 3 and len(held_after) == 7
    assert held_after[:3] == held_before
    assert len({s.seed for s in held_after}) == 7
    assert [s.index for s in after] == list(range(len(after)))


@pytest.mark.parametrize("mutate,fragment", [
    (lambda d: d.update(held_out_episodes_per_cell=0),
     "held_out_episodes_per_cell=0 is invalid; allowed: an integer in [1, 100000]"),
    (lambda d: d["cells"]["sweeps"][0].update(family="fog"),
     "cells.sweeps[0].family='fog' is invalid; allowed: one of 'lighting'"),
    (lambda d: d["cells"]["sweeps"][0].update(intensities=[0.5, 0.4]),
     "cells.sweeps[0].intensities[1]=0.4 is invalid; allowed: a value > 0.5"),
    (lambda d: d["cells"]["sweeps"][0].update(intensities=[1.5]),
     "cells.sweeps[0].intensities[0]=1.5 is invalid; allowed: (0, 1]"),
    (lambda d: d["tasks"][0].update(held_out_templates=["cube"]),
     "tasks[0].held_out_templates[0]='cube'"),
    (lambda d: d["tasks"][0].update(task="juggle"), "tasks[0].task='juggle'"),
    (lambda d: d.update(colour="red"), "colour='red' is invalid; allowed: one of the keys"),
    (lambda d: d.update(seed=-1), "seed=-1"),
    (lambda d: d["cells"]["combinations"][0].update(families=["lighting"]),
     "cells.combinations[0].families=['lighting']"),
    (lambda d: d.pop("tasks"), "tasks=None is invalid; allowed: a value (required key)"),
])
def test_invalid_suites_name_file_field_value_and_allowed(tmp_path, mutate, fragment):
    data = copy.deepcopy(BASE)
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_unknown_suite_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match="nominal"):
        load_suite("no_such_suite")
