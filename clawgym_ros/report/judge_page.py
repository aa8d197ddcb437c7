"""The ``clawgym judge`` web page: two episodes side by side, a choice and a reason tag.

Served by Python's ``http.server`` on 127.0.0.1 only. Every request is checked before it is
answered: a client that is not on this machine, or a ``Host`` header that does not name this
machine (a DNS-rebinding page in the rater's browser), is refused with 403 and one line. A
judgment is a ``POST /judgments`` with a JSON body ``{"pair": k, "choice": "a"|"b"|"tie",
"reason": "", "rater": ""}``, the session token (embedded in the page) in the ``X-Judge-Token``
header and ``Content-Type: application/json`` (so another web site cannot post one: it would
need a CORS preflight this server never grants). Malformed bodies (400), unknown pairs (404),
a pair judged before in this session (409), bodies over 4 KiB (413) and other content types
(415) are refused with one line and nothing is written. Accepted judgments go through
:func:`clawgym_ros.evaluation.judge.record` into the run's preference store.

Routes: ``GET /`` (the page), ``GET /pairs.json``, ``GET /frames/<pair>/<a|b>/<k>.png``,
``GET /scores.json`` (Bradley-Terry fit of the run's store), ``POST /judgments``.
"""

from __future__ import annotations

import html
import ipaddress
import json
import re
import secrets
import sys
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from clawgym_ros.errors import ClawgymError, one_line
from clawgym_ros.evaluation.judge import Pair, record
from clawgym_ros.evaluation.preference import PREFERRED, REASONS

LOCAL_HOST = "127.0.0.1"
#: Largest judgment request body (a judgment is ~100 bytes).
MAX_BODY = 4096
TOKEN_HEADER = "X-Judge-Token"
BODY_KEYS = ("pair", "choice", "reason", "rater")
BODY_SHAPE = '{"pair": k, "choice": "a"|"b"|"tie", "reason": "", "rater": ""}'
_FRAME = re.compile(r"^/frames/(\d{1,6})/([ab])/(\d{1,3})\.png$")


class RefusedError(Exception):
    """A request refused with an HTTP status and one line."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def is_local(address: str) -> bool:
    """Whether a client address is this machine's loopback (IPv4, IPv6 or IPv4-mapped)."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


class JudgeSession:
    """The pairs of one judging session and what has been judged (thread-safe).

    Args:
        run_dir: run directory whose preference store receives the judgments.
        pairs: the pairs shown, indexed 0..n-1.
        token: the session token (random when not given); also the session's store key.
    """

    def __init__(self, run_dir: str | Path, pairs: Sequence[Pair], token: str = "") -> None:
        self.run_dir = str(run_dir)
        self.pairs = list(pairs)
        self.token = token or secrets.token_hex(16)
        self.judged: dict[int, str] = {}
        self.done = threading.Event()
        self._lock = threading.Lock()

    def pair(self, text: Any) -> Pair:
        if isinstance(text, bool) or not isinstance(text, int):
            raise RefusedError(HTTPStatus.BAD_REQUEST, f"pair={one_line(repr(text), 60)} is "
                               "invalid; allowed: an integer pair number")
        if not 0 <= text < len(self.pairs):
            raise RefusedError(HTTPStatus.NOT_FOUND, f"unknown pair {text}: this session shows "
                               f"pairs 0..{len(self.pairs) - 1}")
        return self.pairs[text]

    def judge(self, body: dict[str, Any]) -> dict[str, Any]:
        """Validate and store one judgment; returns the reply's JSON object.

        Raises:
            RefusedError: bad fields (400), an unknown pair (404), judged before (409).
        """
        for key in body:
            if key not in BODY_KEYS:
                raise RefusedError(HTTPStatus.BAD_REQUEST, "unknown field "
                                   f"{one_line(repr(key), 60)}; allowed: "
                                   f"{', '.join(BODY_KEYS)}")
        pair = self.pair(body.get("pair"))
        choice = body.get("choice")
        if choice not in PREFERRED:
            raise RefusedError(HTTPStatus.BAD_REQUEST, f"choice={one_line(repr(choice), 60)} is "
                               f"invalid; allowed: {', '.join(PREFERRED)}")
        reason = body.get("reason", "")
        if reason not in ("", *REASONS):
            raise RefusedError(HTTPStatus.BAD_REQUEST, f"reason={one_line(repr(reason), 60)} is "
                               f"invalid; allowed: empty or {', '.join(REASONS)}")
        rater = body.get("rater", "")
        if not isinstance(rater, str) or len(rater) > 100:
            raise RefusedError(HTTPStatus.BAD_REQUEST, "rater is invalid; allowed: a string of at "
                               "most 100 characters")
        with self._lock:
            if pair.index in self.judged:
                raise RefusedError(HTTPStatus.CONFLICT, f"pair {pair.index} was judged in this "
                                   f"session already ({self.judged[pair.index]}); nothing written")
            try:
                added, total = record(self.run_dir, self.token, pair, choice, reason, rater)
            except ClawgymError as err:
                raise RefusedError(HTTPStatus.BAD_REQUEST, one_line(str(err), 300)) from None
            if not added:
                raise RefusedError(HTTPStatus.CONFLICT, f"pair {pair.index} is in the store "
                                   "already for this session; nothing written")
            self.judged[pair.index] = choice
            if len(self.judged) == len(self.pairs):
                self.done.set()
            return {"pair": pair.index, "added": added, "total": total,
                    "remaining": len(self.pairs) - len(self.judged)}

    def pairs_json(self) -> dict[str, Any]:
        with self._lock:
            judged = dict(self.judged)
        return {"pairs": [{**p.summary(), "judged": judged.get(p.index, "")}
                          for p in self.pairs], "reasons": list(REASONS)}

    def scores_json(self) -> dict[str, Any]:
        from clawgym_ros.evaluation.metrics import MetricsConfig
        from clawgym_ros.evaluation.preference import fit_bradley_terry, read_store

        judgments = read_store(self.run_dir)
        if not judgments:
            return {"n": 0, "scores": []}
        return fit_bradley_terry(judgments, ridge=MetricsConfig().bt_ridge).to_dict()


