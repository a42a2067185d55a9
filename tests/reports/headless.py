"""A tiny DevTools-protocol driver for Debian's headless Chromium (test helper, loopback only).

Starts `/usr/bin/chromium` with a fresh profile, opens a page, enables Runtime/Log/Page events
*before* navigating, loads a file:// URL, waits for the load event and for the page's charts,
and returns what the page logged plus the values of JavaScript expressions evaluated after load.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)


def chromium_path() -> str | None:
    """Debian's chromium binary, or None when it is not installed."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@dataclass
class PageResult:
    """What a page did: console errors, uncaught exceptions, log errors, evaluated values."""

    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[str]:
        return self.console_errors + self.exceptions + self.log_errors


def _devtools_port(process: subprocess.Popen[str], deadline: float) -> int:
    assert process.stderr is not None
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if match:
            return int(match.group(1))
        if not line and process.poll() is not None:
            break
    raise RuntimeError("chromium did not report a DevTools port")


def _page_ws_url(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
        targets = json.load(response)
    return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")


class _Session:
    def __init__(self, ws: Any, result: PageResult) -> None:
        self.ws, self.result, self.next_id = ws, result, 0
        self.events: list[str] = []

    def _record(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        self.events.append(str(method))
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            self.result.console_errors.append(text)
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.result.exceptions.append(
                str(details.get("exception", {}).get("description", details.get("text")))
            )
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.result.log_errors.append(params["entry"]["text"])

    def call(self, method: str, timeout_s: float = 30, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=timeout_s))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            self._record(message)

    def wait_for(self, method: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while method not in self.events:
            message = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            self._record(message)

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return reply["result"].get("value")


def _visit(session: _Session, html_path: Path, expressions: dict[str, str], ready: str, deadline: float) -> PageResult:  # fmt: skip
    session.result, session.events = PageResult(), []
    session.call("Page.navigate", url=html_path.resolve().as_uri())
    session.wait_for("Page.loadEventFired", deadline - time.monotonic())
    while not session.evaluate(ready) and time.monotonic() < deadline:
        time.sleep(0.1)
    session.result.values = {name: session.evaluate(js) for name, js in expressions.items()}
    session.call("Runtime.evaluate", expression="0")  # collect events that arrived meanwhile
    return session.result


def load_pages(
    html_paths: list[Path], expressions: dict[str, str], ready: str, timeout_s: float = 60
) -> list[PageResult]:
    """Open each file in one headless Chromium (fresh profile); after its load event, poll
    `ready` (a JS boolean) until true, evaluate `expressions` (name -> JS), collect errors."""
    binary = chromium_path()
    if binary is None:
        raise RuntimeError("chromium is not installed")
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="coral-chromium-") as profile:
        process = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            port = _devtools_port(process, deadline)
            with connect(_page_ws_url(port), max_size=None, open_timeout=10) as ws:
                session = _Session(ws, PageResult())
                for domain in ("Page", "Runtime", "Log"):
                    session.call(f"{domain}.enable")
                return [_visit(session, p, expressions, ready, deadline) for p in html_paths]
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
