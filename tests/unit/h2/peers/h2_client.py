#!/usr/bin/python3
"""A python3-h2 (and raw hyperframe) HTTP/2 client that h2_test drives against its
ServerConnection, h2c with prior knowledge on 127.0.0.1. Prints what it saw as key=value lines.

  h2_client.py get PORT PATH [name=value ...]   one request (outbound checks off, so a test
                                                 can send what a browser never would)
  h2_client.py connect PORT                      a CONNECT request
  h2_client.py trailers PORT [PATH [NAME=VALUE]]  POST PATH (/echo), body in pieces, then
                                                 the trailer NAME=VALUE (x-sum=42)
  h2_client.py parallel PORT N PATH              N GETs of PATH in flight at once; their
                                                 statuses, sorted
  h2_client.py big-header PORT BYTES             a request head of about BYTES
  h2_client.py slow-upload PORT                  POST /hold-body, send while the window lets us
  h2_client.py rapid-reset PORT N [WAIT]         N x (HEADERS + RST_STREAM), then wait for GOAWAY
  h2_client.py continuation PORT N               HEADERS + N CONTINUATION frames, never ending
  h2_client.py ping-flood PORT N                 N PINGs while never reading the ACKs
  h2_client.py settings-entries PORT N [WAIT]    one SETTINGS frame with N entries
  h2_client.py settings-flood PORT N             N empty SETTINGS frames, never reading the ACKs
  h2_client.py continuation PORT N empty         the same with empty CONTINUATION frames
  h2_client.py hpack-bomb PORT REFS              one ~4 KB field indexed, then REFS references
                                                 to it in the same header block
  h2_client.py empty-data PORT N [PATH [WAIT]]   a POST head, then N zero-length DATA frames
  h2_client.py streams PORT N [BYTES]            SETTINGS acknowledged, then N streams opened
                                                 and left open (POST heads, then BYTES of
                                                 each body, never its end)
  h2_client.py conformance PORT CASE             one of h2spec's stream-state cases (CASES
                                                 below) in raw frames; prints the answer
  h2_client.py framing PORT METHOD PATH          one request; how its response was framed
                                                 (DATA frames, which frame ended the stream)

With `--via PROXY_PORT USER:TOKEN CA AUTHORITY` first, every connection is a CONNECT tunnel
through sandgate's explicit listener to AUTHORITY, then TLS (ALPN h2, CA trusted) with the leaf
sandgate serves: the same frames, sent to the daemon's intercepted HTTP/2. Requests then carry
:scheme https and :authority AUTHORITY (PORT is not dialled).
"""
import base64
import socket
import ssl
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
# --via: (proxy port, "user:token", CA file, authority), or None for h2c on 127.0.0.1:PORT.
VIA = None
# What ends a connection, as the reading loops see it.
CLOSED_ERRORS = (ConnectionResetError, BrokenPipeError, ssl.SSLError)


def out(**kv):
    for k, v in kv.items():
        print(f"{k}={v}")
    sys.stdout.flush()


