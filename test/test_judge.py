"""`clawgym judge` (issue 20): pairs of the same episode from two policies, the local page,
judgments into the run's preference store, and refusals of bad or non-local requests.

The browser test drives the system Chromium (Debian ``chromium``) over the DevTools protocol:
it clicks through 5 pairs, the store then holds those 5 judgments, ``clawgym prefs show`` prints
the Bradley-Terry fit of exactly them, and the next evaluation reports of both policies fit
them too: the preferred policy's preference score rises above its comfort score, the other's
falls below.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from clawgym_ros.evaluation.judge import build_pairs, pick_specs, shown_order
from clawgym_ros.evaluation.metrics import MetricsConfig
from clawgym_ros.evaluation.preference import (
    JUDGMENT_WEIGHT,
    Judgment,
    fit_bradley_terry,
    format_scores,
    judged_preference,
    judgments_digest,
    read_store,
    store_path,
)
from clawgym_ros.evaluation.rollout import PolicySource
from clawgym_ros.evaluation.suites import expand, load_suite
from clawgym_ros.report.judge_page import TOKEN_HEADER, JudgeServer, JudgeSession, is_local
from test.conftest import tiny_suite_yaml

from .browser import Browser, chromium_path

ROOT = Path(__file__).resolve().parents[1]
FIRST = "scripted:pick_place"
SECOND = "scripted:pick_place:speed_steps=15"


def clawgym(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args], capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def pairs():
    specs = pick_specs(expand(load_suite("smoke"), 0), 2)
    return build_pairs(PolicySource.parse(FIRST), PolicySource.parse(SECOND), specs, seed=0,
                       max_steps=40, frames=3, width=64, height=48)


@pytest.fixture
def server(pairs, tmp_path):
    session = JudgeSession(tmp_path / "run", pairs)
    srv = JudgeServer(session, 0)
    import threading

    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(url: str, data: bytes | None = None, headers: dict | None = None,
            method: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_pairs_are_the_same_episode_from_both_policies(pairs):
    assert [p.index for p in pairs] == [0, 1]
    for p in pairs:
        assert {p.a.policy, p.b.policy} == {FIRST, SECOND}
        # which policy is A is drawn per pair from the judging seed
        assert (p.a.policy == SECOND) == shown_order(0, p.index)
        for clip in (p.a, p.b):
            assert len(clip.frames) == 3 and all(f.startswith(b"\x89PNG") for f in clip.frames)
            assert clip.steps == 40 and clip.times[0] == 0.0
        assert p.context.startswith(f"pick_place/{p.spec.template} seed={p.spec.seed}")
    # the two policies move differently: their last frames differ
    assert pairs[0].a.frames[-1] != pairs[0].b.frames[-1]


def test_the_same_policy_twice_is_refused():
    from clawgym_ros.errors import ConfigError

    with pytest.raises(ConfigError, match="a policy other than --a"):
        build_pairs(PolicySource.parse(FIRST), PolicySource.parse(FIRST), [], seed=0)


def test_is_local():
    assert is_local("127.0.0.1") and is_local("127.8.9.1") and is_local("::1")
    assert is_local("::ffff:127.0.0.1")
    assert not is_local("192.0.2.2") and not is_local("10.0.0.1") and not is_local("fd00::2")
    assert not is_local("") and not is_local("localhost")


def test_bad_requests_are_refused_with_one_line_and_nothing_written(server, tmp_path):
    url = server.url
    token = server.session.token
    ok_headers = {TOKEN_HEADER: token, "Content-Type": "application/json"}
    cases = [
        ({"Content-Type": "application/json"}, b'{"pair": 0, "choice": "a"}', 403, "X-Judge"),
        (ok_headers, b'{"pair": 9, "choice": "a"}', 404, "unknown pair 9"),
        (ok_headers, b'{"pair": "0", "choice": "a"}', 400, "pair='0'"),
        (ok_headers, b'{"pair": 0, "choice": "left"}', 400, "allowed: a, b, tie"),
        (ok_headers, b'{"pair": 0, "choice": "a", "reason": "vibes"}', 400, "reason='vibes'"),
        (ok_headers, b'{"pair": 0, "choice": "a", "score": 1}', 400, "unknown field 'score'"),
        (ok_headers, b'{"pair": 0, "choi', 400, "body is not JSON"),
        (ok_headers, b'[0, "a"]', 400, "not a JSON object"),
        (ok_headers, b"\xff\xfe", 400, "body is not JSON"),
        ({TOKEN_HEADER: token, "Content-Type": "text/plain"}, b'{"pair": 0, "choice": "a"}',
         415, "application/json"),
        (ok_headers, b"{" + b" " * 5000 + b"}", 413, "allowed: 1..4096"),
    ]
    for headers, body, status, needle in cases:
        code, text = request(url + "judgments", body, headers)
        assert (code, needle in text) == (status, True), (body[:40], code, text)
        assert text.count("\n") == 1 and len(text) < 400, text
    assert request(url + "nope")[0] == 404
    assert request(url + "frames/0/a/7.png")[0] == 404
    assert request(url + "frames/5/a/0.png")[0] == 404
    assert request(url + "judgments", method="DELETE")[0] == 405
    # a page of another site that reached us by DNS rebinding names itself in Host
    code, text = request(url, headers={"Host": "evil.example"})
    assert code == 403 and "does not name this machine" in text
    assert not store_path(tmp_path / "run").exists()
    # then a good one is stored, and a second judgment of the same pair is refused
    code, text = request(url + "judgments", b'{"pair": 1, "choice": "tie", "reason": '
                         b'"safety", "rater": "t"}', ok_headers)
    assert code == 200 and json.loads(text) == {"pair": 1, "added": 1, "total": 1,
                                                "remaining": 1}
    code, text = request(url + "judgments", b'{"pair": 1, "choice": "a"}', ok_headers)
    assert code == 409 and "judged in this session already" in text
    stored = read_store(tmp_path / "run")
    pair = server.session.pairs[1]
    assert stored == [Judgment(pair.a.policy, pair.b.policy, "tie", "t", pair.context,
                               "safety")]


def _outward_address() -> str | None:
    """An address of this machine that is not loopback (the interface of a default route)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.123", 9))     # no packet is sent for a UDP connect
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if is_local(address) or address == "0.0.0.0" else address


