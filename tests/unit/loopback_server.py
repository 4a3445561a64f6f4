"""A tiny HTTP server on 127.0.0.1 that plays bytes out at a steady rate, like a live feed.

``stop()`` cuts open connections mid-body and refuses new ones; ``start()`` again serves
on the same port, so a client can lose the stream and find it back. ``stall_after``
bytes: every connection sends that much of the payload, then keeps the connection open
and sends nothing more (a feed that hangs).
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHUNK = 4096


class LoopbackStreamServer:
    def __init__(
        self, payload: bytes, bytes_per_s: float, *, stall_after: int | None = None
    ) -> None:
        self.payload = payload
        self.bytes_per_s = bytes_per_s
        self.stall_after = stall_after
        self.connections = 0
        self.stall = threading.Event()  # set: keep connections open but send nothing
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._cut = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/live.ts"

    def start(self) -> None:
        self._cut = threading.Event()
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler_class())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._cut.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner, cut = self, self._cut

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.connections += 1
                self.send_response(200)
                self.send_header("Content-Type", "video/mp2t")
                self.send_header("Connection", "close")
                self.end_headers()
                pause = CHUNK / owner.bytes_per_s
                end = len(owner.payload) if owner.stall_after is None else owner.stall_after
                for at in range(0, len(owner.payload), CHUNK):
                    while (owner.stall.is_set() or at >= end) and not cut.is_set():
                        time.sleep(0.01)
                    if cut.is_set():
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.wfile.write(owner.payload[at : min(at + CHUNK, end)])
                    self.wfile.flush()
                    time.sleep(pause)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