def tcp_connect(port, rcvbuf=None):
    """TCP to 127.0.0.1:PORT. With a small `rcvbuf` (a flood that never reads), also the
    segment size of an Ethernet path (1448), as a sandbox's veth has, rather than loopback's
    64 KB: on loopback a flood's 47-64 KB segments against the server's untuned 128 KiB
    receive buffer can leave the server's kernel advertising a zero window after a
    receive-queue prune (nstat: TcpExtRcvPruned, then TcpExtBeyondWindow for every
    retransmission) while the server waits to read: the flood then ends by the idle timeout
    instead of the limit under test, about one run in seven. SO_RCVBUF is set before connect,
    so that the window scale matches it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1448)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s


def open_socket(port, rcvbuf=None):
    """A connected transport: TCP to 127.0.0.1:PORT, or, with --via, TLS (ALPN h2) inside a
    CONNECT tunnel through the proxy."""
    if VIA is None:
        s = tcp_connect(port, rcvbuf)
        s.settimeout(0.2)
        return s
    proxy, auth, ca, authority = VIA
    s = tcp_connect(proxy, rcvbuf)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n"
               % (authority, authority, base64.b64encode(auth.encode()).decode())).encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            raise SystemExit("proxy closed before the CONNECT answer")
        head += b
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit("CONNECT refused: " + head.decode("latin-1").splitlines()[0])
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(s, server_hostname=authority.rsplit(":", 1)[0])
    if t.selected_alpn_protocol() != "h2":
        raise SystemExit("ALPN chose %r, not h2" % t.selected_alpn_protocol())
    t.settimeout(0.2)
    return t


def connect(port):
    s = open_socket(port)
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
        except CLOSED_ERRORS:
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
        except CLOSED_ERRORS:
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
    if VIA is not None:
        return [(":method", method), (":scheme", "https"), (":authority", VIA[3]),
                (":path", path)]
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


def cmd_trailers(port, path="/echo", trailer="x-sum=42"):
    s, c = connect(port)
    headers = request_head(port, "POST", path) + [("content-type", "application/grpc"),
                                                    ("te", "trailers")]
    c.send_headers(1, headers, end_stream=False)
    for i in range(5):
        c.send_data(1, f"msg{i};".encode())
    c.send_headers(1, [tuple(trailer.split("=", 1))], end_stream=True)
    s.sendall(c.data_to_send())
    seen = Seen()
    pump(s, c, seen, stream_done(1))
    report(seen, 1)
    t = seen.trailers.get(1, {})
    out(trailer_grpc_status=t.get("grpc-status", "none"), trailer_x_sum=t.get("x-sum", "none"))


def cmd_parallel(port, n, path):
    s, c = connect(port)
    ids = [2 * i + 1 for i in range(int(n))]
    for sid in ids:
        c.send_headers(sid, request_head(port, "GET", path), end_stream=True)
    s.sendall(c.data_to_send())
    seen = Seen()
    pump(s, c, seen, lambda seen: all(sid in seen.ended or sid in seen.reset for sid in ids)
         or seen.goaway is not None, timeout=30.0)
    out(statuses=" ".join(sorted(str(seen.status.get(sid, "none")) for sid in ids)))


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
    except CLOSED_ERRORS + (h2.exceptions.ProtocolError, socket.timeout):
        pass
    pump(s, c, seen, lambda seen: seen.goaway is not None, timeout=float(wait))
    if seen.goaway is not None and not seen.closed:
        pump(s, c, seen, lambda seen: seen.closed, timeout=5)
    out(sent=sent, goaway=seen.goaway if seen.goaway is not None else "none", closed=seen.closed)


def cmd_continuation(port, n, empty=""):
    s = open_socket(port)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    enc = hpack.Encoder()
    block = enc.encode(request_head(port, "GET", "/head"))
    h = HeadersFrame(1)
    h.data = block
    h.flags.add("END_STREAM")
    frames = [h.serialize()]
    for i in range(int(n)):
        f = ContinuationFrame(1)
        f.data = b"" if empty else enc.encode([(f"x-c{i}", "y")])
        frames.append(f.serialize())
    closed = False
    try:
        s.sendall(b"".join(frames))
    except CLOSED_ERRORS + (socket.timeout,):
        closed = True
    goaway, was_closed = read_goaway(s) if not closed else ("none", True)
    out(goaway=goaway, closed=closed or was_closed)


def read_frames(s, timeout=5.0, until=None):
    """Reads until the server closes (or until(frames) holds, or time is up); returns
    (frames as (type, flags, stream id, payload), closed)."""
    buf = b""
    closed = False
    frames = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except CLOSED_ERRORS:
            closed = True
            break
        if not data:
            closed = True
            break
        buf += data
        while len(buf) >= 9:
            length = int.from_bytes(buf[0:3], "big")
            if len(buf) < 9 + length:
                break
            sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            frames.append((buf[3], buf[4], sid, buf[9:9 + length]))
            buf = buf[9 + length:]
        if until is not None and until(frames):
            break
    return frames, closed


def goaway_of(frames):
    """The error code of the last GOAWAY (type 7) among frames, or "none"."""
    goaway = "none"
    for ftype, _, _, payload in frames:
        if ftype == 7 and len(payload) >= 8:
            goaway = int.from_bytes(payload[4:8], "big")
    return goaway


def read_goaway(s, timeout=5.0):
    """Reads until the server closes; returns (GOAWAY error code or "none", closed)."""
    frames, closed = read_frames(s, timeout)
    return goaway_of(frames), closed


def send_until_closed(s, data, batch, n):
    """Sends n copies of data, `batch` at a time, until done, the server closes, or it has
    not read for 5 s (it stopped reading: the flood was caught, or it is stuck). A server
    that reads slowly (its replies pile up in its kernel first) must not make us stop early,
    hence not the 0.2 s of the reads; a send that timed out may have sent part of a frame,
    so nothing is sent after it."""
    s.settimeout(5.0)
    sent = 0
    try:
        while sent < n:
            k = min(batch, n - sent)
            s.sendall(data * k)
            sent += k
    except CLOSED_ERRORS + (socket.timeout,):
        pass
    s.settimeout(0.2)
    return sent


def flood(port, frame, n):
    """PREFACE and SETTINGS, then n copies of frame while never reading what comes back (a
    small receive buffer, so the answers back up in the server); then reads to the end."""
    s = open_socket(port, rcvbuf=4096)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    sent = send_until_closed(s, frame, 1000, int(n))
    goaway, closed = read_goaway(s, 10)
    out(sent=sent, goaway=goaway, closed=closed)


def cmd_ping_flood(port, n):
    ping = PingFrame(0)
    ping.opaque_data = b"12345678"
    flood(port, ping.serialize(), n)


def cmd_settings_flood(port, n):
    flood(port, SettingsFrame(0).serialize(), n)


def cmd_settings_entries(port, n, wait="5"):
    s = open_socket(port)
    f = SettingsFrame(0)
    f.settings = {}
    payload = b"".join((0x4).to_bytes(2, "big") + (65535 + i).to_bytes(4, "big")
                       for i in range(int(n)))
    header = len(payload).to_bytes(3, "big") + bytes([4, 0]) + (0).to_bytes(4, "big")
    s.sendall(PREFACE + header + payload)
    goaway, closed = read_goaway(s, float(wait))
    out(goaway=goaway, closed=closed)


def frame(ftype, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


def hpack_int(value, prefix_bits, first):
    """RFC 7541 section 5.1: value with an N-bit prefix, `first` holding the bits above it."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out_bytes = [first | limit]
    value -= limit
    while value >= 128:
        out_bytes.append((value & 0x7F) | 0x80)
        value >>= 7
    out_bytes.append(value)
    return bytes(out_bytes)


