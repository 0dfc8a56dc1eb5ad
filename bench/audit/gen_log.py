#!/usr/bin/env python3
"""Writes a realistic sandgate audit log of about SIZE bytes (bench/audit/run.sh).

Lines have the fields the daemon writes (docs/errors.md, "The audit log"), in its order: many
sandboxes (a few busy ones), many hosts (a long tail), ~80% allowed tunnels and requests with
bytes, ~14% denials of the usual reasons with the daemon's labels.suggestion, ~6% error codes.
Timestamps climb over a day. Deterministic for a given --seed.

usage: gen_log.py SIZE_BYTES OUTPUT [--seed N]
"""
import json
import random
import sys


def main():
    size = int(sys.argv[1])
    out_path = sys.argv[2]
    seed = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--seed" else 1
    rng = random.Random(seed)

    sandboxes = [f"agent-{i}" for i in range(300)] + [f"ci-{i}" for i in range(40)]
    weights_sb = [1.0 / (i + 1) ** 0.7 for i in range(len(sandboxes))]
    hosts = (["github.com", "api.github.com", "registry.npmjs.org", "pypi.org",
              "files.pythonhosted.org", "objects.githubusercontent.com", "proxy.golang.org"]
             + [f"svc{i}.example.com" for i in range(3000)])
    weights_h = [1.0 / (i + 1) for i in range(len(hosts))]
    denied_hosts = ([f"exfil{i}.evil.example" for i in range(400)]
                    + [f"telemetry{i}.vendor.example" for i in range(200)])
    weights_d = [1.0 / (i + 1) ** 0.8 for i in range(len(denied_hosts))]
    errors = ["UPSTREAM_CONNECT_FAILED", "UPSTREAM_TIMEOUT", "UPSTREAM_DNS_FAILED",
              "UPSTREAM_TLS_FAILED", "MALFORMED_REQUEST", "CLIENT_TLS_FAILED"]
    profile = {sb: ("dev" if i % 3 == 0 else None) for i, sb in enumerate(sandboxes)}

    # Pre-drawn pools: random.choices per line would dominate the run time.
    pool = 1 << 16
    sb_pool = rng.choices(sandboxes, weights_sb, k=pool)
    host_pool = rng.choices(hosts, weights_h, k=pool)
    denied_pool = rng.choices(denied_hosts, weights_d, k=pool)

    day_ms = 86_400_000
    written = 0
    n = 0
    est_lines = max(1, size // 615)
    q = json.dumps
    buf = []
    with open(out_path, "w") as out:
        while written < size:
            secs, ms = divmod(n * day_ms // est_lines, 1000)  # since t0, 2026-12-02
            days, rest = divmod(secs, 86400)
            ts = f"2026-12-{2 + days:02d}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}.{ms:03d}Z"
            sb = sb_pool[n % pool]
            sport = 30000 + (n * 7919) % 30000
            src = f"10.201.{(n // 250) % 250}.{n % 250 + 2}"
            r = rng.random()
            if r < 0.80:
                host = host_pool[(n * 31) % pool]
                up = rng.randint(200, 20000)
                down = rng.randint(500, 2_000_000) if r < 0.4 else rng.randint(100, 50000)
                dur = rng.randint(100_000, 9_000_000_000)
                if r < 0.5:
                    line = ('{"@timestamp":"%s","ecs":{"version":"8.11.0"},"event":{"code":"connection_closed","kind":"event","category":["network"],"type":["allowed"],"outcome":"success","duration":%d},'
                            '"labels":{"sandbox_id":"%s","termination":"client_close","termination_phase":"body"},"source":{"ip":"%s","port":%d,"bytes":%d},'
                            '"destination":{"address":"%s","domain":"%s","ip":"140.82.%d.%d","port":443,"bytes":%d},"network":{"protocol":"connect"},'
                            '"rule":{"name":"profiles.default.allow:%s"},"tls":{"client":{"server_name":"%s"}}}'
                            % (ts, dur, sb, src, sport, up, host, host, n % 200, n % 250, down, host, host))
                else:
                    path = f"/v1/items/{n % 1000}"
                    line = ('{"@timestamp":"%s","ecs":{"version":"8.11.0"},"event":{"code":"http_request","kind":"event","category":["network"],"type":["allowed"],"outcome":"success","duration":%d},'
                            '"labels":{"sandbox_id":"%s","termination":"completed"},"source":{"ip":"%s","port":%d,"bytes":%d},'
                            '"destination":{"address":"%s","domain":"%s","ip":"140.82.%d.%d","port":443,"bytes":%d},"network":{"protocol":"http"},'
                            '"rule":{"name":"profiles.default.allow:%s"},"http":{"version":"1.1","request":{"method":"GET"},"response":{"status_code":200}},'
                            '"url":{"path":"%s","scheme":"https"}}'
                            % (ts, dur, sb, src, sport, up, host, host, n % 200, n % 250, down, host, path))
            elif r < 0.94:
                host = denied_pool[(n * 17) % pool]
                port = 443 if r < 0.90 else (80 if r < 0.92 else 8443)
                reason = "no_matching_rule" if r < 0.915 else ("port_not_allowed" if r < 0.93 else "denied_by_rule")
                rule = "" if reason == "no_matching_rule" else ',"rule":{"name":"profiles.default.deny:*.evil.example"}'
                if reason == "denied_by_rule":
                    labels = '"labels":{"sandbox_id":"%s"}' % sb
                else:
                    p = profile[sb]
                    target = f"[profiles.{p}]" if p else f"[sandboxes.{sb}]"
                    sugg = q(f'{target} allow = ["{host}:{port}"]')
                    labels = '"labels":{"sandbox_id":"%s","suggestion":%s}' % (sb, sugg)
                proto = "connect" if port != 80 else "http"
                line = ('{"@timestamp":"%s","ecs":{"version":"8.11.0"},"event":{"code":"SANDBOX_NETWORK_DENIED","kind":"event","category":["network"],"type":["denied"],"outcome":"failure","reason":"%s"},'
                        '%s,"source":{"ip":"%s","port":%d,"bytes":0},"destination":{"address":"%s","domain":"%s","port":%d,"bytes":0},'
                        '"network":{"protocol":"%s"}%s,"http":{"response":{"status_code":403}}}'
                        % (ts, reason, labels, src, sport, host, host, port, proto, rule))
            else:
                code = errors[n % len(errors)]
                host = host_pool[(n * 13) % pool]
                line = ('{"@timestamp":"%s","ecs":{"version":"8.11.0"},"event":{"code":"%s","kind":"event","category":["network"],"type":["error"],"outcome":"failure"},'
                        '"labels":{"sandbox_id":"%s","termination":"timeout","termination_phase":"connect"},"source":{"ip":"%s","port":%d,"bytes":0},'
                        '"destination":{"address":"%s","domain":"%s","port":443,"bytes":0},"network":{"protocol":"connect"},"http":{"response":{"status_code":502}}}'
                        % (ts, code, sb, src, sport, host, host))
            buf.append(line)
            written += len(line) + 1
            n += 1
            if len(buf) >= 10000:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
    print(f"{out_path}: {n} lines, {written} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
