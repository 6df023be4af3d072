"""Drive headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No websocket library is needed: Chromium reads CDP messages from fd 3 and writes them to
fd 4, each JSON message ended by a NUL byte. We record console errors, uncaught exceptions,
log errors and every request whose URL is not the page's own file or a data: URI.
DNS is mapped to nowhere (``--host-resolver-rules``) so a stray URL cannot leave the machine.

    python -m tests.browser.headless REPORT.html SHOT.png   # screenshot one page
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM = os.environ.get("LLMDIAG_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]


def available() -> tuple[bool, str]:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return False, "chromium not installed (apt-get install chromium)"
    return True, ""


@dataclasses.dataclass
class PageLoad:
    console_errors: list[str]
    exceptions: list[str]
    log_errors: list[str]
    requests: list[str]  # URLs other than the page itself and data: URIs
    values: dict[str, object]
    screenshot: bytes | None

    @property
    def errors(self) -> list[str]:
        return self.console_errors + self.exceptions + self.log_errors


class _Pipe:
    def __init__(self, proc, write_fd: int, read_fd: int):
        self.proc, self.w, self.r = proc, write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []

    def _read(self, until: float) -> dict:
        while b"\0" not in self.buf:
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise EOFError("chromium closed the DevTools pipe")
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 20.0) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        until = time.monotonic() + timeout
        while True:
            m = self._read(until)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 20.0) -> dict:
        for m in self.events:
            if m.get("method") == method:
                return m
        until = time.monotonic() + timeout
        while True:
            m = self._read(until)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def drain(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read(until))
        except TimeoutError:
            pass


def load(path: Path, expressions: dict[str, str] | None = None, screenshot: bool = False,
         width: int = 1280, height: int = 900, timeout: float = 30.0) -> PageLoad:
    """Open ``path`` (a local file), evaluate ``expressions`` in the page, optionally screenshot."""
    url = Path(path).resolve().as_uri()
    profile = tempfile.mkdtemp(prefix="llmdiag-chromium-")
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()

    def child_fds() -> None:  # CDP pipe fds must be exactly 3 and 4 in the browser
        a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
        os.dup2(a, 3)
        os.dup2(b, 4)

    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                             "--remote-debugging-pipe", "about:blank"],
                            preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    pipe = _Pipe(proc, to_chrome_w, from_chrome_r)
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
        sid = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.call(f"{domain}.enable", {}, sid)
        pipe.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, sid)
        pipe.call("Page.navigate", {"url": url}, sid)
        pipe.wait_event("Page.loadEventFired", timeout)
        pipe.drain(0.3)
        values = {}
        for name, expr in (expressions or {}).items():
            res = pipe.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, sid)
            values[name] = res.get("result", {}).get("value")
        shot = None
        if screenshot:
            shot = base64.b64decode(pipe.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, sid)["data"])
        pipe.drain(0.2)
        out = PageLoad([], [], [], [], values, shot)
        for m in pipe.events:
            p = m.get("params") or {}
            meth = m.get("method")
            if meth == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif meth == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.exceptions.append(str(d.get("exception", {}).get("description") or d.get("text")))
            elif meth == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.log_errors.append(p["entry"].get("text", ""))
            elif meth == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                if u != url and not u.startswith("data:"):
                    out.requests.append(u)
        return out
    finally:
        try:
            pipe.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    page_path, shot_path = Path(sys.argv[1]), Path(sys.argv[2])
    res = load(page_path, screenshot=True, height=int(sys.argv[3]) if len(sys.argv) > 3 else 900)
    shot_path.write_bytes(res.screenshot or b"")
    print(f"{shot_path}: {len(res.screenshot or b'')} bytes; errors={res.errors} requests={res.requests}")