def hpack_literal(name, value, indexed=False):
    """A literal field with a new name (not Huffman coded): with incremental indexing (it
    enters the dynamic table) or without."""
    n, v = name.encode(), value.encode()
    return (bytes([0x40 if indexed else 0x00]) + hpack_int(len(n), 7, 0) + n +
            hpack_int(len(v), 7, 0) + v)


def header_frames(sid, block, end_stream):
    """block as HEADERS plus CONTINUATION frames of at most 16384 bytes."""
    pieces = [block[i:i + 16384] for i in range(0, len(block), 16384)] or [b""]
    frames = []
    for i, piece in enumerate(pieces):
        flags = 0x4 if i == len(pieces) - 1 else 0  # END_HEADERS on the last
        if i == 0:
            frames.append(frame(1, flags | (0x1 if end_stream else 0), sid, piece))
        else:
            frames.append(frame(9, flags, sid, piece))
    return b"".join(frames)


def plain_block(port, method, path):
    return b"".join(hpack_literal(n, v) for n, v in request_head(port, method, path))


def statuses(frames, decoder):
    """:status of each stream's response HEADERS among frames (decoded in order)."""
    got = {}
    for ftype, flags, sid, payload in frames:
        if ftype == 1:
            if flags & 0x8:  # PADDED
                payload = payload[1:len(payload) - payload[0]]
            if flags & 0x20:  # PRIORITY
                payload = payload[5:]
            for name, value in decoder.decode(payload):
                if name in (":status", b":status"):
                    got[sid] = value if isinstance(value, str) else value.decode()
    return got