def test_a_request_from_another_machine_is_refused(pairs, tmp_path):
    """The CLI binds 127.0.0.1 only; bound to every interface here, the server still refuses
    a client that is not loopback (the check every request passes)."""
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    session = JudgeSession(tmp_path / "run", pairs)
    srv = JudgeServer(session, 0, host="0.0.0.0")
    import threading

    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        port = srv.server_address[1]
        code, text = request(f"http://{address}:{port}/judgments",
                             b'{"pair": 0, "choice": "a"}',
                             {TOKEN_HEADER: session.token, "Content-Type": "application/json"})
        assert code == 403, text
        assert text == (f"clawgym judge accepts requests from this machine only (127.0.0.1), "
                        f"not from {address}\n")
        assert request(f"http://{address}:{port}/")[0] == 403
        assert request(f"http://127.0.0.1:{port}/")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()
    assert not store_path(tmp_path / "run").exists()


TINY_SUITE = tiny_suite_yaml(1, "one nominal pick_place episode (judge test)")



def _in_process(capsys, *args: str) -> str:
    """`clawgym ARGS` in this process (no interpreter start per call); its stdout."""
    from clawgym_ros.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _report(capsys, run: Path, suite: Path, policy: str) -> dict:
    out = _in_process(capsys, "eval", "--policy", policy, "--suite", str(suite), "--seed", "3",
                      "--out", str(run), "--workers", "1", "--max-steps", "30")
    return json.loads(Path(out.splitlines()[1].split(": ", 1)[1]).read_text())


@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (Debian package "
                    "'chromium': apt-get install chromium): no browser to drive")
