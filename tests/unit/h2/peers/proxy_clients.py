#!/usr/bin/python3
"""HTTP/2 clients of sandgate's intercepted connections (python3-h2), several at once.

  proxy_clients.py PROXY_PORT CA AUTHORITY CONN [CONN ...]

Each CONN is USER:TOKEN=PATH[,PATH...][@CLOSE_MS]: one client connection, a CONNECT tunnel
through the explicit listener with that Proxy-Authorization, then TLS (ALPN h2). Every
connection is made first; then each sends all its requests at once and reads the responses.
With @CLOSE_MS a connection is closed (without GOAWAY) CLOSE_MS after its requests went,
whatever it got by then. Prints "I PATH STATUS BODY" per response (I: the connection's index
from 0), sorted.
"""
import base64
import socket
import ssl
import sys
import threading
import time

import h2.connection
import h2.events

proxy, ca, authority = int(sys.argv[1]), sys.argv[2], sys.argv[3]
specs = sys.argv[4:]
out = []
lock = threading.Lock()


def connect(auth):
    s = socket.create_connection(("127.0.0.1", proxy))
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n"
               % (authority, authority, base64.b64encode(auth.encode()).decode())).encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += s.recv(1)
    assert b" 200 " in head.split(b"\r\n")[0], head
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(s, server_hostname=authority.rsplit(":", 1)[0])
    assert t.selected_alpn_protocol() == "h2"
    c = h2.connection.H2Connection()
    c.initiate_connection()
    t.sendall(c.data_to_send())
    return t, c


def run(index, t, c, paths, close_ms, go):
    go.wait()
    sids = {}
    for p in paths:
        sid = c.get_next_available_stream_id()
        sids[sid] = p
        c.send_headers(sid, [(":method", "GET"), (":scheme", "https"),
                             (":authority", authority), (":path", p)], end_stream=True)
    t.sendall(c.data_to_send())
    deadline = time.monotonic() + close_ms / 1000.0 if close_ms is not None else None
    status, body, done = {}, {}, set()
    while len(done) < len(sids):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            t.settimeout(left)
        try:
            data = t.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        for e in c.receive_data(data):
            if isinstance(e, h2.events.ResponseReceived):
                status[e.stream_id] = dict(e.headers)[b":status"].decode()
            elif isinstance(e, h2.events.DataReceived):
                body[e.stream_id] = body.get(e.stream_id, b"") + e.data
                c.acknowledge_received_data(len(e.data), e.stream_id)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                done.add(e.stream_id)
        t.sendall(c.data_to_send())
    t.close()
    with lock:
        for sid, p in sids.items():
            out.append("%d %s %s %s" % (index, p, status.get(sid, "-"),
                                        body.get(sid, b"").decode().strip() or "-"))


conns = []
for spec in specs:
    auth, rest = spec.split("=", 1)
    close_ms = None
    if "@" in rest:
        rest, close = rest.split("@")
        close_ms = int(close)
    t, c = connect(auth)
    conns.append((t, c, rest.split(","), close_ms))
go = threading.Event()
threads = [threading.Thread(target=run, args=(i, t, c, paths, close_ms, go))
           for i, (t, c, paths, close_ms) in enumerate(conns)]
for th in threads:
    th.start()
go.set()
for th in threads:
    th.join()
for line in sorted(out):
    print(line)
