#!/usr/bin/env python3
"""percall.py - what one S2 request or one S3 tunnel costs the daemon, in counts that do not
depend on how loaded the machine is: heap allocations (an LD_PRELOAD shim, alloc_count.c),
user-space instructions (valgrind's callgrind, all threads) and, on request, system calls
(strace -f -c, each one listed).

  bench/proxy/percall.py                        # both scenarios, both counts, release binary
  bench/proxy/percall.py --bin OLD --bin NEW    # A/B: the same counts for two binaries
  bench/proxy/percall.py --scenario S3 --count allocs
  bench/proxy/percall.py --scenario S3 --count syscalls

S2 is the harness's forward request (an absolute-form GET of 100 bytes with
Proxy-Authorization, one keep-alive connection, one request at a time); S3 its tunnel
(connect, CONNECT, 200, GET with Connection: close, the response, close). Each figure is
(count after N2 operations - count after N1) / (N2 - N1), each run against a fresh daemon,
so start-up, shutdown and the first connection's costs cancel. The daemon runs with the
audit log on (config like config/bench.toml, S1-S4 part) against a small origin in this
process. Kernel time is not in these counts: use the harness (bench/proxy/run.sh) for CPU.
"""
import argparse
import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BODY = b"x" * 100
AUTH = base64.b64encode(b"bench:bench").decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the origin: HTTP/1.1, a 100-byte body, keep-alive unless the request says close -------

def serve_origin(listener):
    def handle(conn):
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                close = b"connection: close" in head.lower()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                             b"%s\r\n%s" % (len(BODY), b"Connection: close\r\n" if close else b"",
                                            BODY))
                if close:
                    return

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


# --- the client ---------------------------------------------------------------------------

