"""A real headless Chromium driven over the Chrome DevTools protocol (CDP), for page tests.

The system Chromium (Debian package ``chromium``) is started headless with a remote-debugging
port; its page target is driven through a websocket (``websockets``, already a pinned
dependency). Clicks are real mouse events at an element's centre (``Input.dispatchMouseEvent``),
not ``element.click()`` calls, so hidden or covered controls fail the way they would for a
person.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any


def chromium_path() -> str | None:
    """The system Chromium, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with one page (a context manager)."""

    def __init__(self, width: int = 1100, height: int = 800, timeout: float = 30.0) -> None:
        from websockets.sync.client import connect

        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium is not installed")
        self._profile = tempfile.mkdtemp(prefix="clawgym-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
             "about:blank"],
            # Its own temporary files (the singleton socket's org.chromium.Chromium.* folder,
            # left behind when it is terminated) go into the profile, removed by close().
            env={**os.environ, "TMPDIR": self._profile},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + timeout
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if match:
                port = int(match.group(1))
                break
        if port is None:
            self.close()
            raise RuntimeError("chromium did not open its DevTools port")
        # Keep draining its log, or a full pipe would block the browser.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t["type"] == "page")
        self._connection = connect(page["webSocketDebuggerUrl"], max_size=None,
                                   open_timeout=timeout)
        self.ws = self._connection.__enter__()
        self._ids = itertools.count(1)
        self.timeout = timeout
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One CDP command; returns its result (events in between are dropped)."""
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=self.timeout))
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (promises awaited); returns the JSON value."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"page never satisfied: {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A left mouse click at the centre of the element ``selector`` selects."""
        box = self.eval(f"""(() => {{
            const e = document.querySelector({json.dumps(selector)});
            if (!e) return null;
            e.scrollIntoView({{block: 'center'}});
            const r = e.getBoundingClientRect();
            return {{x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width, h: r.height}};
        }})()""")
        if not box or not box["w"] or not box["h"]:
            raise RuntimeError(f"no visible element {selector!r}")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"],
                      button="left", clickCount=1)

    def screenshot(self, path: str | Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "_connection", None) is not None:
            self._connection.__exit__(None, None, None)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
