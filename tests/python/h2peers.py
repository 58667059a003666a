"""Hostile HTTP/2 peers for test_h2_hostile.py, written with the hyper-h2
family from PyPI (h2, and its hyperframe and hpack for frames h2 itself
would never send).

- :class:`RawClient`: a client inside an intercepted tunnel (CONNECT to
  the proxy, TLS trusting crawlcache's CA, ALPN ``h2``) that writes raw
  frames and records what comes back: GOAWAY, RST_STREAM codes, ``:status``
  per stream, DATA bytes, SETTINGS/PING acknowledgements.
- :class:`Origin`: a TLS origin on 127.0.0.1 that offers ALPN ``h2`` only,
  served by h2's server state machine; a test gives it a handler per path
  that may answer normally or write hostile frames.
- :func:`memory`: the proxy's peak and current resident memory.

Everything listens on 127.0.0.1 and every wait has a bound.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections import Counter
from typing import Callable, Iterable, Optional
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: RFC 9113 section 7 error codes, by number.
ERRORS = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR", 5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR",
          7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR", 11: "ENHANCE_YOUR_CALM", 13: "HTTP_1_1_REQUIRED"}  # fmt: skip
#: The default SETTINGS_MAX_FRAME_SIZE (RFC 9113 section 6.5.2).
FRAME = 16384
#: Bound of one socket operation, in seconds.
IO_TIMEOUT = 10.0
#: A 1 MiB pattern large bodies are cut from.
PATTERN = bytes(range(256)) * 4096


def memory(pid: int) -> dict[str, int]:
    """``VmHWM`` (peak), ``VmRSS`` and ``RssAnon`` of process ``pid``, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:", "RssAnon:")):
                key, value = line.split(":")
                out[key.removeprefix("Vm").lower()] = int(value.split()[0])
    return out


