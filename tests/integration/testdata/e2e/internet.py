#!/usr/bin/env python3
"""The end-to-end tests' "internet": origin servers on TEST-NET addresses, run inside the test's
own network namespace. Every connection and request is logged to LOG (one line each), so a
test can assert that a denied destination never saw a byte.

  internet.py LOG CERT KEY SPEC...

SPEC is http:IP:PORT, https:IP:PORT, banner:IP:PORT (a server-first protocol, like ssh: it
sends a greeting, then echoes lines) or udp:IP:PORT (logs datagrams). The HTTPS servers also
serve a static npm registry for the package "sandgate-e2e-pkg" at /sandgate-e2e-pkg, and log
one more line per request over TLS: the SNI the client sent and the TLS version negotiated, so
a test tells sandgate's own TLS (interception) from the sandbox's (a spliced tunnel).
"""
import base64
import hashlib
import http.server
import io
import json
import socket
import socketserver
import ssl
import sys
import tarfile
import threading

LOG_LOCK = threading.Lock()
PACKAGE = "sandgate-e2e-pkg"


def log(line):
    with LOG_LOCK, open(sys.argv[1], "a") as f:
        f.write(line + "\n")


def make_tarball():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in (("package/package.json",
                            json.dumps({"name": PACKAGE, "version": "1.0.0", "main": "index.js"})),
                           ("package/index.js", "module.exports = 'reached through sandgate';\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


TARBALL = make_tarball()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        host = self.headers.get("Host", "")
        local = self.connection.getsockname()
        if isinstance(self.connection, ssl.SSLSocket):
            sni = getattr(self.connection, "sni", None)
            log(f"TLS {local[0]}:{local[1]} sni={sni} version={self.connection.version()} "
                f"path={self.path}")
        log(f"REQUEST {local[0]}:{local[1]} host={host} path={self.path}")
        scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
        if self.path == f"/{PACKAGE}":
            tarball = f"{scheme}://{host}/{PACKAGE}/-/{PACKAGE}-1.0.0.tgz"
            body = json.dumps({
                "name": PACKAGE,
                "dist-tags": {"latest": "1.0.0"},
                "versions": {"1.0.0": {
                    "name": PACKAGE, "version": "1.0.0",
                    "dist": {
                        "tarball": tarball,
                        "shasum": hashlib.sha1(TARBALL).hexdigest(),
                        "integrity": "sha512-" +
                                     base64.b64encode(hashlib.sha512(TARBALL).digest()).decode(),
                    }}},
            }).encode()
            self.reply(200, "application/json", body)
        elif self.path == f"/{PACKAGE}/-/{PACKAGE}-1.0.0.tgz":
            self.reply(200, "application/octet-stream", TARBALL)
        else:
            self.reply(200, "text/plain", f"hello from {host} over {scheme}\n".encode())

    def do_POST(self):
        # The body read whole (chunked, as sandgate sends an HTTP/2 body of unknown length,
        # or by Content-Length), then answered as a GET.
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                self.rfile.read(size + 2)
                if size == 0:
                    break
        else:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.do_GET()

    def do_HEAD(self):
        self.head_only = True
        try:
            self.do_GET()
        finally:
            self.head_only = False

    def reply(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not getattr(self, "head_only", False):
            self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        # HTTPServer.server_bind looks up the FQDN: a DNS query nobody answers in here.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def get_request(self):
        conn, peer = super().get_request()
        local = conn.getsockname()
        log(f"CONNECT {local[0]}:{local[1]} from {peer[0]}")
        return conn, peer


class Banner(socketserver.StreamRequestHandler):
    def handle(self):
        local = self.connection.getsockname()
        log(f"CONNECT {local[0]}:{local[1]} from {self.client_address[0]}")
        self.wfile.write(b"SSH-2.0-sandgate-e2e\r\n")
        for line in self.rfile:
            self.wfile.write(b"echo " + line)


class BannerServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_udp(ip, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ip, port))
    while True:
        data, peer = sock.recvfrom(2048)
        log(f"UDP {ip}:{port} from {peer[0]} bytes={len(data)}")


def remember_sni(ssl_socket, server_name, _context):
    ssl_socket.sni = server_name


def main():
    cert, key = sys.argv[2], sys.argv[3]
    threads = []
    for spec in sys.argv[4:]:
        kind, ip, port = spec.split(":")
        port = int(port)
        if kind == "udp":
            threads.append(threading.Thread(target=serve_udp, args=(ip, port), daemon=True))
            continue
        if kind == "banner":
            server = BannerServer((ip, port), Banner)
        else:
            server = Server((ip, port), Handler)
            if kind == "https":
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(cert, key)
                context.sni_callback = remember_sni
                server.socket = context.wrap_socket(server.socket, server_side=True,
                                                    do_handshake_on_connect=False)
        threads.append(threading.Thread(target=server.serve_forever, daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
