"""Real local servers that notices are delivered to in tests: a webhook receiver that can answer
well, refuse, hang or drip its answer one byte at a time, and an SMTP server that drips or hangs.

Plain sockets on 127.0.0.1 (no mock): the deliverer's own HTTP client and smtplib talk to them, so
what is measured (how long a deliverer is held, what arrived, how often) is what production does.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Hit:
    headers: dict[str, str]
    body: bytes


@dataclass
class WebhookReceiver:
    """mode: "ok" (204), "status:NNN", "drip" (the answer's status line, one byte every `interval`
    seconds, for `drip_s` seconds before giving up), "hang" (reads the request, never answers).
    Every request that arrived in full is recorded in `hits` (whatever was answered)."""

    mode: str = "ok"
    interval: float = 0.5
    drip_s: float = 30.0
    hits: list[Hit] = field(default_factory=list)
    connections: int = 0
    _sock: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> WebhookReceiver:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(32)
        self._sock.settimeout(0.2)
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._sock is not None
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/hook"

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _addr = self._sock.accept()  # type: ignore[union-attr]
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> Hit | None:
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        return Hit(headers, body)

    def _handle(self, conn: socket.socket) -> None:
        try:
            hit = self._read_request(conn)
            if hit is None:
                return
            self.hits.append(hit)
            mode = self.mode
            if mode == "hang":
                self._stop.wait(self.drip_s)
            elif mode == "drip":
                answer = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
                deadline = time.monotonic() + self.drip_s
                for byte in answer:
                    if time.monotonic() > deadline or self._stop.is_set():
                        break
                    conn.sendall(bytes([byte]))
                    time.sleep(self.interval)
            else:
                status = int(mode.split(":", 1)[1]) if mode.startswith("status:") else 204
                head = f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                conn.sendall(head.encode())
        except OSError:
            pass  # the client went away (that is what a deadline does)
        finally:
            conn.close()


@dataclass
class SMTPDripServer:
    """An SMTP server that misbehaves: "drip-greeting" (the 220 greeting one byte every `interval`
    seconds), "hang-after-greeting" (greets, then never answers), "drip-data" (a well-behaved
    dialogue until DATA's end, whose answer drips)."""

    mode: str = "drip-greeting"
    interval: float = 0.5
    connections: int = 0
    messages: int = 0
    _sock: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> SMTPDripServer:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        assert self._sock is not None
        return self._sock.getsockname()[1]

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _addr = self._sock.accept()  # type: ignore[union-attr]
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket, text: bytes) -> None:
        for byte in text:
            if self._stop.is_set():
                return
            conn.sendall(bytes([byte]))
            time.sleep(self.interval)

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(60)
            if self.mode == "drip-greeting":
                self._drip(conn, b"220 " + b"x" * 200 + b"\r\n")
                return
            conn.sendall(b"220 drip.test ESMTP\r\n")
            if self.mode == "hang-after-greeting":
                self._stop.wait(60)
                return
            reader = conn.makefile("rb")
            in_data = False
            while not self._stop.is_set():
                line = reader.readline()
                if not line:
                    return
                if in_data:
                    if line in (b".\r\n", b".\n"):
                        self.messages += 1
                        self._drip(conn, b"250 " + b"y" * 200 + b"\r\n")
                        return
                    continue
                verb = line[:4].upper()
                if verb in (b"EHLO", b"HELO"):
                    conn.sendall(b"250 drip.test\r\n")
                elif verb == b"DATA":
                    in_data = True
                    conn.sendall(b"354 go ahead\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 ok\r\n")
        except OSError:
            pass
        finally:
            conn.close()
