#!/usr/bin/python3
"""A python3-h2 HTTP/2 server (h2c, prior knowledge) on 127.0.0.1 that h2_test's
ClientConnection talks to. Prints "port=N" once listening, then serves connections one after
another until stdin closes or it is killed.

  /interim        103 Early Hints, then 200 "final" with trailers grpc-status: 0
  /goaway/K       held until K requests arrived on the connection; then 200 "ok-<id>" to
                  all but the highest, and GOAWAY whose last-stream-id is the second-highest
                  (the highest is never answered)
  /big-head       200 whose head is about 80 KB (over the client's 64 KiB limit)
  anything else   200 with the path as its body
"""
import socket
import sys

import h2.config
import h2.connection
import h2.events


def serve(conn):
    cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection()
    conn.sendall(c.data_to_send())
    held = []  # stream ids of /goaway/K requests
    while True:
        try:
            data = conn.recv(65536)
        except ConnectionResetError:
            return
        if not data:
            return
        for e in c.receive_data(data):
            if isinstance(e, h2.events.RequestReceived):
                path = dict(e.headers)[":path"]
                sid = e.stream_id
                if path == "/interim":
                    c.send_headers(sid, [(":status", "103"), ("link", "</a>; rel=preload")])
                    c.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
                    c.send_data(sid, b"final")
                    c.send_headers(sid, [("grpc-status", "0")], end_stream=True)
                elif path == "/big-head":
                    head = [(":status", "200")] + [(f"x-big-{i}", "v" * 4000) for i in range(20)]
                    c.send_headers(sid, head)
                    c.send_data(sid, b"never read", end_stream=True)
                elif path.startswith("/goaway/"):
                    held.append(sid)
                    if len(held) == int(path.split("/")[2]):
                        last = sorted(held)[-2]
                        for s in held:
                            if s <= last:
                                c.send_headers(s, [(":status", "200")])
                                c.send_data(s, f"ok-{s}".encode(), end_stream=True)
                        c.close_connection(last_stream_id=last)
                else:
                    c.send_headers(sid, [(":status", "200")])
                    c.send_data(sid, path.encode(), end_stream=True)
            elif isinstance(e, h2.events.DataReceived):
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        pending = c.data_to_send()
        if pending:
            conn.sendall(pending)


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    print(f"port={srv.getsockname()[1]}", flush=True)
    while True:
        conn, _ = srv.accept()
        try:
            serve(conn)
        except Exception as e:  # a test's client misbehaving must not end the server
            print(f"error={e!r}", file=sys.stderr, flush=True)
        finally:
            conn.close()


if __name__ == "__main__":
    main()