@pytest.mark.timeout(240)
def test_browser_clicks_through_five_pairs(tmp_path, capsys):
    run = tmp_path / "run"
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    # before: an empty store; each policy's preference score is its comfort score
    assert "no judgments in this run yet" in _in_process(capsys, "prefs", "show", "--run-dir",
                                                         str(run))
    before = {p: _report(capsys, run, suite, p) for p in (FIRST, SECOND)}
    for report in before.values():
        pref = report["aggregated"]["preference"]
        assert pref["judgments"] is None and "policy" not in pref
        assert report["scores"]["preference"] == pref["comfort"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawgym_ros.cli", "judge", "--a", FIRST, "--b", SECOND,
         "--suite", "smoke", "--seed", "0", "--pairs", "5", "--max-steps", "60", "--frames",
         "4", "--port", "0", "--exit-when-done", "--run-dir", str(run)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()
        assert line.startswith("judge page: http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.split()[2]
        # The rater prefers SECOND in pairs 0, 1, 3 and 4 (a reason each) and ties pair 2.
        reasons = ["rhythm", "", "naturalness", "safety", "fault_tolerance"]
        expected = []
        with Browser(width=960, height=860) as browser:
            browser.goto(url)
            for k in range(5):
                browser.wait_for(f"document.getElementById('progress').textContent"
                                 f".startsWith('Pair {k + 1} of 5')")
                browser.wait_for("[...document.querySelectorAll('.player')].every("
                                 "i => i.complete && i.naturalWidth > 0)")
                if k == 1:
                    browser.eval("window.scrollTo(0, 0)")
                    # all digits of the 63-bit seed (a JavaScript number would round it)
                    seed = expand(load_suite("smoke"), 0)[1].seed
                    assert f"seed {seed}," in browser.eval(
                        "document.getElementById('progress').textContent")
                    browser.screenshot(tmp_path / "judge_page.png")
                second_is_a = shown_order(0, k)
                choice = "tie" if k == 2 else ("a" if second_is_a else "b")
                if reasons[k]:
                    browser.click(f"input[name=reason][value={reasons[k]}]")
                browser.click(f"#choose-{choice}")
                browser.wait_for(f"document.getElementById('status').textContent"
                                 f".startsWith('pair {k + 1}: {choice}')")
                a, b = (SECOND, FIRST) if second_is_a else (FIRST, SECOND)
                expected.append((a, b, choice, reasons[k]))
            text = browser.wait_for("document.getElementById('done').hidden === false && "
                                    "document.getElementById('scores').textContent")
            assert "All 5 pairs judged; the run's store holds 5 judgments" in text
            browser.screenshot(tmp_path / "judge_done.png")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "5 of 5 pairs judged" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stored = read_store(run)
    assert [(j.item_a, j.item_b, j.preferred, j.reason) for j in stored] == expected
    assert all(j.context.startswith("pick_place/") for j in stored)
    fit = fit_bradley_terry(stored, ridge=MetricsConfig().bt_ridge)
    assert fit.ranking() == [SECOND, FIRST]
    shown = _in_process(capsys, "prefs", "show", "--run-dir", str(run))
    assert shown.strip().splitlines() == format_scores(fit)
    # the next reports fit the store as it is now (the judgments from the page), and each
    # policy's preference score moves the way the rater judged: SECOND up, FIRST down
    for policy in (FIRST, SECOND):
        report = _report(capsys, run, suite, policy)
        pref = report["aggregated"]["preference"]
        assert pref["judgments"] == {**fit.to_dict(), "digest": judgments_digest(stored)}
        judged = judged_preference(fit, policy)
        w = JUDGMENT_WEIGHT
        assert pref["policy"]["item"] == policy and pref["policy"]["judged"] == judged.to_dict()
        comfort = before[policy]["scores"]["preference"]["value"]
        assert pref["comfort"]["value"] == comfort          # same episodes, same motion
        score = report["scores"]["preference"]["value"]
        assert score == pytest.approx((1 - w) * comfort + w * judged.value)
        assert (score > comfort) == (policy == SECOND) and judged.n == 5
    assert (tmp_path / "judge_page.png").stat().st_size > 1000
    keep = os.environ.get("CLAWGYM_JUDGE_SCREENSHOT")
    if keep:
        Path(keep).write_bytes((tmp_path / "judge_page.png").read_bytes())


def test_judgment_files_take_an_optional_reason_tag(tmp_path):
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.evaluation.preference import ingest, parse_judgments

    rows = parse_judgments("item_a,item_b,preferred,reason\nx,y,a,Rhythm\nx,y,b,\n", "f.csv")
    assert [j.reason for j in rows] == ["rhythm", ""]
    # stored lines without a reason stay as they were before the field existed
    assert "reason" not in rows[1].to_dict() and rows[0].to_dict()["reason"] == "rhythm"
    with pytest.raises(ConfigError, match=r"f.csv: line 2: reason='speed' is invalid; allowed: "
                       r"empty or one of rhythm, fault_tolerance, naturalness, safety"):
        parse_judgments("item_a,item_b,preferred,reason\nx,y,a,speed\n", "f.csv")
    path = tmp_path / "j.json"
    path.write_text('[{"item_a": "x", "item_b": "y", "preferred": "tie", "reason": "safety"}]')
    assert ingest(tmp_path / "run", path) == (1, 1)
    assert ingest(tmp_path / "run", path) == (0, 1)      # the same file again adds nothing
    assert read_store(tmp_path / "run")[0].reason == "safety"