def cmd_hpack_bomb(port, refs):
    """One ~4 KB field enters the dynamic table (index 62), then the same block refers to it
    REFS times with one byte each: ~4 KB x REFS once decompressed. Then a plain request."""
    s = open_socket(port)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    block = (plain_block(port, "GET", "/bomb") + hpack_literal("x-bomb", "a" * 4000, True) +
             bytes([0x80 | 62]) * int(refs))
    s.sendall(header_frames(1, block, True))
    decoder = hpack.Decoder()
    decoder.max_allowed_table_size = 65536
    frames, closed = read_frames(s, 5, lambda f: any(t in (1, 3, 7) and sid in (0, 1)
                                                      for t, _, sid, _ in f))
    status = statuses(frames, decoder).get(1, "none")
    reset = next((int.from_bytes(p[0:4], "big") for t, _, sid, p in frames if t == 3 and sid == 1),
                 "none")
    after = "none"
    if not closed and goaway_of(frames) == "none":
        s.sendall(header_frames(3, plain_block(port, "GET", "/after-bomb"), True))
        more, closed = read_frames(s, 5, lambda f: any(t == 1 and sid == 3 for t, _, sid, _ in f))
        frames += more
        after = statuses(more, decoder).get(3, "none")
    out(status=status, reset=reset, after_status=after, goaway=goaway_of(frames), closed=closed)


def cmd_empty_data(port, n, path="/empty-data", wait="5"):
    s = open_socket(port)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    s.sendall(header_frames(1, plain_block(port, "POST", path), False))
    sent = send_until_closed(s, frame(0, 0, 1), 1000, int(n))
    goaway, closed = read_goaway(s, float(wait))
    out(sent=sent, goaway=goaway, closed=closed)


def cmd_streams(port, n, body_bytes="0"):
    """Acknowledges the server's SETTINGS (so its stream limit is in force), then opens N
    streams that stay open: POST heads, then BODY_BYTES of each body, never its end."""
    s = open_socket(port)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    frames, closed = read_frames(s, 5, lambda f: any(t == 4 and not fl & 1 for t, fl, _, _ in f))
    limit = "none"
    for ftype, flags, _, payload in frames:
        if ftype == 4 and not flags & 1:
            for i in range(0, len(payload) - 5, 6):
                if int.from_bytes(payload[i:i + 2], "big") == 0x3:
                    limit = int.from_bytes(payload[i + 2:i + 6], "big")
    s.sendall(frame(4, 0x1, 0))  # SETTINGS ACK
    # Our ACK is read before the streams: a PING round trip.
    s.sendall(frame(6, 0, 0, b"acked-it"))
    read_frames(s, 5, lambda f: any(t == 6 and fl & 1 for t, fl, _, _ in f))
    streams = b"".join(header_frames(2 * i + 1, plain_block(port, "POST", "/open/%d" % i), False)
                       for i in range(int(n)))
    if int(body_bytes) > 0:
        streams += b"".join(frame(0, 0, 2 * i + 1, b"x" * int(body_bytes)) for i in range(int(n)))
    try:
        s.sendall(streams)
    except CLOSED_ERRORS + (socket.timeout,):
        pass
    frames, closed = read_frames(s, 5)
    refused = sum(1 for t, _, _, p in frames if t == 3 and int.from_bytes(p[0:4], "big") == 7)
    out(limit=limit, refused=refused, goaway=goaway_of(frames), closed=closed)


def answer_of(frames, sid):
    """What the server answered with: the GOAWAY code and the RST_STREAM code on sid."""
    rst = "none"
    for ftype, _, fsid, payload in frames:
        if ftype == 3 and fsid == sid and len(payload) >= 4:
            rst = int.from_bytes(payload[0:4], "big")
    return goaway_of(frames), rst


def stream_ended(sid):
    """until= for read_frames: a HEADERS or DATA frame with END_STREAM on sid, or a reset."""
    return lambda frames: any((t in (0, 1) and fl & 0x1 or t == 3) and fs == sid
                              for t, fl, fs, _ in frames)


def rst_stream(sid, code):
    return frame(3, 0, sid, code.to_bytes(4, "big"))


CANCEL = 8


def case_closed_data_after_rst(s, port):
    s.sendall(header_frames(1, plain_block(port, "POST", "/c"), False) + rst_stream(1, CANCEL) +
              frame(0, 0x1, 1, b"test"))
    return 1


