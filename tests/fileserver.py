"""A real HTTP file server on 127.0.0.1 with Range support and scripted misbehaviour.

The download tests and the fault tests drive :mod:`psp.data.sources` against it: it drops the
connection mid-body, leaves out ``Content-Length``, answers 503, ignores ``Range``, or serves a
200 HTML error page, the ways real servers fail.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

ERROR_PAGE = b"<!DOCTYPE html>\n<html><body><h1>Service unavailable</h1></body></html>\n"


@dataclass
class ServerState:
    files: dict[str, bytes] = field(default_factory=dict)
    drop_after: int | None = None  # the next response stops after this many body bytes
    ignore_range: bool = False  # answer 200 with the whole file even when asked for a range
    fail_next: int = 0  # answer this many requests with 503 first
    no_length: bool = False  # send no Content-Length: the body ends where the connection does
    error_page_next: int = 0  # answer this many requests with a 200 HTML error page first
    requests: list[tuple[str, str | None, int]] = field(default_factory=list)


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``state.files``; each request is recorded before any byte of the answer is sent."""

    def do_GET(self):  # noqa: N802 (http.server naming)
        state: ServerState = self.server.state
        body = state.files.get(self.path)
        wanted = self.headers.get("Range")

        def record(status: int) -> None:
            state.requests.append((self.path, wanted, status))

        if body is None:
            record(404)
            self.send_error(404)
            return
        if state.fail_next:
            state.fail_next -= 1
            record(503)
            self.send_error(503)
            return
        if state.error_page_next:
            state.error_page_next -= 1
            record(200)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(ERROR_PAGE)))
            self.end_headers()
            self.wfile.write(ERROR_PAGE)
            return
        start, status = 0, 200
        if wanted and not state.ignore_range:
            start = int(re.fullmatch(r"bytes=(\d+)-", wanted).group(1))
            if start >= len(body):
                record(416)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        record(status)
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        payload = body[start:]
        if not state.no_length:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if state.drop_after is not None:
            payload, state.drop_after = payload[: state.drop_after], None
            self.close_connection = True
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def serve() -> Iterator[http.server.ThreadingHTTPServer]:
    """Start a server on a free port; ``.state`` scripts it, ``.base`` is its URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    httpd.state = ServerState()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()
