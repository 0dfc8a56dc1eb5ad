#!/usr/bin/python3
"""The soak (issue 36, item 2): one daemon for a long time under a mixed load; nothing may grow.

Runs inside the network namespace bench/soak/run.sh made for it (only loopback at first; the
launched sandboxes add their veths and nft tables there and take them away again). Starts, all
on loopback of that namespace:

* origins: plain HTTP on 0.0.0.0:18080 (reachable from launched sandboxes through their
  gateway), HTTPS on 127.0.0.1:18443 (a certificate of its own CA, for api.test, billing.test
  and plain.test) that checks the Authorization of every request: api.test wants a GitHub App
  token, billing.test an OAuth2 token, each one the fake endpoint issued and not yet expired;
  plain.test wants none. Anything else is answered 401, which the client counts as wrong;
* the fake token endpoints on 127.0.0.1:18444 (tokens.test): GitHub App
  `POST /app/installations/7/access_tokens` and OAuth2 `POST /oauth/token`, both issuing tokens
  that live --token-ttl seconds (default 6), so the daemon refreshes every few seconds;
* sandgate's CA (`sandgate ca init`), a config (bench/soak/soak.toml rendered), the daemon.

Then for --minutes (default 30) it drives --rate requests per second (default 300) from
--sandboxes sandboxes (default 4, --threads 2 client threads each, all with the same mix):

    explicit   absolute-form GET through the explicit listener, kept alive (20 per connection)
    connect    CONNECT origin.test:18080 (spliced), one GET inside, closed
    h1         intercepted HTTP/1.1 in CONNECT + TLS: api.test (GitHub App token injected),
               billing.test (OAuth2 token injected), plain.test (none); 20 per connection
    h2         the same over HTTP/2 (python3-h2), 50 streams per connection
    dns        A queries to the DNS listener from the sandbox's source address: origin.test
               (answered) and deny-dns.test (the sink address, as [dns] denied_names =
               "sink" answers a refused name)
    deny       GET http://deny-http.test/ and CONNECT deny-connect.test:443 (403 each)

beside: a reload (SIGHUP) every --reload-every seconds (3) with a config that changed (a
comment and one sandbox's allow list alternate); a launched sandbox (sandgate-launch run, id
soak-PID-N, needs root) every --launch-every seconds (10) that fetches the origin through the
transparent listener and resolves origin.test through the DNS listener; the audit log rotated
(renamed, SIGUSR1) every --rotate-every seconds (60).

Once a second it samples the daemon's RSS, open descriptors, threads and every gauge of
/metrics (active connections and tunnels, leaf cache entries, token cache entries, upstream pool
connections, credential expiry, ...). At the end it fails when

* any request got an unexpected answer (each is counted by kind, the first few printed);
* any series trends upward after warm-up (the rule is in trend_verdict() and bench/README.md);
* the audit lines do not account for the requests made, per kind (rotated files included);
* 7 s after the load stopped, a connection, tunnel or pooled upstream connection is still open.

Results in --out: report.md (the verdicts, the request mix and counts, every series' slope),
samples.csv (one row per second), daemon.stderr, sandgate.toml, audit.log*.
"""

import argparse
import base64
import csv
import ctypes
import datetime
import glob
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import socketserver
import ssl
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import h2.config
import h2.connection
import h2.events

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROXY = ("127.0.0.1", 3128)
DNS = ("127.0.0.1", 15053)
SINK = "192.0.2.254"  # [dns] sink_address, the default
ADMIN = "127.0.0.1:9090"
HTTP_PORT = 18080
TLS_PORT = 18443
TOKEN_PORT = 18444
LAUNCH_POOL = "10.201.0.0/24"


def now_rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# Certificates and files