def case_closed_headers_after_rst(s, port):
    s.sendall(header_frames(1, plain_block(port, "POST", "/c"), False) + rst_stream(1, CANCEL) +
              header_frames(1, plain_block(port, "POST", "/c"), True))
    return 1


def case_half_closed_data(s, port):
    s.sendall(header_frames(1, plain_block(port, "GET", "/c"), True) + frame(0, 0x1, 1, b"test"))
    return 1


def case_closed_data(s, port):
    s.sendall(header_frames(1, plain_block(port, "GET", "/c"), True))
    read_frames(s, 5, stream_ended(1))
    s.sendall(frame(0, 0x1, 1, b"test"))
    return 1


def case_closed_headers(s, port):
    s.sendall(header_frames(1, plain_block(port, "GET", "/c"), True))
    read_frames(s, 5, stream_ended(1))
    s.sendall(header_frames(1, plain_block(port, "GET", "/c"), True))
    return 1


def case_lower_stream_id(s, port):
    s.sendall(header_frames(5, plain_block(port, "GET", "/c5"), True) +
              header_frames(3, plain_block(port, "GET", "/c3"), True))
    return 3


# h2spec's names: http2/5.1 (8, 9, 5, 11, 12) and http2/5.1.1 (2).
CASES = {
    "closed-data-after-rst": case_closed_data_after_rst,
    "closed-headers-after-rst": case_closed_headers_after_rst,
    "half-closed-data": case_half_closed_data,
    "closed-data": case_closed_data,
    "closed-headers": case_closed_headers,
    "lower-stream-id": case_lower_stream_id,
}


def cmd_conformance(port, case):
    """After the handshake (SETTINGS both ways, acknowledged), the case's frames; then reads
    until the server closes (or 3 s): its GOAWAY code, its RST_STREAM code on the stream the
    case is about, and whether it closed."""
    s = open_socket(port)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    read_frames(s, 5, lambda f: any(t == 4 and not fl & 1 for t, fl, _, _ in f))
    s.sendall(frame(4, 0x1, 0))
    sid = CASES[case](s, port)
    frames, closed = read_frames(s, 3)
    goaway, rst = answer_of(frames, sid)
    out(goaway=goaway, rst=rst, closed=closed)


def cmd_framing(port, method, path):
    """One request with END_STREAM on its HEADERS; how the response on stream 1 was framed:
    its DATA frames, how many were empty with END_STREAM, which frame type carried END_STREAM
    (headers: a body-less response or trailers), and the status."""
    s = open_socket(port)
    s.sendall(PREFACE + SettingsFrame(0).serialize() +
              header_frames(1, plain_block(port, method, path), True))
    frames, _ = read_frames(s, 5, stream_ended(1))
    decoder = hpack.Decoder()
    data = [(fl, p) for t, fl, sid, p in frames if t == 0 and sid == 1]
    end = [t for t, fl, sid, _ in frames if t in (0, 1) and sid == 1 and fl & 0x1]
    out(status=statuses(frames, decoder).get(1, "none"),
        data_frames=len(data),
        body_len=sum(len(p) for _, p in data),
        empty_end=sum(1 for fl, p in data if fl & 0x1 and not p),
        end_on={0: "data", 1: "headers"}.get(end[0], "none") if end else "none",
        goaway=goaway_of(frames))


def main():
    global VIA
    argv = sys.argv[1:]
    if argv[0] == "--via":
        VIA = (int(argv[1]), argv[2], argv[3], argv[4])
        argv = argv[5:]
    cmd, port, *args = argv
    {
        "get": cmd_get,
        "connect": cmd_connect,
        "trailers": cmd_trailers,
        "parallel": cmd_parallel,
        "big-header": cmd_big_header,
        "slow-upload": cmd_slow_upload,
        "rapid-reset": cmd_rapid_reset,
        "continuation": cmd_continuation,
        "ping-flood": cmd_ping_flood,
        "settings-entries": cmd_settings_entries,
        "settings-flood": cmd_settings_flood,
        "hpack-bomb": cmd_hpack_bomb,
        "empty-data": cmd_empty_data,
        "streams": cmd_streams,
        "conformance": cmd_conformance,
        "framing": cmd_framing,
    }[cmd](int(port), *args)


if __name__ == "__main__":
    main()
