#!/usr/bin/python3
"""A python3-h2 (and raw hyperframe) HTTP/2 client that h2_test drives against its
ServerConnection, h2c with prior knowledge on 127.0.0.1. Prints what it saw as key=value lines.

  h2_client.py get PORT PATH [name=value ...]   one request (outbound checks off, so a test
                                                 can send what a browser never would)
  h2_client.py connect PORT                      a CONNECT request
  h2_client.py trailers PORT                     POST /echo, body in pieces, then trailers
  h2_client.py big-header PORT BYTES             a request head of about BYTES
  h2_client.py slow-upload PORT                  POST /hold-body, send while the window lets us
  h2_client.py rapid-reset PORT N [WAIT]         N x (HEADERS + RST_STREAM), then wait for GOAWAY
  h2_client.py continuation PORT N               HEADERS + N CONTINUATION frames, never ending
  h2_client.py ping-flood PORT N                 N PINGs while never reading the ACKs
  h2_client.py settings-entries PORT N [WAIT]    one SETTINGS frame with N entries
"""
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import hpack
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def out(**kv):
    for k, v in kv.items():
        print(f"{k}={v}")
    sys.stdout.flush()


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    cfg = h2.config.H2Configuration(
        client_side=True,
        header_encoding="utf-8",
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
        validate_inbound_headers=False,
    )
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


class Seen:
    def __init__(self):
        self.status = {}
        self.body = {}
        self.trailers = {}
        self.ended = set()
        self.reset = {}
        self.goaway = None
        self.closed = False


def pump(s, c, seen, done, timeout=5.0):
    """Reads and answers frames until done(seen) or the connection closes or time is up."""
    deadline = time.time() + timeout
    while time.time() < deadline and not done(seen):
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            seen.closed = True
            return
        if not data:
            seen.closed = True
            return
        try:
            events = c.receive_data(data)
        except h2.exceptions.ProtocolError:
            events = []
        for e in events:
            if isinstance(e, h2.events.ResponseReceived):
                seen.status[e.stream_id] = dict(e.headers).get(":status")
            elif isinstance(e, h2.events.DataReceived):
                seen.body[e.stream_id] = seen.body.get(e.stream_id, b"") + e.data
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.TrailersReceived):
                seen.trailers[e.stream_id] = dict(e.headers)
            elif isinstance(e, h2.events.StreamEnded):
                seen.ended.add(e.stream_id)
            elif isinstance(e, h2.events.StreamReset):
                seen.reset[e.stream_id] = int(e.error_code)
            elif isinstance(e, h2.events.ConnectionTerminated):
                seen.goaway = int(e.error_code)
        try:
            pending = c.data_to_send()
            if pending:
                s.sendall(pending)
        except (ConnectionResetError, BrokenPipeError):
            seen.closed = True
            return


def stream_done(sid):
    return lambda seen: sid in seen.ended or sid in seen.reset or seen.goaway is not None


def report(seen, sid):
    out(status=seen.status.get(sid, "none"),
        body_len=len(seen.body.get(sid, b"")),
        body=seen.body.get(sid, b"")[:64].decode("latin-1"),
        reset=seen.reset.get(sid, "none"),
        goaway=seen.goaway if seen.goaway is not None else "none")


def request_head(port, method, path):
    return [(":method", method), (":scheme", "http"), (":authority", f"127.0.0.1:{port}"),
            (":path", path)]


def cmd_get(port, path, *extra):
    s, c = connect(port)
    headers = request_head(port, "GET", path)
    for kv in extra:
        name, value = kv.split("=", 1)
        headers.append((name, value))
    c.send_headers(1, headers, end_stream=True)
    s.sendall(c.data_to_send())
    seen = Seen()
    pump(s, c, seen, stream_done(1))
    report(seen, 1)


def cmd_connect(port):
    s, c = connect(port)
    c.send_headers(1, [(":method", "CONNECT"), (":authority", "example.com:443")], end_stream=False)
    s.sendall(c.data_to_send())
    seen = Seen()
    pump(s, c, seen, stream_done(1))
    report(seen, 1)


def cmd_trailers(port):
    s, c = connect(port)
    headers = request_head(port, "POST", "/echo") + [("content-type", "application/grpc"),
                                                       ("te", "trailers")]
    c.send_headers(1, headers, end_stream=False)
    for i in range(5):
        c.send_data(1, f"msg{i};".encode())
    c.send_headers(1, [("x-sum", "42")], end_stream=True)
    s.sendall(c.data_to_send())
    seen = Seen()
    pump(s, c, seen, stream_done(1))
    report(seen, 1)
    t = seen.trailers.get(1, {})
    out(trailer_grpc_status=t.get("grpc-status", "none"), trailer_x_sum=t.get("x-sum", "none"))


