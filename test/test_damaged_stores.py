"""Damaged stores and OS errors (issue 18): a half-written judgments line, a truncated training
cache, a path the OS refuses end as named problems (one line, exit 2), not internal errors."""

from __future__ import annotations

import argparse
import errno
import json
import time

import numpy as np
import pytest

from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.errors import ConfigError
from test.test_hostile_inputs import assert_one_line_error, clawgym

JUDGMENTS = "item_a,item_b,preferred\nx,y,a\ny,z,b\nx,z,tie\n"


def test_a_half_written_judgments_line_is_named(tmp_path):
    from clawgym_ros.evaluation.preference import ingest, read_store, store_path

    source = tmp_path / "j.csv"
    source.write_text(JUDGMENTS)
    run = tmp_path / "run"
    assert ingest(run, source) == (3, 3)
    store = store_path(run)
    text = store.read_text()
    store.write_text(text + text.splitlines()[0][:25])      # a torn append
    with pytest.raises(ConfigError, match=r"judgments.jsonl: line 4: line=.*damaged"):
        read_store(run)
    with pytest.raises(ConfigError, match="line 4"):
        ingest(run, source)
    result = clawgym("prefs", "show", "--run-dir", str(run))
    assert_one_line_error(result, str(store), "line 4")
    store.write_text(text + "[1, 2]\n")                      # JSON, but not an object
    with pytest.raises(ConfigError, match="line 4"):
        read_store(run)


@pytest.mark.parametrize("damage", ["truncate_obs", "truncate_json", "drop_json_key",
                                    "garbage_action"])
def test_a_damaged_training_cache_is_named_and_rebuilt(tmp_path, damage):
    from clawgym_ros.dataset.cache import training_table
    from clawgym_ros.dataset.table import TableDamagedError, TrainingTable
    from test.test_dataset import _synthesize

    store = ArtifactStore(tmp_path)
    art, _ = _synthesize(store, 1, n=4)
    table = training_table(store, [art.id])
    root, obs = table.root, np.array(table.obs)
    del table
    if damage == "truncate_obs":
        data = (root / "obs.npy").read_bytes()
        (root / "obs.npy").write_bytes(data[:len(data) // 2])
    elif damage == "truncate_json":
        text = (root / "table.json").read_text()
        (root / "table.json").write_text(text[:len(text) // 2])
    elif damage == "drop_json_key":
        meta = json.loads((root / "table.json").read_text())
        del meta["stats"]
        (root / "table.json").write_text(json.dumps(meta))
    else:
        (root / "action.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(TableDamagedError, match=rf"training table {root}"):
        TrainingTable.open(root)
    again = training_table(store, [art.id])                  # rebuilt, not trained on
    assert again.root == root and np.array_equal(again.obs, obs)


def test_os_errors_are_one_line_naming_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "run"                                    # ENOTDIR, even as root
    result = clawgym("synth", "--task", "pick_place", "--episodes", "1", "--seed", "1",
                     "--out", str(out))
    assert_one_line_error(result, "Not a directory (ENOTDIR)", str(out))
    long_out = tmp_path / ("x" * 300)
    result = clawgym("synth", "--task", "pick_place", "--episodes", "1", "--seed", "1",
                     "--out", str(long_out))
    line = assert_one_line_error(result, "File name too long (ENAMETOOLONG)", str(tmp_path))
    assert "chars)" in line


def test_os_error_line_names_errno_and_path_or_run_dir():
    from clawgym_ros.cli import os_error_line

    full = OSError(errno.ENOSPC, "No space left on device")
    args = argparse.Namespace(out="/runs/a")
    assert os_error_line(full, args) == ("No space left on device (ENOSPC) (under the run "
                                         "directory /runs/a)")
    ro = OSError(errno.EROFS, "Read-only file system", "/runs/a/artifacts/.staging")
    assert os_error_line(ro) == "Read-only file system (EROFS): /runs/a/artifacts/.staging"
    denied = PermissionError(errno.EACCES, "Permission denied", "/a", None, "/b")
    assert os_error_line(denied) == "Permission denied (EACCES): /a -> /b"


def test_cli_maps_an_os_error_raised_anywhere(monkeypatch, capsys, tmp_path):
    from clawgym_ros import cli

    def fail(_args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.mcap"))

    parser = cli.build_parser()
    args = parser.parse_args(["report", "ab" * 32, "--run-dir", str(tmp_path)])
    args.handler = fail
    assert cli._run(args) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert err == f"clawgym report: error: No space left on device (ENOSPC): {tmp_path}/x.mcap"


def test_a_damaged_loop_state_is_named_before_any_node_starts(tmp_path):
    out = tmp_path / "run"
    state = out / "loop" / "state.json"
    state.parent.mkdir(parents=True)
    for text in ('{"iteration": 1, "hist', '{"cells": 5}'):
        state.write_text(text)
        result = clawgym("loop", "--config", "pick_place", "--out", str(out), timeout=60)
        assert_one_line_error(result, str(state))
        assert not (out / "logs").exists()              # no node was started


def test_judgments_beyond_the_fit_limits_are_refused_before_the_store(tmp_path):
    """100k judgments of 3000 items took 5 GB and minutes (a dense judgments x items matrix);
    the fit now accumulates pairs, and items / judgments are capped by name."""
    from clawgym_ros.evaluation.preference import (
        MAX_ITEMS,
        MAX_JUDGMENTS,
        fit_bradley_terry,
        ingest,
        load_judgments,
        read_store,
    )

    run = tmp_path / "run"
    many_items = tmp_path / "items.csv"
    many_items.write_text("item_a,item_b,preferred\n" + "".join(
        f"i{k},i{k + 1},a\n" for k in range(0, 2 * MAX_ITEMS, 2)))
    start = time.monotonic()
    with pytest.raises(ConfigError, match=rf"items.csv: items={2 * MAX_ITEMS} .*{MAX_ITEMS}"):
        ingest(run, many_items)
    assert time.monotonic() - start < 5 and read_store(run) == []
    with pytest.raises(ConfigError, match="distinct items"):
        fit_bradley_terry(load_judgments(many_items))
    many_rows = tmp_path / "rows.csv"
    many_rows.write_text("item_a,item_b,preferred\n" + "x,y,a\n" * (MAX_JUDGMENTS + 1))
    with pytest.raises(ConfigError, match=f"at most {MAX_JUDGMENTS}"):
        ingest(run, many_rows)
    ok = tmp_path / "ok.csv"
    ok.write_text("item_a,item_b,preferred\n" + "".join(
        f"i{k % MAX_ITEMS},i{(k * 7 + 1) % MAX_ITEMS},{'ab'[k % 2]}\n" for k in range(5_000)))
    start = time.monotonic()
    assert ingest(run, ok) == (5_000, 5_000)
    fit = fit_bradley_terry(read_store(run))
    assert len(fit.items) == MAX_ITEMS and time.monotonic() - start < 20