class _Handler(BaseHTTPRequestHandler):
    server: JudgeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 (the base's name)
        pass   # only refusals are printed (see _refuse)

    # --- checks every request passes ----------------------------------------------------------
    def _check_origin(self) -> None:
        client = self.client_address[0]
        if not is_local(client):
            raise RefusedError(HTTPStatus.FORBIDDEN, f"clawgym judge accepts requests from this "
                               f"machine only (127.0.0.1), not from {client}")
        host = self.headers.get("Host", "")
        port = self.server.server_address[1]
        allowed = {f"{name}:{port}" for name in (LOCAL_HOST, "localhost", "[::1]")}
        if host not in allowed:
            names = ", ".join(sorted(allowed))
            raise RefusedError(HTTPStatus.FORBIDDEN, f"Host header {one_line(repr(host), 80)}"
                               f" does not name this machine; allowed: {names}")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any) -> None:
        self._send(HTTPStatus.OK, json.dumps(data).encode(), "application/json")

    def _refuse(self, refused: RefusedError) -> None:
        line = one_line(str(refused), 400)
        print(f"clawgym judge: refused {self.command} {one_line(self.path, 80)} from "
              f"{self.client_address[0]}: {refused.status.value} {line}", file=sys.stderr,
              flush=True)
        self.close_connection = True
        self._send(refused.status, (line + "\n").encode(), "text/plain; charset=utf-8")

    def _route(self, handler: Any) -> None:
        try:
            self._check_origin()
            handler()
        except RefusedError as refused:
            self._refuse(refused)

    # --- methods ------------------------------------------------------------------------------
    def do_GET(self) -> None:   # noqa: N802 (http.server's name)
        self._route(self._get)

    def do_HEAD(self) -> None:   # noqa: N802
        self._route(self._get)

    def do_POST(self) -> None:   # noqa: N802
        self._route(self._post)

    def _other(self) -> None:
        self._route(self._not_allowed)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other   # noqa: N815

    def _not_allowed(self) -> None:
        raise RefusedError(HTTPStatus.METHOD_NOT_ALLOWED, f"method {self.command} is not allowed; "
                           "allowed: GET, HEAD, POST /judgments")

    def _get(self) -> None:
        session = self.server.session
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, page(session).encode(), "text/html; charset=utf-8")
        elif path == "/pairs.json":
            self._json(session.pairs_json())
        elif path == "/scores.json":
            try:
                self._json(session.scores_json())
            except ClawgymError as err:
                raise RefusedError(HTTPStatus.CONFLICT, one_line(str(err), 300)) from None
        elif match := _FRAME.match(path):
            pair = session.pair(int(match.group(1)))
            frames = pair.clip(match.group(2)).frames
            k = int(match.group(3))
            if k >= len(frames):
                raise RefusedError(HTTPStatus.NOT_FOUND, f"unknown frame {k}: pair {pair.index} "
                                   f"has frames 0..{len(frames) - 1}")
            self._send(HTTPStatus.OK, frames[k], "image/png")
        elif path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        else:
            raise RefusedError(HTTPStatus.NOT_FOUND, f"unknown path {one_line(path, 80)}; this "
                               "page serves /, /pairs.json, /scores.json, /frames/..., "
                               "POST /judgments")

    def _post(self) -> None:
        session = self.server.session
        if self.path != "/judgments":
            raise RefusedError(HTTPStatus.NOT_FOUND, f"unknown path {one_line(self.path, 80)}; "
                               "judgments go to POST /judgments")
        if not secrets.compare_digest(self.headers.get(TOKEN_HEADER, ""), session.token):
            raise RefusedError(HTTPStatus.FORBIDDEN, f"missing or wrong {TOKEN_HEADER} header "
                               "(the session token is in the page)")
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise RefusedError(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"Content-Type "
                               f"{one_line(repr(ctype), 60)} is not allowed; allowed: "
                               "application/json")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise RefusedError(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is "
                               "required") from None
        if not 0 < length <= MAX_BODY:
            raise RefusedError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE if length > MAX_BODY
                               else HTTPStatus.BAD_REQUEST,
                               f"body of {length} bytes; allowed: 1..{MAX_BODY}")
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise RefusedError(HTTPStatus.BAD_REQUEST, f"body is not JSON "
                               f"({one_line(str(err), 80)}); allowed: {BODY_SHAPE}") from None
        if not isinstance(body, dict):
            raise RefusedError(HTTPStatus.BAD_REQUEST, "body is not a JSON object; allowed: "
                               + BODY_SHAPE)
        self._json(session.judge(body))


