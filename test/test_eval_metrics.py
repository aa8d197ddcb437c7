"""Evaluation metrics: intervals, robustness, motion quality, Bradley-Terry, records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation import metrics as M
from clawgym_ros.evaluation.preference import (
    Judgment,
    fit_bradley_terry,
    parse_judgments,
    win_probability,
)
from clawgym_ros.evaluation.records import (
    Disturbance,
    EpisodeResult,
    EpisodeSeries,
    GpsOutage,
    SkillCall,
)
from clawgym_ros.evaluation.stats import bootstrap_mean_ratio, katz_ratio, wilson

STAGES = ("reach", "grasp", "lift", "place")


def episode(i, success, family="none", intensity=0.0, reached=None, split="train", **kw):
    families = () if family == "none" else tuple(family.split("+"))
    if reached is None:
        reached = STAGES if success else STAGES[:1]
    return EpisodeResult(index=i, seed=i, task="pick_place", template=kw.pop("template", "cube"),
                         success=success, stages=STAGES, stages_reached=tuple(reached),
                         split=split, family=family, families=families, intensity=intensity,
                         **kw)


# --- intervals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("k,n,low,high", [
    # Published 4-decimal values (Newcombe 1998, Stat. Med. 17:857, table I, method 3).
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_known_values(k, n, low, high):
    est = wilson(k, n)
    assert est.value == pytest.approx(k / n)
    assert est.low == pytest.approx(low, abs=6e-5)
    assert est.high == pytest.approx(high, abs=6e-5)
    assert wilson(k, n, 0.99).high > est.high


def test_wilson_of_nothing_is_null_and_bad_counts_raise():
    assert wilson(0, 0).to_dict() == {"value": None, "ci": [None, None], "n": 0}
    with pytest.raises(ValueError):
        wilson(11, 10)


def test_katz_ratio_matches_the_formula_and_survives_zero_counts():
    est = katz_ratio(20, 50, 40, 50)
    se = math.sqrt(1 / 20 - 1 / 50 + 1 / 40 - 1 / 50)
    assert est.value == pytest.approx(0.5)
    assert est.low == pytest.approx(0.5 * math.exp(-1.959964 * se), rel=1e-6)
    assert est.high == pytest.approx(0.5 * math.exp(1.959964 * se), rel=1e-6)
    zero = katz_ratio(0, 30, 27, 30)
    # No held-out success: the interval starts at the estimate 0 (the continuity-corrected
    # Katz bounds alone would exclude it).
    assert zero.value == 0.0 and zero.low == 0.0 < zero.high < 0.5
    for x1, n1, x0, n0 in ((0, 6, 2, 6), (6, 6, 1, 6), (3, 4, 4, 4), (1, 50, 50, 50)):
        est = katz_ratio(x1, n1, x0, n0)
        assert est.low <= est.value <= est.high
    assert katz_ratio(5, 10, 0, 10).value is None


def test_bootstrap_mean_ratio_is_seeded_and_brackets_the_point():
    cells = [(25, 30), (15, 30), (5, 30)]
    a = bootstrap_mean_ratio(cells, (27, 30), np.random.default_rng(3), 2000)
    b = bootstrap_mean_ratio(cells, (27, 30), np.random.default_rng(3), 2000)
    assert a == b
    assert a.value == pytest.approx(np.mean([25 / 27, 15 / 27, 5 / 27]))
    assert a.low < a.value < a.high


# --- functional and robustness --------------------------------------------------------------

def test_functional_funnel_failure_stages_legality_and_violations():
    calls = (SkillCall("reach"), SkillCall("grasp", C.SKILL_FAILED, legal=False))
    results = [episode(0, True, skill_calls=calls, violations={"collision": 2}),
               episode(1, False, reached=("reach",), goal_consistent=False),
               episode(2, False, reached=("reach", "grasp", "lift"), goal_consistent=True),
               episode(3, False, reached=STAGES),
               episode(4, False, family="lighting", intensity=0.5)]   # out of scope
    out = M.functional(results, M.MetricsConfig())
    assert out["scope"] == "nominal_train"
    assert out["success"]["n"] == 4 and out["success"]["value"] == 0.25
    funnel = {row["stage"]: row["reached"] for row in out["funnel"]["pick_place"]}
    assert funnel == {"reach": 4, "grasp": 3, "lift": 3, "place": 2, "success": 1}
    assert out["failure_stages"] == {"final_check": 1, "grasp": 1, "place": 1}
    assert out["skill_legality"]["value"] == 0.5 and out["skill_legality"]["n"] == 2
    assert out["violations"]["collision"]["total"] == 2
    assert out["goal_consistency"]["value"] == 0.5


def test_boundary_intensity_interpolates_between_grid_points():
    pts = [(0.0, 0.9), (0.5, 0.7), (1.0, 0.3)]
    assert M.boundary_intensity(pts, 0.5) == pytest.approx(0.75)
    assert M.boundary_intensity(pts, 0.2) is None
    assert M.boundary_intensity([(0.0, 0.4), (1.0, 0.1)], 0.5) == 0.0


def test_robustness_cells_stability_and_gps_recovery():
    results, i = [], 0
    for intensity, wins in ((0.0, 18), (0.5, 14), (1.0, 4)):
        family = "none" if intensity == 0 else "lighting"
        for k in range(20):
            results.append(episode(i, k < wins, family=family, intensity=intensity))
            i += 1
    outage = EpisodeSeries(gps_outages=(GpsOutage(1.0, 9.0, 11.5), GpsOutage(12.0, 20.0)))
    results.append(episode(i, True, series=outage))
    out = M.robustness(results, M.MetricsConfig())
    cells = {(c["family"], c["intensity"]): c for c in out["cells"]}
    assert cells[("lighting", 1.0)]["stability"]["value"] == pytest.approx((4 / 20) / (19 / 21))
    assert out["families"]["lighting"]["boundary"] == pytest.approx(
        0.5 + (14 / 20 - 0.5) * 0.5 / (14 / 20 - 4 / 20))
    assert out["stability"]["value"] == pytest.approx(((14 + 4) / 40) / (19 / 21))
    assert out["gps_recovery"]["outages"] == 2
    assert out["gps_recovery"]["recovered"]["value"] == 0.5
    assert out["gps_recovery"]["recovery_s"]["value"] == pytest.approx(2.5)


def test_generalization_ratio_per_task_and_template():
    results = [episode(k, k < 16) for k in range(20)]
    results += [episode(20 + k, k < 5, split="held_out", template="stack") for k in range(10)]
    out = M.generalization(results, M.MetricsConfig())
    assert out["pooled"]["value"] == pytest.approx(0.5 / 0.8)
    assert out["tasks"]["pick_place"]["ratio"]["value"] == pytest.approx(0.625)
    assert out["templates"]["pick_place/stack"]["success"]["value"] == 0.5


# --- motion quality ---------------------------------------------------------------------------

def test_jerk_from_position_and_from_speed():
    t = np.arange(0, 2, 0.05)
    pos = tuple((x**3, 0.0, 0.0) for x in t)               # d3x/dt3 = 6
    speed = tuple(3 * x**2 for x in t)
    assert M.jerk_rms(EpisodeSeries(20.0, speed, pos)) == pytest.approx(6.0)
    assert M.jerk_rms(EpisodeSeries(20.0, tuple(x**2 for x in t))) == pytest.approx(2.0)


def test_hesitations_ignore_start_end_and_short_stops():
    v = [0.0] * 10 + [0.2] * 10 + [0.0] * 12 + [0.2] * 10 + [0.0] * 4 + [0.2] * 5 + [0.0] * 10
    count, duration = M.hesitations(EpisodeSeries(20.0, tuple(v)), 0.01, 0.3)
    assert count == 1 and duration == pytest.approx(12 / 20)


def test_rhythm_entropy_bounds_and_approach_speed():
    assert M.rhythm_entropy(EpisodeSeries(20.0, (0.1,) * 50), 16, 0.5) == 0.0
    uniform = tuple((k + 0.5) * 0.5 / 16 for k in range(16))
    assert M.rhythm_entropy(EpisodeSeries(20.0, uniform), 16, 0.5) == pytest.approx(1.0)
    s = EpisodeSeries(20.0, (0.3, 0.2, 0.04, 0.02), hand_distance=(0.5, 0.3, 0.1, 0.05))
    assert M.approach_speed(s, 0.15) == pytest.approx(0.03)


def test_recovery_speed_slope_against_disturbance_size():
    sizes = [0.01, 0.02, 0.04, 0.06, 0.08]
    dist = tuple(Disturbance(1.0, s, s / (0.05 + 2.0 * s)) for s in sizes)   # speed = .05 + 2 s
    out = M.recovery_scaling([episode(0, True, series=EpisodeSeries(disturbances=dist))],
                             M.MetricsConfig())
    assert out["slope"]["value"] == pytest.approx(2.0)
    assert out["intercept"] == pytest.approx(0.05)


# --- Bradley-Terry ----------------------------------------------------------------------------

def test_bradley_terry_recovers_the_ranking_of_known_strengths():
    rng = np.random.default_rng(11)
    names = ["p0", "p1", "p2", "p3", "p4"]
    strength = np.array([1.2, 0.6, 0.0, -0.5, -1.3])
    judgments = []
    for _ in range(1500):
        i, j = rng.choice(5, 2, replace=False)
        p = 1 / (1 + math.exp(-(strength[i] - strength[j])))
        judgments.append(Judgment(names[i], names[j], "a" if rng.random() < p else "b"))
    fit = fit_bradley_terry(judgments)
    assert fit.ranking() == names
    est = np.array([fit.scores[fit.items.index(n)] for n in names])
    np.testing.assert_allclose(est - est.mean(), strength - strength.mean(), atol=0.3)
    inside = sum(lo <= s <= hi for lo, s, hi in zip(
        fit.low, strength - strength.mean(), fit.high))
    assert inside >= 4
    assert all(0.05 < hi - lo < 0.6 for lo, hi in zip(fit.low, fit.high))
    assert win_probability(fit, "p0", "p4") > 0.85


def test_bradley_terry_stays_finite_under_separation_and_counts_ties():
    judgments = [Judgment("a", "b", "a")] * 5 + [Judgment("b", "c", "tie")] * 4
    fit = fit_bradley_terry(judgments)
    assert all(math.isfinite(s) for s in fit.scores + fit.low + fit.high)
    assert fit.ranking()[0] == "a"
    assert fit.wins == (5.0, 2.0, 2.0)
    assert abs(sum(fit.scores)) < 1e-8


@pytest.mark.parametrize("text,fragment", [
    ("item_a,item_b,preferred\nx,y,maybe\n", "line 2: preferred='maybe' is invalid; allowed: "
                                             "one of a, b, tie"),
    ("item_a,item_b\nx,y\n", "line 1: column='preferred'"),
    ("item_a,item_b,preferred,score\nx,y,a,3\n", "column='score'"),
    ("item_a,item_b,preferred\nx,y,a\nx,x,b\n", "line 3: item_b='x'"),
    ("item_a,item_b,preferred\nx,y,a,extra\n", "line 2: row='extra'"),
    ('[{"item_a": "x", "item_b": "y", "preferred": "a"}, {"item_a": "x"}]',
     "judgments[1]: item_b=None"),
    ('{"judgments": [{"item_a": "x", "item_b": "y", "preferred": 1}]}', "preferred=1"),
    ("[1, 2", "valid JSON"),
])
def test_judgment_files_fail_with_one_clear_line(text, fragment):
    with pytest.raises(ConfigError) as info:
        parse_judgments(text, "j.csv")
    message = str(info.value)
    assert fragment in message and "j.csv" in message and "\n" not in message


# --- records ----------------------------------------------------------------------------------

def test_episode_result_round_trip_and_validation():
    series = EpisodeSeries(20.0, (0.0, 0.1, 0.2, 0.0), hand_distance=(0.4, 0.3, 0.2, 0.1),
                           disturbances=(Disturbance(0.1, 0.05, 0.3),),
                           gps_outages=(GpsOutage(0.0, 8.0, 9.0),))
    r = episode(3, False, family="lighting+sensor_noise", intensity=0.6, reached=("reach",),
                skill_calls=(SkillCall("reach"),), violations={"joint_limit": 1},
                perturbation={"lighting.ambient": 0.4}, series=series)
    assert EpisodeResult.from_dict(r.to_dict()) == r
    assert r.failed_stage == "grasp"
    with pytest.raises(ConfigError, match="stages_reached"):
        episode(0, False, reached=("grasp",))
    with pytest.raises(ConfigError, match="family"):
        EpisodeResult(index=0, seed=0, task="t", template="x", success=True, stages=STAGES,
                      families=("lighting",), family="none", intensity=0.5)
    with pytest.raises(ConfigError, match="hand_distance"):
        EpisodeSeries(20.0, (0.1, 0.2), hand_distance=(0.3,))
    with pytest.raises(ConfigError, match="colour"):
        EpisodeResult.from_dict({**r.to_dict(), "colour": 1}, source="x.json")