def read_response(sock, buf):
    """Reads one response with a Content-Length body; returns (status, rest of buf)."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("connection closed before a response head")
        buf += data
    head, buf = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    length = int(m.group(1)) if m else 0
    while len(buf) < length:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("connection closed inside a body")
        buf += data
    return status, buf[length:]


def run_s2(proxy_port, origin_port, n):
    req = (f"GET http://127.0.0.1:{origin_port}/small HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n"
           f"Proxy-Authorization: Basic {AUTH}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", proxy_port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        for _ in range(n):
            s.sendall(req)
            status, buf = read_response(s, buf)
            if status != 200:
                raise RuntimeError(f"S2: status {status}")


def run_s3(proxy_port, origin_port, n):
    target = f"127.0.0.1:{origin_port}"
    connect = (f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
               f"Proxy-Authorization: Basic {AUTH}\r\n\r\n").encode()
    get = (f"GET /small HTTP/1.1\r\nHost: {target}\r\nUser-Agent: percall\r\n"
           f"Connection: close\r\n\r\n").encode()
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", proxy_port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(connect)
            status, buf = read_response(s, b"")
            if status != 200 or buf:
                raise RuntimeError(f"S3: CONNECT answered {status}")
            s.sendall(get)
            status, buf = read_response(s, b"")
            if status != 200:
                raise RuntimeError(f"S3: GET answered {status}")
            while s.recv(65536):  # the origin closes
                pass


SCENARIOS = {"S2": run_s2, "S3": run_s3}

CONFIG = """workers = 0
sandboxes_dir = ""
[listeners]
explicit = ["127.0.0.1:{port}"]
[limits]
max_connections = 20000
max_connections_per_sandbox = 20000
max_unauthenticated_per_source = 1024
[log]
audit = "{dir}/audit.log"
[sandboxes.bench]
token = "bench"
ports = [{origin}]
allow_cidrs = ["127.0.0.1/32"]
"""


def wait_listening(port, proc, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {proc.returncode} at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("daemon did not listen")


def measure(binary, scenario, count, n, origin_port, work, shim):
    """Runs the daemon for n operations of `scenario`; returns the count."""
    port = free_port()
    conf = os.path.join(work, "sandgate.toml")
    with open(conf, "w") as f:
        f.write(CONFIG.format(port=port, dir=work, origin=origin_port))
    out = os.path.join(work, f"{count}.out")
    if os.path.exists(out):
        os.unlink(out)
    env = dict(os.environ)
    cmd = [binary, "--config", conf]
    if count == "allocs":
        env["LD_PRELOAD"] = shim
        env["ALLOC_COUNT_FILE"] = out
    elif count == "syscalls":
        cmd = ["strace", "-f", "-c", "-o", out] + cmd
    else:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "daemon.log"), "w"))
    try:
        wait_listening(port, proc, 60)
        SCENARIOS[scenario](port, origin_port, n)
        time.sleep(0.2)  # the audit writer's burst
    finally:
        target = proc.pid
        if count == "syscalls":  # the daemon, not strace, gets the signal
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                target = int(f.read().split()[0])
        os.kill(target, signal.SIGTERM)
        proc.wait(timeout=120)
    if count == "allocs":
        with open(out) as f:
            lines = f.read().split("\n")
        sizes = {}
        for line in lines[1:]:
            if line.startswith("aligned "):
                _, size, n = line.split()
                sizes[int(size)] = int(n)
        return int(lines[0]), sizes
    if count == "syscalls":
        # strace -c's table: % time, seconds, usecs/call, calls, [errors,] syscall.
        calls = {}
        with open(out) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
                    calls[fields[-1]] = int(fields[3])
                    if len(fields) == 6 and int(fields[4]) > 0:
                        calls[fields[-1] + " (failed)"] = int(fields[4])
        return sum(n for k, n in calls.items() if "(" not in k), calls
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1]), {}
    raise RuntimeError("no totals in the callgrind output")


def keep(into, work, binary, scenario, count, n):
    """Copies the callgrind output of the run just measured into `into` (--keep)."""
    if into and count == "instructions":
        os.makedirs(into, exist_ok=True)
        name = f"{os.path.basename(binary)}-{scenario}-{n}.callgrind"
        shutil.copy(os.path.join(work, f"{count}.out"), os.path.join(into, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append",
                    help="daemon binary (repeat for an A/B; default build/release)")
    ap.add_argument("--scenario", choices=["S2", "S3", "both"], default="both")
    ap.add_argument("--count", choices=["allocs", "instructions", "syscalls", "both"],
                    default="both",
                    help="both: allocs and instructions; syscalls (strace -f -c) also lists "
                         "each system call per operation")
    ap.add_argument("--sizes", action="store_true",
                    help="with allocs: also the aligned allocations per operation by size "
                         "(Asio's recycling cache missing: coroutine frames, handlers)")
    ap.add_argument("--keep", metavar="DIR",
                    help="with instructions: keep callgrind's outputs in DIR, one per run "
                         "(callgrind_annotate DIR/NAME-S2-1300.callgrind)")
    ap.add_argument("--n1", type=int, default=300)
    ap.add_argument("--n2", type=int, default=1300)
    args = ap.parse_args()
    bins = args.bin or [os.path.join(ROOT, "build/release/src/app/sandgate")]
    scenarios = ["S2", "S3"] if args.scenario == "both" else [args.scenario]
    counts = ["allocs", "instructions"] if args.count == "both" else [args.count]
    if "instructions" in counts and not shutil.which("valgrind"):
        sys.exit("percall.py: valgrind not found (apt-get install valgrind)")
    if "syscalls" in counts and not shutil.which("strace"):
        sys.exit("percall.py: strace not found (apt-get install strace)")

    work = tempfile.mkdtemp(prefix="sg-percall-")
    shim = os.path.join(work, "alloc_count.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim,
                    os.path.join(HERE, "alloc_count.c")], check=True)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    origin_port = listener.getsockname()[1]
    threading.Thread(target=serve_origin, args=(listener,), daemon=True).start()

    print(f"{'binary':40} {'scenario':8} {'count':12} per operation")
    try:
        for binary in bins:
            for scenario in scenarios:
                for count in counts:
                    a, a_sizes = measure(binary, scenario, count, args.n1, origin_port, work, shim)
                    keep(args.keep, work, binary, scenario, count, args.n1)
                    b, b_sizes = measure(binary, scenario, count, args.n2, origin_port, work, shim)
                    keep(args.keep, work, binary, scenario, count, args.n2)
                    ops = args.n2 - args.n1
                    name = binary if len(binary) <= 40 else "..." + binary[-37:]
                    print(f"{name:40} {scenario:8} {count:12} {(b - a) / ops:,.1f}", flush=True)
                    if count == "syscalls":
                        for call in sorted(set(a_sizes) | set(b_sizes)):
                            per = (b_sizes.get(call, 0) - a_sizes.get(call, 0)) / ops
                            if per >= 0.05:
                                print(f"{'':40} {'':8} {'  ' + call:12} {per:.2f}")
                    elif args.sizes:
                        for size in sorted(set(a_sizes) | set(b_sizes)):
                            per = (b_sizes.get(size, 0) - a_sizes.get(size, 0)) / ops
                            if per >= 0.05:
                                print(f"{'':40} {'':8} {'  aligned':12} {per:.2f} x {size} B")
    finally:
        listener.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
