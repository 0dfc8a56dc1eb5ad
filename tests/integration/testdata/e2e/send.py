#!/usr/bin/env python3
"""A raw client for the end-to-end tests, run inside a sandbox: connects to HOST:PORT (the name
is resolved through the sandbox's DNS, as any program's would be), waits DELAY_MS, sends
PAYLOAD, and prints what came back until the peer closed or 3 s passed.

  send.py HOST PORT DELAY_MS PAYLOAD

DELAY_MS "banner" waits instead for the server's first bytes (up to 5 s), as an ssh client does;
they start the reply.

PAYLOAD is text with \\r and \\n escapes, or "hello:SNI" for a TLS ClientHello naming SNI.
Output: "reply=<repr of the bytes>" then "end=closed|reset|timeout".
"""
import socket
import ssl
import sys
import time


def client_hello(sni):
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=sni)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def main():
    host, port, delay, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if payload.startswith("hello:"):
        data = client_hello(payload[len("hello:"):])
    else:
        data = payload.replace("\\r", "\r").replace("\\n", "\n").encode()
    sock = socket.create_connection((host, port), timeout=5)
    reply, end = b"", "closed"
    if delay == "banner":
        reply = sock.recv(65536)
    else:
        time.sleep(int(delay) / 1000)
    sock.settimeout(3)
    try:
        sock.sendall(data)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    except (ConnectionResetError, BrokenPipeError):
        end = "reset"
    except socket.timeout:
        end = "timeout"
    print("reply=" + repr(reply))
    print("end=" + end)


main()