class JudgeServer(ThreadingHTTPServer):
    """A threading HTTP server holding one :class:`JudgeSession`."""

    daemon_threads = False   # server_close() waits for replies in flight

    def __init__(self, session: JudgeSession, port: int = 0, host: str = LOCAL_HOST) -> None:
        # ``host`` other than 127.0.0.1 only for tests of the refusal of non-local clients.
        super().__init__((host, port), _Handler)
        self.session = session

    @property
    def url(self) -> str:
        return f"http://{LOCAL_HOST}:{self.server_address[1]}/"


# --- the page ---------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222;max-width:1100px}
h1{font-size:1.3em;margin:0 0 .3em} #progress{color:#555}
.pair{display:flex;gap:1.5em} .side{flex:1;border:1px solid #ccc;border-radius:6px;padding:.6em}
.side h2{margin:.1em 0 .4em;font-size:1.1em}
.player{width:100%;max-width:400px;border:1px solid #999;background:#eee}
.strip{display:flex;flex-wrap:wrap;gap:2px;margin-top:4px} .strip img{width:23%;opacity:.8}
.strip img.on{outline:2px solid #c60;opacity:1} .caption{font-size:.9em;color:#444}
.controls{margin:1em 0;display:flex;flex-wrap:wrap;gap:.8em;align-items:center}
button{font-size:1.05em;padding:.45em 1.1em;cursor:pointer} fieldset{border:1px solid #ccc}
#status{min-height:1.3em;font-weight:600} #status.err{color:#b00}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:.2em .6em}
"""

_JS = """
const TOKEN = document.body.dataset.token;
let pairs = [], cur = -1, timer = null;
const $ = (id) => document.getElementById(id);
function status(text, err) {
  $('status').textContent = text; $('status').className = err ? 'err' : '';
}
function caption(c) {
  const n = c.stages_reached.length, all = c.stages.length;
  return `stages reached ${n}/${all}: ${c.stages_reached.join(', ') || 'none'} \\u00b7 ` +
         `${c.success ? 'success' : 'no success'} \\u00b7 ${c.times[c.times.length - 1]} s`;
}
function show(k) {
  cur = k; const p = pairs[k];
  $('progress').textContent = `Pair ${k + 1} of ${pairs.length}: ${p.task} / ${p.template}, ` +
    `seed ${p.seed}, cell ${p.cell}`;
  for (const side of ['a', 'b']) {
    const c = p[side], strip = $('strip-' + side);
    strip.innerHTML = '';
    for (let f = 0; f < c.frames; f++) {
      const img = document.createElement('img');
      img.src = `/frames/${k}/${side}/${f}.png`; img.alt = `frame ${f} at ${c.times[f]} s`;
      strip.appendChild(img);
    }
    $('caption-' + side).textContent = caption(c);
  }
  let f = 0; clearInterval(timer);
  const tick = () => {
    for (const side of ['a', 'b']) {
      const n = p[side].frames, i = Math.min(f, n - 1);
      $('player-' + side).src = `/frames/${k}/${side}/${i}.png`;
      [...$('strip-' + side).children].forEach((img, j) => img.classList.toggle('on', j === i));
    }
    f = (f + 1) % Math.max(p.a.frames, p.b.frames);
  };
  tick(); timer = setInterval(tick, 700);
  document.querySelectorAll('input[name=reason]').forEach((r) => { r.checked = r.value === ''; });
}
function next() {
  const k = pairs.findIndex((p) => !p.judged);
  if (k < 0) { finish(); return; }
  show(k);
}
async function finish() {
  clearInterval(timer); $('judging').hidden = true; $('done').hidden = false;
  const s = await (await fetch('/scores.json')).json();
  const rows = s.scores.map((r) => `<tr><td>${r.rank}</td><td>${r.item}</td>` +
    `<td>${r.score.toFixed(3)}</td><td>${r.wins}/${r.comparisons}</td></tr>`).join('');
  $('scores').innerHTML = `<p>All ${pairs.length} pairs judged; the run's store holds ${s.n} ` +
    `judgments. Bradley-Terry scores (the next report fits the same store):</p>` +
    `<table><tr><th>rank</th><th>policy</th><th>score</th><th>wins</th></tr>${rows}</table>`;
}
async function judge(choice) {
  if (cur < 0) return;
  const reason = document.querySelector('input[name=reason]:checked').value;
  const body = JSON.stringify({pair: cur, choice, reason, rater: $('rater').value.trim()});
  const r = await fetch('/judgments', {method: 'POST', body,
    headers: {'Content-Type': 'application/json', 'X-Judge-Token': TOKEN}});
  const text = await r.text();
  if (!r.ok) { status(`refused (${r.status}): ${text.trim()}`, true); return; }
  const reply = JSON.parse(text);
  pairs[cur].judged = choice;
  status(`pair ${cur + 1}: ${choice}${reason ? ' (' + reason + ')' : ''} saved; ` +
         `${reply.total} judgments in the store`, false);
  next();
}
async function load() {
  pairs = (await (await fetch('/pairs.json')).json()).pairs;
  for (const c of ['a', 'b', 'tie']) $('choose-' + c).onclick = () => judge(c);
  next();
}
load();
"""


def page(session: JudgeSession) -> str:
    """The page's HTML (self-contained: no external scripts, styles or fonts)."""
    reasons = "".join(
        f'<label><input type="radio" name="reason" value="{html.escape(r)}"> '
        f'{html.escape(r.replace("_", " "))}</label> ' for r in REASONS)
    sides = "".join(
        f'<div class="side" id="side-{s}"><h2>Episode {s.upper()}</h2>'
        f'<img class="player" id="player-{s}" alt="episode {s.upper()}">'
        f'<div class="caption" id="caption-{s}"></div><div class="strip" id="strip-{s}"></div>'
        f'</div>' for s in ("a", "b"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>clawgym judge</title>
<style>{_CSS}</style></head>
<body data-token="{html.escape(session.token)}">
<h1>Which episode is better?</h1>
<div id="judging"><div id="progress">loading...</div>
<p class="caption">The same task, template and seed run by two policies (which one is A is
drawn per pair). Judge the motion: rhythm, fault tolerance, naturalness, safety.</p>
<div class="pair">{sides}</div>
<div class="controls">
<button id="choose-a">A is better</button><button id="choose-tie">Tie</button>
<button id="choose-b">B is better</button>
<fieldset><legend>reason (optional)</legend>
<label><input type="radio" name="reason" value="" checked> none</label> {reasons}</fieldset>
<label>rater <input id="rater" size="10" maxlength="100"></label>
</div></div>
<div id="status"></div>
<div id="done" hidden><h1>Done</h1><div id="scores"></div></div>
<script>{_JS}</script>
</body></html>
"""
