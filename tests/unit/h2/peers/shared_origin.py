#!/usr/bin/python3
"""An HTTP/2 origin over TLS (python3-h2) that tells which of its connections served a request,
for the tests of sandgate's shared upstream connections.

  shared_origin.py CERT KEY STATS_FILE [MAX_CONCURRENT_STREAMS]

Prints port=N once listening. Every accepted connection is numbered from 1 in accept order.
  /conn          200 "conn=N"
  /slow?ms=M     the same, M milliseconds later
  /silent        never answered
  /goaway        "conn=N", then GOAWAY (the connection stays open: the client must not use it)
  /drop?ms=M     the connection is closed M milliseconds later (no GOAWAY): its other
                 streams fail too
STATS_FILE is rewritten on every change as "conns=C resets=R": connections accepted, and
streams the client reset (RST_STREAM received).
"""
import os
import select
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

cert, key, stats_file = sys.argv[1:4]
max_streams = int(sys.argv[4]) if len(sys.argv) > 4 else 100
lock = threading.Lock()
stats = {"conns": 0, "resets": 0}


def bump(name):
    with lock:
        stats[name] += 1
        with open(stats_file + ".tmp", "w") as f:
            f.write("conns=%d resets=%d\n" % (stats["conns"], stats["resets"]))
        os.replace(stats_file + ".tmp", stats_file)


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)


def serve(raw, number):
    try:
        t = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        return
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                             header_encoding="utf-8"))
    c.local_settings = h2.settings.Settings(
        client=False, initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_streams})
    c.initiate_connection()
    t.sendall(c.data_to_send())
    due = []  # (when, stream id)
    goaway_after = set()
    drop_after = set()
    body = ("conn=%d" % number).encode()
    while True:
        timeout = max(0.0, min(w for w, _ in due) - time.monotonic()) if due else None
        if t.pending() == 0:
            ready, _, _ = select.select([t], [], [], timeout)
        else:
            ready = [t]
        if ready:
            try:
                data = t.recv(65536)
            except (OSError, ssl.SSLError):
                return
            if not data:
                return
            for e in c.receive_data(data):
                if isinstance(e, h2.events.RequestReceived):
                    path = dict(e.headers)[":path"]
                    if path.startswith("/slow?ms="):
                        due.append((time.monotonic() + int(path[9:]) / 1000.0, e.stream_id))
                    elif path.startswith("/drop?ms="):
                        drop_after.add(e.stream_id)
                        due.append((time.monotonic() + int(path[9:]) / 1000.0, e.stream_id))
                    elif path == "/goaway":
                        goaway_after.add(e.stream_id)
                        due.append((0.0, e.stream_id))
                    elif path != "/silent":
                        due.append((0.0, e.stream_id))
                elif isinstance(e, h2.events.StreamReset):
                    due = [d for d in due if d[1] != e.stream_id]
                    bump("resets")
                elif isinstance(e, h2.events.DataReceived):
                    c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        now = time.monotonic()
        for when, sid in [d for d in due if d[0] <= now]:
            due.remove((when, sid))
            if sid in drop_after:
                t.close()
                return
            try:
                c.send_headers(sid, [(":status", "200"), ("content-length", str(len(body)))])
                c.send_data(sid, body, end_stream=True)
            except h2.exceptions.StreamClosedError:
                pass
            if sid in goaway_after:
                c.close_connection(last_stream_id=sid)
        try:
            t.sendall(c.data_to_send())
        except (OSError, ssl.SSLError):
            return


print("port=%d" % srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    bump("conns")
    threading.Thread(target=serve, args=(conn, stats["conns"]), daemon=True).start()
