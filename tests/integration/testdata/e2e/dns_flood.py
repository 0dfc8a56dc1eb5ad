#!/usr/bin/env python3
"""A bounded DNS flood for the end-to-end tests, run inside a sandbox: for SECONDS, about
RATE queries a second for fresh names under ZONE, sent to SERVER:53 over UDP (the sandbox's
nftables rules take any port-53 traffic to sandgate's DNS listener). Replies are read and
counted by rcode; prints "sent=N" and "rcode<R>=N" lines at the end.

  dns_flood.py SERVER ZONE SECONDS RATE
"""
import os
import socket
import sys
import time


def query(name):
    wire = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    return os.urandom(2) + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + wire + b"\x00\x01\x00\x01"


def main():
    server, zone, seconds, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    rcodes = {}
    sent = 0
    start = time.time()
    while time.time() - start < seconds:
        for _ in range(max(1, rate // 100)):
            try:
                sock.sendto(query(f"n{sent}.{zone}"), (server, 53))
                sent += 1
            except BlockingIOError:
                pass
        time.sleep(0.01)
        while True:
            try:
                reply = sock.recv(4096)
            except BlockingIOError:
                break
            rcode = reply[3] & 0x0F if len(reply) > 3 else -1
            rcodes[rcode] = rcodes.get(rcode, 0) + 1
    print(f"sent={sent}")
    for rcode, n in sorted(rcodes.items()):
        print(f"rcode{rcode}={n}")


main()