class AnonPeak:
    """Samples the ``RssAnon`` of process ``pid`` every 10 ms in a thread:
    ``peak`` is the largest seen, in KiB. VmHWM alone would also count the
    pages of stored bodies the proxy maps to serve hits (page cache, given
    back at once), so the bound is judged on anonymous memory."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, memory(pid)["rssanon"]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(0.01):
            try:
                self.peak = max(self.peak, memory(self.pid)["rssanon"])
            except OSError:
                return

    def stop(self) -> int:
        self.stopping.set()
        self.thread.join(1)
        return self.peak


def split_frames(buf: bytearray) -> list[Frame]:
    """Takes the complete frames off the front of ``buf``."""
    frames = []
    while len(buf) >= 9:
        frame, length = Frame.parse_frame_header(memoryview(bytes(buf[:9])))
        if len(buf) < 9 + length:
            break
        frame.parse_body(memoryview(bytes(buf[9 : 9 + length])))
        del buf[: 9 + length]
        frames.append(frame)
    return frames


def header_block_frames(stream_id: int, block: bytes, *, end_stream: bool, end_headers: bool = True, first: Frame | None = None) -> bytes:
    """A header block cut into HEADERS (or ``first``) and CONTINUATION frames
    of at most :data:`FRAME` bytes (RFC 9113 section 4.3)."""
    chunks = [block[i : i + FRAME] for i in range(0, len(block), FRAME)] or [b""]
    out = []
    for i, chunk in enumerate(chunks):
        flags = ["END_HEADERS"] if end_headers and i == len(chunks) - 1 else []
        if i == 0:
            f = first if first is not None else HeadersFrame(stream_id)
            f.data = chunk
            for flag in flags + (["END_STREAM"] if end_stream and isinstance(f, HeadersFrame) else []):
                f.flags.add(flag)
        else:
            f = ContinuationFrame(stream_id, data=chunk, flags=flags)
        out.append(f.serialize())
    return b"".join(out)


def tunnel(proxy_url: str, authority: str, ca_file: str, alpn: Iterable[str] = ("h2",)) -> ssl.SSLSocket:
    """CONNECT ``authority`` at the proxy, then TLS through the tunnel,
    trusting ``ca_file`` (crawlcache's CA) and offering ``alpn``."""
    u = urlsplit(proxy_url)
    raw = socket.create_connection((u.hostname, u.port), timeout=IO_TIMEOUT)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(4096)
        if not chunk:
            raise ConnectionError(f"the proxy closed the CONNECT: {head!r}")
        head += chunk
    assert head.split(b" ", 2)[1] == b"200", head
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.set_alpn_protocols(list(alpn))
    return ctx.wrap_socket(raw, server_hostname=authority.rsplit(":", 1)[0])


class RawClient:
    """An HTTP/2 client inside an intercepted tunnel that writes raw frames.

    What the proxy sent back is kept: ``goaway`` (error code, last stream
    id, debug data) once one arrived, ``resets`` (stream -> error code),
    ``status`` (stream -> ``:status``), ``received`` (stream -> DATA
    bytes), ``ended`` (streams the proxy ended), ``closed`` once the
    connection is gone (``write_closed`` once writing failed). SETTINGS and PING are acknowledged and received
    DATA is given back as WINDOW_UPDATE unless told otherwise.
    """

    def __init__(self, proxy_url: str, authority: str, ca_file: str, settings: Optional[dict] = None) -> None:
        self.authority = authority
        self.sock = tunnel(proxy_url, authority, ca_file)
        assert self.sock.selected_alpn_protocol() == "h2", "the proxy did not choose h2 by ALPN"
        self.encoder, self.decoder = hpack.Encoder(), hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 20
        self.buf = bytearray()
        self.goaway: Optional[tuple[int, int, bytes]] = None
        self.resets: dict[int, int] = {}
        self.status: dict[int, int] = {}
        self.received: Counter[int] = Counter()
        self.ended: set[int] = set()
        self.closed = self.write_closed = False
        self.remote_settings: dict[int, int] = {}
        self.settings_acks = self.ping_acks = self.pings = 0
        self.answer_pings = self.give_window = True
        self.next_stream = 1
        self._block: Optional[tuple[int, bytearray, bool]] = None
        self.send(PREFACE + SettingsFrame(0, settings=settings or {}).serialize())
        self.pump(lambda c: c.remote_settings != {} and c.settings_acks >= 1)

    # Writing.
    def send(self, data: bytes, timeout: float = IO_TIMEOUT) -> str:
        """Writes ``data``: "ok", "blocked" (the proxy read nothing for
        ``timeout`` s: backpressure) or "closed"."""
        if self.closed or self.write_closed:
            return "closed"
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
            return "ok"
        except socket.timeout:
            return "blocked"
        except OSError:  # what the proxy sent before closing may still be read
            self.write_closed = True
            return "closed"

    def request_headers(self, path: str, method: str = "GET", authority: Optional[str] = None, extra: Iterable[tuple[str, str]] = ()) -> list:
        return [(":method", method), (":scheme", "https"), (":authority", authority or self.authority), (":path", path), *extra]

    def headers(self, headers: list, *, end_stream: bool = True, end_headers: bool = True) -> tuple[int, bytes]:
        """A new stream's id and the HEADERS (+ CONTINUATION) frames opening it."""
        sid = self.next_stream
        self.next_stream += 2
        return sid, header_block_frames(sid, self.encoder.encode(headers), end_stream=end_stream, end_headers=end_headers)

    def get(self, path: str, **kw: object) -> int:
        """Sends a GET (END_STREAM on its HEADERS); returns its stream id."""
        sid, frames = self.headers(self.request_headers(path, **kw))  # type: ignore[arg-type]
        self.send(frames)
        return sid

    # Reading.
    def pump(self, until: Callable[["RawClient"], bool] = lambda c: False, timeout: float = IO_TIMEOUT) -> bool:
        """Reads frames until ``until(self)`` holds (True), the connection
        closes or ``timeout`` s pass (then whether ``until`` holds)."""
        deadline = time.monotonic() + timeout
        while not until(self):
            left = deadline - time.monotonic()
            if self.closed or left <= 0:
                return until(self)
            self.sock.settimeout(min(left, 0.25))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                self.closed = True
                continue
            if not chunk:
                self.closed = True
                continue
            self.buf += chunk
            for f in split_frames(self.buf):
                self._on(f)
        return True

    def drain(self, timeout: float = 0.05) -> None:
        """Reads whatever the proxy has sent by now."""
        self.pump(lambda c: False, timeout)

    def _on(self, f: Frame) -> None:
        if isinstance(f, SettingsFrame):
            if "ACK" in f.flags:
                self.settings_acks += 1
            else:
                self.remote_settings.update(f.settings)
                self.send(SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(f, PingFrame):
            if "ACK" in f.flags:
                self.ping_acks += 1
            else:
                self.pings += 1
                if self.answer_pings:
                    self.send(PingFrame(0, opaque_data=f.opaque_data, flags=["ACK"]).serialize())
        elif isinstance(f, GoAwayFrame):
            self.goaway = (f.error_code, f.last_stream_id, bytes(f.additional_data))
        elif isinstance(f, RstStreamFrame):
            self.resets[f.stream_id] = f.error_code
        elif isinstance(f, (HeadersFrame, ContinuationFrame)):
            if isinstance(f, HeadersFrame):
                self._block = (f.stream_id, bytearray(f.data), "END_STREAM" in f.flags)
            elif self._block is not None:
                self._block[1].extend(f.data)
            if "END_HEADERS" in f.flags and self._block is not None:
                sid, block, end = self._block
                self._block = None
                fields = dict(self.decoder.decode(bytes(block)))
                if ":status" in fields and (sid not in self.status or self.status[sid] < 200):
                    self.status[sid] = int(fields[":status"])
                if end:
                    self.ended.add(sid)
        elif isinstance(f, DataFrame):
            self.received[f.stream_id] += len(f.data)
            if "END_STREAM" in f.flags:
                self.ended.add(f.stream_id)
            if self.give_window and f.flow_controlled_length:
                n = f.flow_controlled_length
                self.send(WindowUpdateFrame(0, window_increment=n).serialize() + WindowUpdateFrame(f.stream_id, window_increment=n).serialize())

    def goaway_name(self) -> Optional[str]:
        return None if self.goaway is None else ERRORS.get(self.goaway[0], str(self.goaway[0]))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


Handler = Callable[["OriginConn", int, int], None]


def page_body(path: str) -> bytes:
    return (f"<html><body><h1>{path}</h1>" + "<p>crawlcache h2 test page</p>" * 30 + "</body></html>").encode()


def serve_page(conn: "OriginConn", sid: int, attempt: int) -> None:
    """A small page, fresh an hour."""
    conn.respond(sid, 200, [("cache-control", "max-age=3600"), ("content-type", "text/html")], page_body(conn.path[sid]))


class Origin:
    """A TLS origin on 127.0.0.1 that offers ALPN ``h2`` only (its
    certificate from the test CA ``ca``), answering with h2's server state
    machine.

    ``routes`` maps a path to a handler ``(conn, stream_id, attempt)``,
    called once the request has ended (``attempt``: how many times this
    path was asked, this one included); a path not in it gets a small page.
    ``settings`` are its SETTINGS (e.g. ``{INITIAL_WINDOW_SIZE: 0}``).
    ``counts`` says how often each path was asked, ``notes`` what the
    connections saw (GOAWAY and RST_STREAM from the proxy, errors),
    ``connections`` how many the proxy opened.
    """

    def __init__(self, pki: tuple, routes: Optional[dict[str, Handler]] = None, settings: Optional[dict] = None) -> None:
        self.ca, cert, key = pki
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(["h2"])
        self.routes = routes or {}
        self.settings = settings or {}
        self.counts: Counter[str] = Counter()
        self.notes: list[str] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.authority = f"localhost:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"https://{self.authority}{path}"

    def note(self, text: str) -> None:
        with self.lock:
            self.notes.append(text)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                s, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(IO_TIMEOUT)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except OSError:
            raw.close()
            return
        with self.lock:
            self.connections += 1
        if tls.selected_alpn_protocol() != "h2":
            self.note(f"a connection without h2 (ALPN {tls.selected_alpn_protocol()!r})")
            tls.close()
            return
        try:
            OriginConn(self, tls).run()
        except (OSError, h2.exceptions.H2Error) as e:
            self.note(f"connection ended: {e!r}")
        finally:
            tls.close()

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()


class OriginConn:
    """One connection of :class:`Origin`: h2's server state machine, a
    body pump that follows flow control, and raw writes for handlers."""

    def __init__(self, origin: Origin, sock: ssl.SSLSocket) -> None:
        self.origin, self.sock = origin, sock
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.path: dict[int, str] = {}
        self.received: Counter[int] = Counter()
        self.outgoing: dict[int, list[int]] = {}  # stream -> [sent, total]
        self.done = False

    def run(self) -> None:
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values=self.origin.settings)
        self.h2.initiate_connection()
        self.flush()
        while not self.done and not self.origin.stopping.is_set():
            self.sock.settimeout(0.2)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                data = None
            if data == b"":
                return
            if data:
                for ev in self.h2.receive_data(data):
                    self.on_event(ev)
            self.pump()
            self.flush()

    def on_event(self, ev: h2.events.Event) -> None:
        o = self.origin
        if isinstance(ev, h2.events.RequestReceived):
            path = dict(ev.headers)[":path"]
            self.path[ev.stream_id] = path
        elif isinstance(ev, h2.events.DataReceived):
            self.received[ev.stream_id] += len(ev.data)
            if ev.flow_controlled_length and o.settings.get(h2.settings.SettingCodes.INITIAL_WINDOW_SIZE) != 0:
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            path = self.path.get(ev.stream_id, "?")
            with o.lock:
                o.counts[path] += 1
                attempt = o.counts[path]
            o.routes.get(path, serve_page)(self, ev.stream_id, attempt)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            o.note(f"GOAWAY {ERRORS.get(ev.error_code, ev.error_code)} from the proxy {ev.additional_data!r}")
            self.done = True
        elif isinstance(ev, h2.events.StreamReset):
            o.note(f"RST_STREAM {ERRORS.get(ev.error_code, ev.error_code)} from the proxy on {self.path.get(ev.stream_id)}")
            self.outgoing.pop(ev.stream_id, None)

    def respond(self, sid: int, status: int, fields: list, body: bytes | int, *, length: Optional[int] = None) -> None:
        """Answers stream ``sid``; ``body`` is bytes or a length cut from
        :data:`PATTERN`; ``length`` overrides the content-length sent."""
        total = body if isinstance(body, int) else len(body)
        cl = total if length is None else length
        self.h2.send_headers(sid, [(":status", str(status)), ("content-length", str(cl)), *fields], end_stream=total == 0)
        if isinstance(body, bytes) and body:
            self.outgoing[sid] = [0, total, body]  # type: ignore[list-item]
        elif total:
            self.outgoing[sid] = [0, total, None]  # type: ignore[list-item]

    def pump(self) -> None:
        """Sends what flow control allows of the bodies in progress."""
        for sid, job in list(self.outgoing.items()):
            sent, total, body = job
            while sent < total:
                try:
                    window = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
                except h2.exceptions.StreamClosedError:
                    break
                if window <= 0:
                    break
                if body is not None:
                    chunk = body[sent : sent + window]
                else:
                    start = sent % len(PATTERN)
                    chunk = PATTERN[start : start + min(window, total - sent)]
                sent += len(chunk)
                self.h2.send_data(sid, chunk, end_stream=sent == total)
                self.flush()
            job[0] = sent
            if sent >= total:
                del self.outgoing[sid]
        self.flush()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.settimeout(IO_TIMEOUT)
            self.sock.sendall(data)

    def raw(self, data: bytes, timeout: float = IO_TIMEOUT) -> bool:
        """Writes frames behind h2's back (after what h2 has queued);
        False when the proxy stopped reading for ``timeout`` s or closed."""
        self.flush()
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def read_goaway(self, timeout: float = 5.0) -> Optional[str]:
        """After raw writes: reads raw frames until the proxy's GOAWAY (its
        code's name) or the end of the connection (None)."""
        buf = bytearray()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(0.25)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
            for f in split_frames(buf):
                if isinstance(f, GoAwayFrame):
                    return ERRORS.get(f.error_code, str(f.error_code))
        return None