def must(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def make_certificates(d, sandgate):
    """The origins' CA and leaf (openssl), the app key, the OAuth secret, sandgate's CA."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    must(["openssl", "req", "-x509", *ec, "-keyout", f"{d}/origin-ca.key", "-out",
          f"{d}/origin-ca.pem", "-days", "3", "-subj", "/CN=sandgate soak origin CA"])
    must(["openssl", "req", *ec, "-keyout", f"{d}/origin.key", "-out", f"{d}/origin.csr",
          "-subj", "/CN=api.test"])
    with open(f"{d}/origin.ext", "w") as f:
        f.write("subjectAltName=DNS:api.test,DNS:billing.test,DNS:plain.test,DNS:tokens.test,"
                "IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    must(["openssl", "x509", "-req", "-in", f"{d}/origin.csr", "-CA", f"{d}/origin-ca.pem",
          "-CAkey", f"{d}/origin-ca.key", "-CAcreateserial", "-days", "3", "-extfile",
          f"{d}/origin.ext", "-out", f"{d}/origin.pem"])
    must(["openssl", "genrsa", "-out", f"{d}/app.pem", "2048"])
    os.chmod(f"{d}/app.pem", 0o600)
    with open(f"{d}/oauth-secret", "w") as f:
        f.write("soak-client-secret\n")
    os.chmod(f"{d}/oauth-secret", 0o600)
    must([sandgate, "ca", "init", f"{d}/ca"])


# ---------------------------------------------------------------------------------------------
# Origins and the fake token endpoints


class Tokens:
    """Every token the fake endpoints issued, with its expiry (wall clock)."""

    def __init__(self, ttl):
        self.ttl = ttl
        self.lock = threading.Lock()
        self.issued = {"gh": {}, "billing": {}}
        self.count = {"gh": 0, "billing": 0}

    def issue(self, kind):
        token = ("ghs_" if kind == "gh" else "oat_") + os.urandom(16).hex()
        # GitHub's expires_at has whole seconds: round down, as the daemon will read it.
        expires = float(int(time.time() + self.ttl))
        with self.lock:
            self.issued[kind][token] = expires
            self.count[kind] += 1
            if len(self.issued[kind]) > 1000:  # forget long-expired ones
                cut = time.time() - 60
                self.issued[kind] = {t: e for t, e in self.issued[kind].items() if e > cut}
        return token, expires

    def valid(self, kind, token, grace=1.0):
        with self.lock:
            expires = self.issued[kind].get(token)
        return expires is not None and time.time() < expires + grace


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address, handler, tls=None):
        self.tls = tls
        super().__init__(address, handler)

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls is not None:
            sock.settimeout(10)
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def handle(self):
        try:
            if isinstance(self.connection, ssl.SSLSocket):
                self.connection.do_handshake()
            super().handle()
        except (OSError, ssl.SSLError):
            pass

    def answer(self, status, body, ctype="text/plain"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""


def make_origin_handler(tokens, stats):
    class Origin(Handler):
        def do_GET(self):
            host = (self.headers.get("Host") or "").split(":")[0]
            auth = self.headers.get("Authorization")
            ok = True
            if host == "api.test":
                ok = auth is not None and auth.startswith("Bearer ") and tokens.valid("gh", auth[7:])
            elif host == "billing.test":
                ok = (auth is not None and auth.startswith("Bearer ")
                      and tokens.valid("billing", auth[7:]))
            elif auth is not None:
                ok = False
            if ok:
                self.answer(200, "ok " + self.path + "\n")
            else:
                stats.origin_refused(host, auth)
                self.answer(401, "bad credential for " + host + "\n")

    return Origin


def make_token_handler(tokens):
    class TokenEndpoint(Handler):
        def do_POST(self):
            self.body()
            if self.path == "/app/installations/7/access_tokens":
                token, expires = tokens.issue("gh")
                self.answer(201, json.dumps({"token": token, "expires_at": now_rfc3339(expires)}),
                            "application/json")
            elif self.path == "/oauth/token":
                token, _ = tokens.issue("billing")
                self.answer(200, json.dumps({"access_token": token, "token_type": "Bearer",
                                             "expires_in": tokens.ttl}), "application/json")
            else:
                self.answer(404, "no such endpoint\n")

    return TokenEndpoint


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------------------------------------
# Bookkeeping


class Stats:
    """What the clients did: requests per kind, wrong answers (the first few kept)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ok = {}
        self.wrong = {}
        self.examples = []
        self.origin_refusals = 0

    def record(self, kind, good, detail=""):
        with self.lock:
            table = self.ok if good else self.wrong
            table[kind] = table.get(kind, 0) + 1
            if not good and len(self.examples) < 30:
                self.examples.append(f"{time.strftime('%H:%M:%S')} {kind}: {detail}")

    def origin_refused(self, host, auth):
        with self.lock:
            self.origin_refusals += 1
            if len(self.examples) < 30:
                shown = "none" if auth is None else f"{auth[:12]}... ({len(auth)} chars)"
                self.examples.append(f"{time.strftime('%H:%M:%S')} origin 401 for {host}, "
                                     f"Authorization {shown}")

    def total(self, table=None):
        with self.lock:
            return sum((self.ok if table is None else table).values())


# ---------------------------------------------------------------------------------------------
# Clients


class Answer(Exception):
    """An unexpected answer (the request counts as wrong)."""


def read_head(sock):
    """Reads a response head byte-exact from a raw socket (nothing past it is consumed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1 if data.endswith(b"\r") or data.endswith(b"\r\n\r") else 512,
                          socket.MSG_PEEK)
        if not chunk:
            raise Answer("connection closed before the response head")
        end = (data + chunk).find(b"\r\n\r\n")
        take = len(chunk) if end < 0 else end + 4 - len(data)
        data += sock.recv(take)
    head = data.decode("latin-1")
    status = int(head.split(" ", 2)[1])
    headers = {}
    for line in head.split("\r\n")[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


def read_response(f):
    """Status, headers, body of one HTTP/1.1 response from a buffered reader."""
    line = f.readline()
    if not line:
        raise Answer("connection closed instead of a response")
    status = int(line.split(b" ", 2)[1])
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, v = line.decode("latin-1").split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                break
            body += f.read(size)
            f.readline()
    elif "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    return status, headers, body


class Client(threading.Thread):
    """One sandbox's load: the mix below, paced to `interval` seconds per request."""

    # (kind, weight). One "request" each; h1 and h2 cycle through their three hosts.
    MIX = [("explicit", 26), ("connect", 10), ("h1", 22), ("h2", 22), ("dns", 12), ("deny", 8)]
    PER_CONNECTION = {"explicit": 20, "h1": 20, "h2": 50}
    HOSTS = ["api.test", "billing.test", "plain.test"]

    def __init__(self, index, sandbox, token, source, ca, interval, stop, stats):
        super().__init__(daemon=True)
        self.index = index
        self.sandbox = sandbox
        self.auth = "Basic " + base64.b64encode(f"{sandbox}:{token}".encode()).decode()
        self.source = source
        self.interval = interval
        self.stop = stop
        self.stats = stats
        self.rng = random.Random(index)
        self.tls = ssl.create_default_context(cafile=ca)
        self.tls.set_alpn_protocols(["http/1.1"])
        self.tls2 = ssl.create_default_context(cafile=ca)
        self.tls2.set_alpn_protocols(["h2"])
        self.conns = {}  # kind -> (state, requests made on it)
        self.n = 0
        self.dns_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.dns_sock.bind((source, 0))
        self.dns_sock.settimeout(5)
        # What the audit log should show, from this side: see count_audit().
        self.expect = {}

    def expect_line(self, key, n=1):
        self.expect[key] = self.expect.get(key, 0) + n

    # -- connections --

    def dial(self):
        s = socket.create_connection(PROXY, timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def tunnel(self, authority):
        s = self.dial()
        s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
                  f"Proxy-Authorization: {self.auth}\r\n\r\n".encode())
        status, _ = read_head(s)
        if status != 200:
            s.close()
            raise Answer(f"CONNECT {authority}: {status}")
        return s

    def drop(self, kind):
        state = self.conns.pop(kind, None)
        if state is not None:
            try:
                state[0]["sock"].close()
            except OSError:
                pass

    def conn(self, kind, opener):
        state = self.conns.get(kind)
        if state is None or state[1] >= self.PER_CONNECTION[kind]:
            self.drop(kind)
            state = [opener(), 0]
            self.conns[kind] = state
        state[1] += 1
        return state[0]

    # -- the requests --

    def path(self, kind):
        self.n += 1
        return f"/soak/{kind}/{self.sandbox}/{self.index}-{self.n}"

    def do_explicit(self):
        def opener():
            s = self.dial()
            return {"sock": s, "file": s.makefile("rb")}

        c = self.conn("explicit", opener)
        path = self.path("explicit")
        url = f"http://origin.test:{HTTP_PORT}{path}"
        c["sock"].sendall(f"GET {url} HTTP/1.1\r\nHost: origin.test:{HTTP_PORT}\r\n"
                          f"Proxy-Authorization: {self.auth}\r\n\r\n".encode())
        self.expect_line("explicit")
        status, _, body = read_response(c["file"])
        if status != 200 or body != f"ok {path}\n".encode():
            raise Answer(f"GET {url}: {status} {body[:80]!r}")

    def do_connect(self):
        s = self.tunnel(f"origin.test:{HTTP_PORT}")
        self.expect_line("connect")
        try:
            path = self.path("connect")
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n"
                      .encode())
            status, _, body = read_response(s.makefile("rb"))
            if status != 200 or body != f"ok {path}\n".encode():
                raise Answer(f"GET {path} in a tunnel: {status} {body[:80]!r}")
        finally:
            s.close()

    def do_h1(self):
        host = self.HOSTS[self.n % 3]
        kind = f"h1-{host}"
        self.PER_CONNECTION.setdefault(kind, self.PER_CONNECTION["h1"])

        def opener():
            raw = self.tunnel(f"{host}:{TLS_PORT}")
            s = self.tls.wrap_socket(raw, server_hostname=host)
            return {"sock": s, "file": s.makefile("rb")}

        c = self.conn(kind, opener)
        path = self.path("h1")
        c["sock"].sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{TLS_PORT}\r\n\r\n".encode())
        self.expect_line("h1")
        status, _, body = read_response(c["file"])
        if status != 200 or body != f"ok {path}\n".encode():
            raise Answer(f"h1 GET https://{host}{path}: {status} {body[:80]!r}")

    def do_h2(self):
        host = self.HOSTS[self.n % 3]
        kind = f"h2-{host}"
        self.PER_CONNECTION.setdefault(kind, self.PER_CONNECTION["h2"])

        def opener():
            raw = self.tunnel(f"{host}:{TLS_PORT}")
            s = self.tls2.wrap_socket(raw, server_hostname=host)
            if s.selected_alpn_protocol() != "h2":
                raise Answer(f"ALPN {s.selected_alpn_protocol()} instead of h2")
            h = h2.connection.H2Connection(
                h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            h.initiate_connection()
            s.sendall(h.data_to_send())
            return {"sock": s, "h2": h}

        c = self.conn(kind, opener)
        s, h = c["sock"], c["h2"]
        path = self.path("h2")
        sid = h.get_next_available_stream_id()
        h.send_headers(sid, [(":method", "GET"), (":scheme", "https"),
                             (":authority", f"{host}:{TLS_PORT}"), (":path", path)],
                       end_stream=True)
        s.sendall(h.data_to_send())
        self.expect_line("h2")
        status, body, done = None, b"", False
        while not done:
            data = s.recv(65536)
            if not data:
                raise Answer(f"h2 {path}: connection closed")
            for ev in h.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    if ev.stream_id == sid:
                        body += ev.data
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    done = True
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                    raise Answer(f"h2 {path}: stream reset ({ev.error_code})")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise Answer(f"h2 {path}: GOAWAY ({ev.error_code})")
            out = h.data_to_send()
            if out:
                s.sendall(out)
        if status != 200 or body != f"ok {path}\n".encode():
            raise Answer(f"h2 GET https://{host}{path}: {status} {body[:80]!r}")

    def dns_query(self, name):
        qid = self.rng.randrange(65536)
        q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
        q += struct.pack("!HH", 1, 1)
        self.dns_sock.sendto(q, DNS)
        while True:
            data, _ = self.dns_sock.recvfrom(4096)
            if len(data) >= 12 and struct.unpack("!H", data[:2])[0] == qid:
                break
        flags, _, ancount = struct.unpack("!HHH", data[2:8])
        # The last answer's address (A records: its last 4 bytes), for the sink check.
        address = socket.inet_ntoa(data[-4:]) if ancount else ""
        return flags & 0xF, ancount, address

    def do_dns(self):
        if self.n % 2 == 0:
            self.n += 1
            rcode, answers, _ = self.dns_query("origin.test")
            if rcode != 0 or answers < 1:
                raise Answer(f"DNS origin.test: rcode {rcode}, {answers} answers")
        else:
            self.n += 1
            # A refused name resolves to the sink ([dns] denied_names = "sink", the default).
            rcode, answers, address = self.dns_query("deny-dns.test")
            self.expect_line("deny-dns")
            if rcode != 0 or answers != 1 or address != SINK:
                raise Answer(f"DNS deny-dns.test: rcode {rcode}, {answers} answers, {address!r} "
                             f"instead of the sink {SINK}")

    def do_deny(self):
        self.n += 1
        if self.n % 2 == 0:
            s = self.dial()
            try:
                s.sendall(f"GET http://deny-http.test/{self.n} HTTP/1.1\r\nHost: deny-http.test\r\n"
                          f"Proxy-Authorization: {self.auth}\r\nConnection: close\r\n\r\n"
                          .encode())
                self.expect_line("deny-http")
                status, _, _ = read_response(s.makefile("rb"))
            finally:
                s.close()
            if status != 403:
                raise Answer(f"GET http://deny-http.test/: {status} instead of 403")
        else:
            s = self.dial()
            try:
                s.sendall(f"CONNECT deny-connect.test:443 HTTP/1.1\r\nHost: deny-connect.test:443"
                          f"\r\nProxy-Authorization: {self.auth}\r\n\r\n".encode())
                self.expect_line("deny-connect")
                status, _ = read_head(s)
            finally:
                s.close()
            if status != 403:
                raise Answer(f"CONNECT deny-connect.test:443: {status} instead of 403")

    def run(self):
        ops = {k: getattr(self, "do_" + k) for k, _ in self.MIX}
        kinds = [k for k, w in self.MIX for _ in range(w)]
        next_at = time.monotonic() + self.rng.random() * self.interval
        while not self.stop.is_set():
            wait = next_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            # Behind by more than a second (a slow moment): start again from now, no burst.
            next_at += self.interval
            if next_at < time.monotonic() - 1.0:
                next_at = time.monotonic()
            kind = self.rng.choice(kinds)
            try:
                ops[kind]()
                self.stats.record(kind, True)
            except (Answer, OSError, ssl.SSLError, ValueError, IndexError,
                    h2.exceptions.ProtocolError) as e:
                self.stats.record(kind, False, f"{self.sandbox}: {type(e).__name__}: {e}")
                for k in list(self.conns):
                    if k.startswith(kind):
                        self.drop(k)
        for k in list(self.conns):
            self.drop(k)


# ---------------------------------------------------------------------------------------------
# The daemon and what happens around it


class Daemon:
    def __init__(self, binary, out, config):
        self.out = out
        self.config = config
        self.stderr = open(f"{out}/daemon.stderr", "w")
        libc = ctypes.CDLL("libc.so.6", use_errno=True)

        def die_with_us():
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        self.proc = subprocess.Popen([binary, "--config", config], stdout=self.stderr,
                                     stderr=subprocess.STDOUT, preexec_fn=die_with_us)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited ({self.proc.returncode}): "
                                   + open(f"{out}/daemon.stderr").read()[-2000:])
            if '"event":"ready"' in open(f"{out}/daemon.stderr").read():
                return
            time.sleep(0.1)
        raise RuntimeError("the daemon did not print its ready line within 30 s")

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def render_config(template, out, n_sandboxes, generation):
    # Each launched sandbox takes a /30 of the pool; its gateway (.1) is the host's address
    # it fetches the origin on. Slots are reused, but name every one in case several overlap.
    gateways = ", ".join(f'"10.201.0.{4 * k + 1}:{HTTP_PORT}"' for k in range(64))
    text = (open(template).read().replace("@DIR@", out).replace("@POOL@", LAUNCH_POOL)
            .replace("@HOST_SERVICES@", gateways))
    extra = "extra.test" if generation % 2 else "extra-other.test"
    for i in range(1, n_sandboxes + 1):
        text += (f'\n[sandboxes.sb{i}]\ntoken = "soak-token-{i}"\nprofile = "soak"\n'
                 f'sources = ["127.0.1.{i}"]\n')
        if i == 1:  # what reloads change: a real change of policy each time
            text += f'allow = ["{extra}"]\n'
        if i == 2:  # a scope of its own: a second entry in the GitHub App's token cache
            text += ('[[sandboxes.sb2.inject]]\nhosts = ["api.test"]\ncredential = "gh"\n'
                     'as = "bearer"\nrepositories = ["acme/widgets"]\n')
    text += f"\n# generation {generation}\n"
    path = f"{out}/sandgate.toml"
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return path


