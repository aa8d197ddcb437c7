"""Reports: schema, determinism, gaps, diagnosis, HTML, and the `report` / `prefs` commands."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.cli import main
from clawgym_ros.evaluation.config import EvalConfig
from clawgym_ros.evaluation.metrics import MetricsConfig
from clawgym_ros.evaluation.preference import Judgment, read_store
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.stats import wilson
from clawgym_ros.evaluation.suites import expand, load_suite
from clawgym_ros.evaluation.synthetic import synthetic_results
from clawgym_ros.report.build import build_report, write_report
from clawgym_ros.report.gaps import find_gaps, fmt_estimate
from clawgym_ros.report.html import render_html
from clawgym_ros.report.schema import ReportSchemaError, validate_report
from test.conftest import ROOT

STAGES = ("reach", "grasp", "lift", "place")
HISTORY = [{"iteration": k, "scores": {"functional": {"value": 0.5 + 0.1 * k,
                                                      "ci": [0.4, 0.7], "n": 20}}}
           for k in range(3)]


@pytest.fixture(scope="module")
def smoke():
    suite = load_suite("smoke")
    return suite, synthetic_results(expand(suite))


def cell(start, n, wins, family, intensity, stop_at):
    """n episodes of which `wins` succeed; failures stop at the stages listed in stop_at."""
    families = () if family == "none" else tuple(family.split("+"))
    out = []
    for k in range(n):
        success = k < wins
        stage = stop_at[(k - wins) % len(stop_at)] if not success else None
        reached = STAGES if success else STAGES[:STAGES.index(stage)]
        out.append(EpisodeResult(index=start + k, seed=start + k, task="pick_place",
                                 template="cube", success=success, stages=STAGES,
                                 stages_reached=reached, family=family, families=families,
                                 intensity=intensity))
    return out


def degraded_results():
    """Nominal 0.9; lighting collapses from 0.6 on (failures mostly at grasp); sensor noise
    dips a little only at 1.0; dynamics holds."""
    res = cell(0, 50, 45, "none", 0.0, ["place"])
    res += cell(100, 50, 44, "lighting", 0.3, ["grasp"])
    res += cell(200, 50, 20, "lighting", 0.6, ["grasp"] * 4 + ["lift"])
    res += cell(300, 50, 10, "lighting", 1.0, ["grasp"] * 4 + ["lift"])
    res += cell(400, 50, 45, "sensor_noise", 0.5, ["place"])
    res += cell(500, 50, 38, "sensor_noise", 1.0, ["place"])
    res += cell(600, 50, 46, "dynamics", 1.0, ["lift"])
    return res


def test_generated_report_validates_and_tampering_is_caught(smoke):
    suite, results = smoke
    report = build_report(results, suite, EvalConfig(suite="smoke"), HISTORY,
                          [Judgment("a", "b", "a"), Judgment("b", "c", "b")])
    validate_report(report)
    assert set(report["scores"]) == set(C.DIMENSIONS)
    assert all(report["scores"][d]["value"] is not None for d in C.DIMENSIONS)
    first = report["per_episode"][0]
    assert {"seed", "task", "template", "perturbation", "stages_reached", "metrics"} <= set(first)
    bad = copy.deepcopy(report)
    bad["scores"]["functional"]["ci"] = [0.1]
    with pytest.raises(ReportSchemaError, match="scores/functional/ci"):
        validate_report(bad)
    bad = copy.deepcopy(report)
    bad["gaps"] = [{"condition": "x"}]
    with pytest.raises(ReportSchemaError, match="gaps/0"):
        validate_report(bad)


def test_same_inputs_give_identical_report_files_and_id(tmp_path, smoke):
    suite, results = smoke
    arts = []
    for name in ("one", "two"):
        again = synthetic_results(expand(load_suite("smoke")))
        arts.append(write_report(ArtifactStore(tmp_path / name), list(reversed(again)), suite,
                                 EvalConfig(suite="smoke"), history=HISTORY))
    a, b = arts
    for name in (C.FILE_REPORT_JSON, C.FILE_REPORT_HTML):
        assert (a.path / name).read_bytes() == (b.path / name).read_bytes()
    assert a.id == b.id
    assert a.manifest.seeds == {"suite": suite.seed}
    assert a.manifest.summary["episodes"] == len(results)


def test_a_suite_file_gives_the_same_report_id_from_any_folder(tmp_path, smoke):
    """report.json names a suite file by its file name (the suite's content is in the
    report), so one evaluation run from two checkouts in other folders is one report id; the
    manifest keeps the path it was read from. A suite name stays as given."""
    suite, results = smoke
    arts = []
    for folder in ("a", "b/c"):
        path = tmp_path / folder / "smoke.yaml"
        path.parent.mkdir(parents=True)
        path.write_bytes((ROOT / "config" / "suites" / "smoke.yaml").read_bytes())
        loaded = load_suite(path)
        arts.append(write_report(ArtifactStore(tmp_path / folder / "run"), results, loaded,
                                 EvalConfig(suite=str(path))))
        report = json.loads((arts[-1].path / C.FILE_REPORT_JSON).read_text())
        assert report["config"]["suite"] == "smoke.yaml"
        assert arts[-1].manifest.config["suite"] == str(path)
    assert arts[0].id == arts[1].id
    by_name = write_report(ArtifactStore(tmp_path / "named"), results, suite,
                           EvalConfig(suite="smoke"))
    assert json.loads((by_name.path / C.FILE_REPORT_JSON).read_text())["config"]["suite"] \
        == "smoke"


def test_gaps_are_ranked_with_condition_capability_and_deviation():
    gaps = find_gaps(degraded_results(), MetricsConfig())
    assert [g["rank"] for g in gaps] == list(range(1, len(gaps) + 1))
    assert [g["deviation"] for g in gaps] == sorted((g["deviation"] for g in gaps), reverse=True)
    assert [g["condition"] for g in gaps] == ["lighting>=0.6", "sensor_noise>=1"]
    top = gaps[0]
    assert top["capability"] == "grasp" and top["family"] == "lighting"
    assert top["intensity_min"] == 0.6 and top["significant"]
    assert top["deviation"] == pytest.approx(0.9 - 30 / 100)
    assert top["failure_share"] == pytest.approx(0.8)


def test_diagnosis_names_the_degraded_cell_with_intervals():
    suite = load_suite("smoke")
    report = build_report(degraded_results(), suite, EvalConfig(suite="smoke"))
    nominal, degraded = wilson(45, 50), wilson(30, 100)
    expected = (f"Under lighting intensity >= 0.6, success falls from {fmt_estimate(nominal)} to "
                f"{fmt_estimate(degraded)} (n=100); 80% of failures stop at stage grasp.")
    assert report["diagnosis"][0] == expected
    assert fmt_estimate(nominal) == "0.90 [0.79, 0.96]"
    assert any("lighting, success falls below 0.5 at intensity" in s for s in report["diagnosis"])
    assert any("dynamics, success stays at or above" in s for s in report["diagnosis"])


def test_html_is_self_contained_with_plots_and_diagnosis(smoke):
    suite, results = smoke
    report = build_report(results, suite, EvalConfig(suite="smoke"), HISTORY)
    page = render_html(report)
    assert page.count('src="data:image/svg+xml;base64,') == 4   # radar, curves, funnel, history
    assert report["diagnosis"][0] in page.replace("&gt;", ">").replace("&#x27;", "'")
    assert "<script" not in page and 'src="http' not in page and "href=" not in page
    assert render_html(report) == page


# --- CLI ---------------------------------------------------------------------------------------

def test_report_command_rerenders_atomically_and_reports_errors(tmp_path, smoke, capsys):
    suite, results = smoke
    store = ArtifactStore(tmp_path)
    art = write_report(store, results, suite, EvalConfig(suite="smoke"))
    assert main(["report", art.id[:10], "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith(f"{art.id}.html")
    assert open(out, "rb").read() == (art.path / C.FILE_REPORT_HTML).read_bytes()
    cfg = store.put_files(C.KIND_CONFIG, {"c.yaml": b"a: 1"})
    for ref, fragment in (("zz-top", "malformed"), ("ab" * 32, "unknown"),
                          (cfg.id, "expected a report")):
        assert main(["report", ref, "--run-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip()
        assert fragment in err and len(err.splitlines()) == 1, err
    # A report.json edited by hand no longer matches the schema: one clear line.
    (art.path / C.FILE_REPORT_JSON).write_text(json.dumps({"schema_version": 99}))
    assert main(["report", art.id, "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "schema" in err and len(err.strip().splitlines()) == 1


def test_prefs_ingest_validates_appends_once_and_prints_scores(tmp_path, capsys):
    good = tmp_path / "j.csv"
    good.write_text("item_a,item_b,preferred,rater\n" + "ckpt_new,ckpt_old,a,ann\n" * 6
                    + "ckpt_old,ckpt_new,a,bo\nckpt_old,ckpt_base,tie,bo\n")
    run = tmp_path / "run"
    assert main(["prefs", "ingest", str(good), "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "added 8 judgments" in out
    lines = out.splitlines()
    assert lines[2].split()[:2] == ["1.", "ckpt_new"]
    assert main(["prefs", "ingest", str(good), "--run-dir", str(run)]) == 0
    assert "nothing added" in capsys.readouterr().out
    assert len(read_store(run)) == 8
    bad = tmp_path / "bad.csv"
    bad.write_text("item_a,item_b,preferred\nx,y,a\nx,y,left\n")
    assert main(["prefs", "ingest", str(bad), "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"clawgym prefs: error: {bad}: line 3: preferred='left' is invalid; "
                   "allowed: one of a, b, tie")
    assert len(read_store(run)) == 8


def test_prefs_ingest_of_a_missing_file_is_one_line_without_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "clawgym_ros.cli", "prefs", "ingest",
                             str(tmp_path / "nope.json"), "--run-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "nope.json" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