def cmd_big_header(port, size):
    s, c = connect(port)
    headers = request_head(port, "GET", "/head")
    piece = 4000
    for i in range(int(size) // piece + 1):
        headers.append((f"x-big-{i}", "v" * piece))
    c.send_headers(1, headers, end_stream=True)
    s.sendall(c.data_to_send())
    seen = Seen()
    pump(s, c, seen, stream_done(1))
    report(seen, 1)
    # The connection still serves a request.
    c.send_headers(3, request_head(port, "GET", "/head"), end_stream=True)
    s.sendall(c.data_to_send())
    pump(s, c, seen, stream_done(3))
    out(after_status=seen.status.get(3, "none"))


def cmd_slow_upload(port):
    s, c = connect(port)
    seen = Seen()
    pump(s, c, seen, lambda seen: False, timeout=0.3)  # the server's SETTINGS and window
    c.send_headers(1, request_head(port, "POST", "/hold-body"), end_stream=False)
    s.sendall(c.data_to_send())
    sent = 0
    chunk = b"x" * 16384
    deadline = time.time() + 3
    while time.time() < deadline:
        window = min(c.local_flow_control_window(1), c.max_outbound_frame_size)
        if window > 0:
            c.send_data(1, chunk[:window])
            sent += window
            s.sendall(c.data_to_send())
            continue
        pump(s, c, seen, lambda seen: False, timeout=0.3)
        if c.local_flow_control_window(1) == 0:
            break
    # Stalled: nothing more is granted while the server does not read.
    pump(s, c, seen, lambda seen: False, timeout=0.5)
    out(sent=sent, window_after=c.local_flow_control_window(1),
        goaway=seen.goaway if seen.goaway is not None else "none")


def cmd_rapid_reset(port, n, wait="5"):
    s, c = connect(port)
    seen = Seen()
    sent = 0
    sid = 1
    try:
        for _ in range(int(n) // 50):
            for _ in range(50):
                c.send_headers(sid, request_head(port, "GET", "/head"), end_stream=True)
                c.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                sid += 2
                sent += 1
            s.sendall(c.data_to_send())
    except (ConnectionResetError, BrokenPipeError, h2.exceptions.ProtocolError):
        pass
    pump(s, c, seen, lambda seen: seen.goaway is not None, timeout=float(wait))
    if seen.goaway is not None and not seen.closed:
        pump(s, c, seen, lambda seen: seen.closed, timeout=5)
    out(sent=sent, goaway=seen.goaway if seen.goaway is not None else "none", closed=seen.closed)


def cmd_continuation(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    enc = hpack.Encoder()
    block = enc.encode(request_head(port, "GET", "/head"))
    h = HeadersFrame(1)
    h.data = block
    h.flags.add("END_STREAM")
    frames = [h.serialize()]
    for i in range(int(n)):
        f = ContinuationFrame(1)
        f.data = enc.encode([(f"x-c{i}", "y")])
        frames.append(f.serialize())
    closed = False
    goaway = "none"
    try:
        s.sendall(b"".join(frames))
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    buf = b""
    deadline = time.time() + 5
    while not closed and time.time() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not data:
            closed = True
            break
        buf += data
    # Frames the server sent: find a GOAWAY (type 7) and its error code.
    i = 0
    while i + 9 <= len(buf):
        length = int.from_bytes(buf[i:i + 3], "big")
        ftype = buf[i + 3]
        if ftype == 7 and i + 9 + 8 <= len(buf):
            goaway = int.from_bytes(buf[i + 9 + 4:i + 9 + 8], "big")
        i += 9 + length
    out(goaway=goaway, closed=closed)


def read_goaway(s, timeout=5.0):
    """Reads until the server closes; returns (GOAWAY error code or "none", closed)."""
    buf = b""
    closed = False
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not data:
            closed = True
            break
        buf += data
    goaway = "none"
    i = 0
    while i + 9 <= len(buf):
        length = int.from_bytes(buf[i:i + 3], "big")
        if buf[i + 3] == 7 and i + 9 + 8 <= len(buf):
            goaway = int.from_bytes(buf[i + 9 + 4:i + 9 + 8], "big")
        i += 9 + length
    return goaway, closed


def cmd_ping_flood(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    # A small receive buffer, never read while flooding: the ACKs back up in the server.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    ping = PingFrame(0)
    ping.opaque_data = b"12345678"
    frame = ping.serialize()
    sent = 0
    try:
        for _ in range(int(n) // 1000):
            s.sendall(frame * 1000)
            sent += 1000
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        pass
    goaway, closed = read_goaway(s)
    out(sent=sent, goaway=goaway, closed=closed)


def cmd_settings_entries(port, n, wait="5"):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    f = SettingsFrame(0)
    f.settings = {}
    payload = b"".join((0x4).to_bytes(2, "big") + (65535 + i).to_bytes(4, "big")
                       for i in range(int(n)))
    header = len(payload).to_bytes(3, "big") + bytes([4, 0]) + (0).to_bytes(4, "big")
    s.sendall(PREFACE + header + payload)
    goaway, closed = read_goaway(s, float(wait))
    out(goaway=goaway, closed=closed)


def main():
    cmd, port, *args = sys.argv[1:]
    {
        "get": cmd_get,
        "connect": cmd_connect,
        "trailers": cmd_trailers,
        "big-header": cmd_big_header,
        "slow-upload": cmd_slow_upload,
        "rapid-reset": cmd_rapid_reset,
        "continuation": cmd_continuation,
        "ping-flood": cmd_ping_flood,
        "settings-entries": cmd_settings_entries,
    }[cmd](int(port), *args)


if __name__ == "__main__":
    main()