def metrics_text():
    with urllib.request.urlopen(f"http://{ADMIN}/metrics", timeout=5) as r:
        return r.read().decode()


def gauges(text):
    """Every sample of every gauge family: {series: value}."""
    kinds = {}
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            kinds[name] = kind
        elif line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            name = series.split("{", 1)[0]
            if kinds.get(name) == "gauge":
                out[series] = float(value)
    return out


def proc_sample(pid):
    status = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_bytes": rss, "open_fds": fds, "threads": threads}


class Sampler(threading.Thread):
    def __init__(self, daemon, stop):
        super().__init__(daemon=True)
        self.d = daemon
        self.stop = stop
        self.rows = []  # (t, {series: value})
        self.t0 = time.monotonic()
        self.failures = 0

    def sample(self):
        row = proc_sample(self.d.proc.pid)
        row.update(gauges(metrics_text()))
        self.rows.append((time.monotonic() - self.t0, row))

    def run(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            try:
                self.sample()
            except (OSError, ValueError) as e:
                self.failures += 1
                print(f"sample failed: {e}", file=sys.stderr)
            next_at += 1.0
            time.sleep(max(0.0, next_at - time.monotonic()))


class Launcher(threading.Thread):
    """A launched sandbox every `every` seconds: created, used, removed."""

    SCRIPT = ("gw=$(ip -4 route show default | cut -d' ' -f3); "
              "curl -sS -m 10 -o /dev/null -w '%{http_code}\\n' http://$gw:" + str(HTTP_PORT)
              + "/soak/launched/x; dig +short +tries=1 +time=5 @$gw origin.test")

    def __init__(self, binary, config, every, stop, stats):
        super().__init__(daemon=True)
        self.binary = binary
        self.config = config
        self.every = every
        self.stop = stop
        self.stats = stats
        self.made = 0

    def run(self):
        while not self.stop.wait(self.every):
            self.made += 1
            sid = f"soak-{os.getpid()}-{self.made}"
            try:
                r = subprocess.run([self.binary, "--config", self.config, "run", "--sandbox", sid,
                                    "--profile", "hostnet", "--", "/bin/sh", "-c", self.SCRIPT],
                                   capture_output=True, text=True, timeout=60)
                good = r.returncode == 0 and r.stdout == "200\n127.0.0.1\n"
                self.stats.record("launched", good,
                                  f"{sid}: exit {r.returncode} out {r.stdout!r} err "
                                  f"{r.stderr.strip()[-300:]!r}")
            except subprocess.TimeoutExpired:
                self.stats.record("launched", False, f"{sid}: timed out")


# ---------------------------------------------------------------------------------------------
# Verdicts


# Per series: (relative tolerance of the mean, absolute tolerance). A series fails when the
# fitted growth over the measured window exceeds rel * |mean| + abs AND the median of its last
# third exceeds the median of its first third by half that (a trend, not a spike at one end).
def tolerance(series):
    if series == "rss_bytes":
        return 0.10, 4 * 1024 * 1024
    if series == "open_fds":
        return 0.10, 8
    if series == "threads":
        return 0.0, 0.5
    if series.startswith("sandgate_credential_expiry_seconds"):
        return 0.5, 2  # a saw tooth between half and all of the token's lifetime
    return 0.15, 3


def fit(ts, vs):
    n = len(ts)
    mt, mv = sum(ts) / n, sum(vs) / n
    stt = sum((t - mt) ** 2 for t in ts)
    slope = sum((t - mt) * (v - mv) for t, v in zip(ts, vs)) / stt if stt else 0.0
    return slope, mv


def trend_verdict(rows, warmup_fraction):
    if len(rows) < 30:
        return [], False
    t_end = rows[-1][0]
    t_warm = rows[0][0] + warmup_fraction * (t_end - rows[0][0])
    kept = [(t, r) for t, r in rows if t >= t_warm]
    names = sorted({k for _, r in kept for k in r}, key=lambda k: (k not in
                   ("rss_bytes", "open_fds", "threads"), k))
    results, failed = [], False
    window = kept[-1][0] - kept[0][0]
    for name in names:
        pts = [(t, r[name]) for t, r in kept if name in r]
        if len(pts) < 10:
            continue
        ts, vs = [p[0] for p in pts], [p[1] for p in pts]
        slope, mean = fit(ts, vs)
        growth = slope * window
        rel, absolute = tolerance(name)
        limit = rel * abs(mean) + absolute
        third = len(vs) // 3
        first, last = statistics.median(vs[:third]), statistics.median(vs[-third:])
        grows = growth > limit and last - first > limit / 2
        failed |= grows
        results.append({"series": name, "mean": mean, "slope_per_min": slope * 60,
                        "growth": growth, "limit": limit, "first": first, "last": last,
                        "min": min(vs), "max": max(vs), "verdict": "GROWS" if grows else "ok"})
    return results, failed


def count_audit(out):
    """Audit lines by kind, from every file (rotated ones too); DNS refusals that a burst
    window summarised count with their suppressed_lines."""
    counts = {}
    other = {}

    def add(key, n=1):
        counts[key] = counts.get(key, 0) + n

    files = sorted(glob.glob(f"{out}/audit.log*"))
    for path in files:
        for line in open(path, encoding="utf-8", errors="replace"):
            try:
                o = json.loads(line)
            except ValueError:
                add("unparsable")
                continue
            ev = o.get("event", {})
            code = ev.get("code", "")
            proto = o.get("network", {}).get("protocol", "")
            dom = o.get("destination", {}).get("domain", "")
            port = o.get("destination", {}).get("port", 0)
            path_ = o.get("url", {}).get("path", "")
            labels = o.get("labels", {})
            sid = labels.get("sandbox_id", "")
            if path_.startswith("/soak/explicit/") and proto == "http":
                add("explicit")
            elif path_.startswith("/soak/h1/"):
                add("h1")
            elif path_.startswith("/soak/h2/"):
                add("h2")
            elif path_.startswith("/soak/launched/"):
                add("launched")
            elif dom == "origin.test" and port == HTTP_PORT and proto == "connect":
                add("connect")
            elif dom == "deny-http.test":
                add("deny-http")
            elif dom == "deny-connect.test":
                add("deny-connect")
            elif proto == "dns" and (dom == "deny-dns.test" or ev.get("reason") == "burst_summary"):
                add("deny-dns", labels.get("suppressed_lines", 1)
                    if ev.get("reason") == "burst_summary" else 1)
            else:
                key = f"{proto or '-'} {code or '-'} {dom or '-'}:{port}" + (
                    " launched" if sid.startswith("soak-") else "")
                other[key] = other.get(key, 0) + 1
    return counts, other, files


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=float, default=300, help="requests per second in all")
    ap.add_argument("--sandboxes", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2, help="client threads per sandbox")
    ap.add_argument("--token-ttl", type=int, default=6, help="seconds a fake token lives")
    ap.add_argument("--reload-every", type=float, default=3)
    ap.add_argument("--launch-every", type=float, default=10, help="0: no launched sandboxes")
    ap.add_argument("--rotate-every", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=0.2, help="fraction of the run not fitted")
    ap.add_argument("--bin", required=True, help="the sandgate binary")
    ap.add_argument("--launch-bin", help="sandgate-launch (default: beside --bin)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    launch_bin = args.launch_bin or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(args.bin))), "launcher", "sandgate-launch")
    if args.launch_every > 0 and (os.geteuid() != 0 or not os.path.exists(launch_bin)):
        print(f"no launched sandboxes: needs root and {launch_bin}", file=sys.stderr)
        args.launch_every = 0

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    os.makedirs(f"{out}/sandboxes.d", exist_ok=True)
    os.makedirs(f"{out}/launcher-state", exist_ok=True)
    make_certificates(out, args.bin)

    stats = Stats()
    tokens = Tokens(args.token_ttl)
    origin_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    origin_tls.load_cert_chain(f"{out}/origin.pem", f"{out}/origin.key")
    origin_tls.set_alpn_protocols(["http/1.1"])
    serve(Server(("0.0.0.0", HTTP_PORT), make_origin_handler(tokens, stats)))
    serve(Server(("127.0.0.1", TLS_PORT), make_origin_handler(tokens, stats), origin_tls))
    serve(Server(("127.0.0.1", TOKEN_PORT), make_token_handler(tokens), origin_tls))

    template = os.path.join(HERE, "soak.toml")
    generation = 0
    config = render_config(template, out, args.sandboxes, generation)
    must([args.bin, "--check-config", config])
    daemon = Daemon(args.bin, out, config)
    print(f"daemon pid {daemon.proc.pid}; load {args.rate:g}/s for {args.minutes:g} min", flush=True)

    stop = threading.Event()
    sampler = Sampler(daemon, stop)
    sampler.start()
    n_threads = args.sandboxes * args.threads
    clients = [Client(j, f"sb{i}", f"soak-token-{i}", f"127.0.1.{i}", f"{out}/ca/ca.pem",
                      n_threads / args.rate, stop, stats)
               for i in range(1, args.sandboxes + 1)
               for j in range(i * 100, i * 100 + args.threads)]
    for c in clients:
        c.start()
    launcher = None
    if args.launch_every > 0:
        launcher = Launcher(launch_bin, config, args.launch_every, stop, stats)
        launcher.start()

    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    next_reload = t0 + args.reload_every
    next_rotate = t0 + args.rotate_every
    next_print = t0 + 30
    reloads = rotations = 0
    while time.monotonic() < end and daemon.alive():
        now = time.monotonic()
        if now >= next_reload:
            generation += 1
            render_config(template, out, args.sandboxes, generation)
            daemon.signal(signal.SIGHUP)
            reloads += 1
            next_reload += args.reload_every
        if now >= next_rotate:
            rotations += 1
            os.rename(f"{out}/audit.log", f"{out}/audit.log.{rotations}")
            daemon.signal(signal.SIGUSR1)
            next_rotate += args.rotate_every
        if now >= next_print:
            last = sampler.rows[-1][1] if sampler.rows else {}
            print(f"{(now - t0) / 60:5.1f} min: {stats.total()} ok, {stats.total(stats.wrong)} "
                  f"wrong, {(stats.total() + stats.total(stats.wrong)) / (now - t0):.0f}/s, rss "
                  f"{last.get('rss_bytes', 0) / 1048576:.1f} MiB, fds {last.get('open_fds')}, "
                  f"reloads {reloads}", flush=True)
            next_print += 30
        time.sleep(0.05)
    died = not daemon.alive()
    load_seconds = time.monotonic() - t0
    stop.set()
    for c in clients:
        c.join(timeout=30)
    if launcher:
        launcher.join(timeout=90)
    sampler.join(timeout=5)
    # Burst windows of DNS refusals end within 5 s and are swept every second: their summary
    # lines are written by then. Then the daemon stops and flushes its audit log.
    time.sleep(7)
    idle = {}
    if not died:
        try:
            idle = gauges(metrics_text())
            idle.update(proc_sample(daemon.proc.pid))
        except OSError:
            pass
    rc = daemon.stop()
    if launcher:
        subprocess.run([launch_bin, "--config", config, "gc"], capture_output=True)

    audit, other, files = count_audit(out)
    expect = {}
    for c in clients:
        for k, v in c.expect.items():
            expect[k] = expect.get(k, 0) + v
    if launcher:
        expect["launched"] = launcher.made
    trend, grew = trend_verdict(sampler.rows, args.warmup)
    wrong = stats.total(stats.wrong) + stats.origin_refusals
    audit_bad = any(audit.get(k, 0) != v for k, v in expect.items()) or audit.get("unparsable")
    # Once idle (7 s: more than upstream_keepalive_ms, 4 s by default, plus the pool's 1 s
    # sweep), nothing of the load may be left open.
    idle_left = {k: idle.get(k) for k in ("sandgate_active_connections", "sandgate_active_tunnels",
                                          "sandgate_upstream_pool_connections")
                 if idle.get(k) != 0}
    failed = died or wrong > 0 or grew or audit_bad or len(sampler.rows) < 30 or idle_left
    why = [w for w, bad in (("the daemon died", died), (f"{wrong} unexpected answers", wrong),
                            ("a series grows", grew), ("audit lines differ", audit_bad),
                            ("too few samples", len(sampler.rows) < 30),
                            (f"left open when idle: {idle_left}", idle_left)) if bad]

    with open(f"{out}/samples.csv", "w", newline="") as f:
        names = sorted({k for _, r in sampler.rows for k in r})
        w = csv.writer(f)
        w.writerow(["t"] + names)
        for t, r in sampler.rows:
            w.writerow([f"{t:.1f}"] + [r.get(n, "") for n in names])

    made = stats.total() + stats.total(stats.wrong)
    lines = []
    lines.append(f"# sandgate soak, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    lines.append(f"**{'FAIL (' + '; '.join(why) + ')' if failed else 'PASS'}**: {load_seconds / 60:.1f} min of load, "
                 f"{made} requests ({made / load_seconds:.0f}/s, asked {args.rate:g}/s) from "
                 f"{args.sandboxes} sandboxes, {reloads} reloads, {rotations} audit rotations, "
                 f"{launcher.made if launcher else 0} launched sandboxes, "
                 f"{tokens.count['gh']} GitHub App and {tokens.count['billing']} OAuth2 tokens "
                 f"issued (ttl {args.token_ttl} s), daemon exit {rc}"
                 + (" (it died during the run)" if died else "") + ".\n")
    lines.append("## Requests\n")
    lines.append("| kind | answered as expected | unexpected |")
    lines.append("|---|---|---|")
    for k in sorted(set(stats.ok) | set(stats.wrong)):
        lines.append(f"| {k} | {stats.ok.get(k, 0)} | {stats.wrong.get(k, 0)} |")
    lines.append(f"\nOrigin refusals (a missing, stale or unknown injected token): "
                 f"{stats.origin_refusals}\n")
    if stats.examples:
        lines.append("First unexpected answers:\n\n```")
        lines.extend(stats.examples)
        lines.append("```\n")
    lines.append("## Audit lines against requests made\n")
    lines.append(f"Files: {', '.join(os.path.basename(p) for p in files)}\n")
    lines.append("| kind | requests made | audit lines | |")
    lines.append("|---|---|---|---|")
    for k in sorted(set(expect) | set(audit)):
        verdict = "ok" if audit.get(k, 0) == expect.get(k, 0) else "DIFFERS"
        lines.append(f"| {k} | {expect.get(k, 0)} | {audit.get(k, 0)} | {verdict} |")
    if other:
        lines.append("\nOther lines (not compared): " + ", ".join(
            f"`{k}` {v}" for k, v in sorted(other.items())) + "\n")
    lines.append("\n## Series (1 s samples; fitted after the first "
                 f"{args.warmup:.0%} of the run)\n")
    lines.append("| series | mean | slope /min | fitted growth | limit | first third | "
                 "last third | min | max | verdict |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in trend:
        lines.append(f"| `{r['series']}` | {r['mean']:.6g} | {r['slope_per_min']:.4g} | "
                     f"{r['growth']:.4g} | {r['limit']:.4g} | {r['first']:.6g} | "
                     f"{r['last']:.6g} | {r['min']:.6g} | {r['max']:.6g} | {r['verdict']} |")
    if idle:
        lines.append("\nAfter the load stopped (7 s idle): " + ", ".join(
            f"`{k}` {v:g}" for k, v in sorted(idle.items())
            if k in ("rss_bytes", "open_fds", "threads") or "active" in k or "pool" in k
            or "cache_entries" in k) + "\n")
    report = "\n".join(lines) + "\n"
    with open(f"{out}/report.md", "w") as f:
        f.write(report)
    print(report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
