#!/usr/bin/env python3
"""Memory per idle CONNECT tunnel at 1,000, 10,000 and 100,000 tunnels (issue 13, S4).

Runs inside the namespaces bench/idle/run.sh made for it (network: only loopback; refuses to
run in the one run.sh started from). Raises, for itself and what it starts only,
RLIMIT_NOFILE, and in its network namespace net.ipv4.ip_local_port_range, net.core.somaxconn
and net.ipv4.tcp_max_syn_backlog.

Starts bench/idle/idle_tunnels as origins on 127.0.1.X:18080 (one process per address) that
accept, hold and echo; the release daemon on 127.0.0.1:3128 with bench/idle/idle.toml; and
idle_tunnels as clients that open CONNECT tunnels (200 waiting for their 200 at once in all,
from 127.0.0.2-5, over the origins in turn) and keep them idle. The daemon's memory is read
once before any tunnel, then after each stage (tunnels opened up to N in all, memory settled as
the peers harness's S4 does): KiB per tunnel = growth over that baseline / N. After the last
stage every tunnel gets one byte and must echo it back. Any failed, dropped or missing tunnel,
failed echo, dead daemon or accept failure makes the run INVALID: no figure.

One daemon holds every tunnel when the descriptor limit allows (2 per tunnel). Where the hard
limit cannot be raised (no CAP_SYS_RESOURCE, as in some containers), --daemons auto starts as
many daemons as the limit needs, all on the same listen address (each worker's listener has
SO_REUSEPORT, so the kernel spreads the connections over them), and says so: the figures are
then the sum over those daemons. The test tools are split the same way.

    bench/idle/run.sh                       # 1,000, 10,000, 100,000 (a few minutes)
    bench/idle/run.sh --stages 1000,5000,9000 --daemons 1
"""

import argparse
import math
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROXY = "127.0.0.1:3128"
SOURCES = [f"127.0.0.{i}" for i in range(2, 6)]
AUTH = "YmVuY2g6YmVuY2g="  # base64("bench:bench"), the sandbox in idle.toml
NOFILE = 400_000
# What the daemon keeps open besides tunnels (server.cpp: 64 + 16 per worker; 2 workers here)
# and its unauthenticated-connection cap (idle.toml), as in descriptors_needed().
DAEMON_FIXED_FDS = 96
MAX_UNAUTHENTICATED = 1024
CONFIG_MAX_CONNECTIONS = 110_000  # idle.toml


class Tool:
    """A child process driven by one-line commands on stdin, answering one line each."""

    def __init__(self, name, argv, stderr):
        self.name = name
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{self.name}: no '{prefix}' line within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{self.name}: exited (status {self.proc.wait()})")
            if line.startswith(prefix):
                return parse_kv(line)

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def ask_all(tools, commands, prefix, timeout):
    """Sends each tool its command, then sums the numbers in their answers (max for seconds)."""
    for tool, command in zip(tools, commands):
        tool.send(command)
    total = {}
    for tool in tools:
        for k, v in tool.expect(prefix, timeout).items():
            total[k] = max(total.get(k, 0), v) if k == "seconds" else total.get(k, 0) + v
    return total


def parse_kv(line):
    out = {}
    for word in line.split()[1:]:
        if "=" in word:
            k, v = word.split("=", 1)
            out[k] = float(v) if "." in v else int(v)
    return out


def kib_fields(path, names):
    out = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in names:
                out[key] = int(rest.split()[0])
    return out


def daemon_memory(pids):
    """Summed over the daemons: KiB, and their threads and open descriptors (max)."""
    total = {}
    for pid in pids:
        m = kib_fields(f"/proc/{pid}/status", {"VmRSS", "RssAnon", "Threads"})
        m.update(kib_fields(f"/proc/{pid}/smaps_rollup", {"Pss", "Private_Dirty", "Anonymous"}))
        for k, v in m.items():
            total[k] = total.get(k, 0) + v
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        total["max_fds"] = max(total.get("max_fds", 0), fds)
    return total


def settled_memory(pids):
    """As the peers harness's S4: until RSS moves < 0.5% between two looks 0.5 s apart."""
    time.sleep(1)
    prev = None
    for _ in range(30):
        m = daemon_memory(pids)
        if prev is not None and abs(m["VmRSS"] - prev) <= 0.005 * m["VmRSS"]:
            return m
        prev = m["VmRSS"]
        time.sleep(0.5)
    return m


def machine():
    m = kib_fields("/proc/meminfo", {"MemAvailable", "Slab"})
    with open("/proc/net/sockstat") as f:  # this namespace's sockets
        for line in f:
            if line.startswith("TCP:"):
                w = line.split()
                m["tcp_inuse"] = int(w[w.index("inuse") + 1])
    return m


def write_sysctl(name, value):
    with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
        f.write(value)


def setup_namespace():
    """Loopback up, per-namespace sysctls; returns (descriptor limit, why it is not NOFILE)."""
    if os.environ.get("SG_IDLE_HOST_NETNS") == str(os.stat("/proc/self/ns/net").st_ino):
        sys.exit("run.py: still in the namespace run.sh started from; run bench/idle/run.sh")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    if [l for l in links.splitlines() if ": lo:" not in l]:
        sys.exit("run.py: this namespace has links besides lo; run bench/idle/run.sh")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    write_sysctl("net.ipv4.ip_local_port_range", "1024 65535")
    write_sysctl("net.core.somaxconn", "65535")
    write_sysctl("net.ipv4.tcp_max_syn_backlog", "65535")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
        return NOFILE, ""
    except (ValueError, OSError):
        # Raising a hard limit needs CAP_SYS_RESOURCE; a container may not grant it.
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard, f"the hard descriptor limit ({hard:,}) cannot be raised here (no CAP_SYS_RESOURCE)"


def render_config(path, template, audit, max_connections):
    with open(template) as f:
        text = f.read()
    lines = []
    for line in text.splitlines():
        if line.startswith("explicit = "):
            line = f'explicit = ["{PROXY}"]'
        elif line.startswith("audit = "):
            line = f'audit = "{audit}"'
        elif max_connections and line.startswith(("max_connections ", "max_connections_per")):
            line = line.split("=")[0] + f"= {max_connections}   # run.py: the descriptor limit"
        lines.append(line)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def wait_ready(proc, log_path, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited (status {proc.returncode}); see {log_path}")
        with open(log_path) as f:
            if '"event":"ready"' in f.read():
                return
        time.sleep(0.1)
    raise RuntimeError(f"daemon not ready within {timeout} s; see {log_path}")


def daemon_warnings(log_paths):
    keys = ("accept_failed", "descriptor_limit_low", "error", "fatal")
    out = []
    for path in log_paths:
        with open(path) as f:
            out += [l.strip() for l in f if any(f'"{k}' in l for k in keys)]
    return out


class Plan:
    """How many processes of each kind the descriptor limit needs for the largest stage."""

    def __init__(self, args, nofile):
        top = args.stages[-1]
        per_tool = nofile - 500  # each tool keeps a few descriptors of its own
        self.clients = math.ceil(top / per_tool)
        self.origins = max(4, math.ceil(top / per_tool))
        # The daemon: 2 descriptors per tunnel, and what it keeps besides.
        cap = (nofile - DAEMON_FIXED_FDS - MAX_UNAUTHENTICATED) // 2
        self.max_connections = None if cap >= CONFIG_MAX_CONNECTIONS else cap
        if args.daemons == "auto":
            # Several daemons share connections by the kernel's SO_REUSEPORT hash: not evenly,
            # so each is planned to 85% of what it can hold.
            self.daemons = 1 if top <= cap else math.ceil(top / (0.85 * cap))
        else:
            self.daemons = int(args.daemons)
        self.cap = min(cap, CONFIG_MAX_CONNECTIONS)
        self.parallel = max(1, args.parallel // self.clients)

    def shares(self, n, k):
        return [n // k + (1 if i < n % k else 0) for i in range(k)]


def run(args, out_dir, nofile, why):
    plan = Plan(args, nofile)
    stderr_log = open(os.path.join(out_dir, "tools.stderr"), "w")
    tools = os.path.join(args.build, "bench", "idle_tunnels")
    daemon_bin = args.bin or os.path.join(args.build, "src", "app", "sandgate")
    origin_eps = [f"127.0.1.{i + 1}:18080" for i in range(plan.origins)]
    origins, clients, daemons, logs = [], [], [], []
    setup = (f"{plan.daemons} daemon(s), {plan.clients} client and {plan.origins} origin "
             f"processes; descriptor limit {nofile:,} per process"
             + (f" ({why})" if why else "")
             + (f"; max_connections per daemon {plan.max_connections:,}"
                if plan.max_connections else ""))
    print(setup, flush=True)
    try:
        for ep in origin_eps:
            origins.append(Tool(f"origin {ep}", [tools, "origin", "--listen", ep], stderr_log))
        for o in origins:
            o.expect("ready", 10)
        for i in range(plan.daemons):
            config = os.path.join(out_dir, f"sandgate-{i}.toml")
            render_config(config, args.config, os.path.join(out_dir, f"audit-{i}.log"),
                          plan.max_connections)
            log_path = os.path.join(out_dir, f"daemon-{i}.stderr")
            daemons.append(subprocess.Popen([daemon_bin, "--config", config],
                                            stdout=open(os.path.join(out_dir, "daemon.stdout"), "a"),
                                            stderr=open(log_path, "w")))
            logs.append(log_path)
            wait_ready(daemons[-1], log_path)
        pids = [d.pid for d in daemons]
        targets = sum((["--target", ep] for ep in origin_eps), [])
        sources = sum((["--source", s] for s in SOURCES), [])
        for i in range(plan.clients):
            clients.append(Tool(f"client {i}",
                                [tools, "client", "--proxy", PROXY, "--auth", AUTH,
                                 "--parallel", str(plan.parallel), "--timeout-ms", "20000"]
                                + targets + sources, stderr_log))
        for c in clients:
            c.expect("ready", 10)
        time.sleep(1)
        m0 = daemon_memory(pids)
        k0 = machine()
        rows = []
        for n in args.stages:
            opened = ask_all(clients, [f"open {s}" for s in plan.shares(n, plan.clients)],
                             "opened", timeout=max(120, n / 100))
            m = settled_memory(pids)
            k = machine()
            held = ask_all(clients, ["stats"] * len(clients), "stats", 10)
            o = ask_all(origins, ["stats"] * len(origins), "stats", 10)
            rows.append({"n": n, "opened": opened, "held": held, "origin": o, "mem": m, "k": k})
            print(f"N={n}: {opened}; origin {o}; RSS {m['VmRSS']} KiB; "
                  f"{(m['VmRSS'] - m0['VmRSS']) / n:.2f} KiB/tunnel", flush=True)
            alive = all(d.poll() is None for d in daemons)
            if not alive or opened["failed"] or held["dropped"]:
                break
        alive = all(d.poll() is None for d in daemons)
        echo = (ask_all(clients, ["echo"] * len(clients), "echo", timeout=120) if alive else None)
        held = ask_all(clients, ["stats"] * len(clients), "stats", 10)
        o = ask_all(origins, ["stats"] * len(origins), "stats", 10)
        return report(args, out_dir, setup, plan, m0, k0, rows, echo, held, o, daemons, logs)
    finally:
        for t in clients + origins:
            t.stop()
        for d in daemons:
            if d.poll() is None:
                d.send_signal(signal.SIGTERM)
        for d in daemons:
            try:
                d.wait(timeout=15)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()


def per_tunnel(m, m0, key, n):
    return (m[key] - m0[key]) / n


def report(args, out_dir, setup, plan, m0, k0, rows, echo, held, o, daemons, logs):
    problems = []
    last = rows[-1]
    for r in rows:
        if r["opened"]["failed"]:
            problems.append(f"N={r['n']}: {r['opened']['failed']} tunnels failed ({r['opened']})")
        if r["held"]["dropped"]:
            problems.append(f"N={r['n']}: {r['held']['dropped']} idle tunnels dropped")
        if r["origin"]["open"] != r["held"]["established"]:
            problems.append(f"N={r['n']}: origins hold {r['origin']['open']} connections, "
                            f"clients {r['held']['established']} tunnels")
    if last["n"] != args.stages[-1]:
        problems.append(f"stopped after N={last['n']}")
    dead = [d.returncode for d in daemons if d.poll() is not None]
    if dead:
        problems.append(f"{len(dead)} daemon(s) exited (status {dead})")
    if echo is None or echo["failed"] or echo["ok"] != last["n"]:
        problems.append(f"echo through every tunnel: {echo}")
    if held["dropped"]:
        problems.append(f"{held['dropped']} tunnels dropped by the end")
    warnings = daemon_warnings(logs)
    if warnings:
        problems.append(f"daemon stderr: {len(warnings)} warning lines, first: {warnings[0]}")

    lines = [
        f"Setup: {setup}.",
        "",
        "| tunnels | open s | daemon RSS MiB | RSS KiB/tunnel | Anonymous KiB/tunnel "
        "| Private_Dirty KiB/tunnel | max fds in a daemon | TCP sockets in netns "
        "| machine slab KiB/tunnel |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m, k, n = r["mem"], r["k"], r["n"]
        lines.append(
            f"| {n:,} | {r['opened']['seconds']:.1f} | {m['VmRSS'] / 1024:.1f} "
            f"| {per_tunnel(m, m0, 'VmRSS', n):.2f} | {per_tunnel(m, m0, 'Anonymous', n):.2f} "
            f"| {per_tunnel(m, m0, 'Private_Dirty', n):.2f} | {m['max_fds']:,} "
            f"| {k['tcp_inuse']:,} | {per_tunnel(k, k0, 'Slab', n):.2f} |")
    lines.append("")
    lines.append(f"Baseline (no tunnel): RSS {m0['VmRSS'] / 1024:.1f} MiB, Anonymous "
                 f"{m0['Anonymous'] / 1024:.1f} MiB, {m0['Threads']} threads.")
    for a, b in zip(rows, rows[1:]):
        d = (b["mem"]["VmRSS"] - a["mem"]["VmRSS"]) / (b["n"] - a["n"])
        lines.append(f"Marginal RSS {a['n']:,} -> {b['n']:,}: {d:.2f} KiB/tunnel.")
    if echo is not None:
        lines.append(f"Echo through every tunnel after the last stage: ok={echo['ok']} "
                     f"failed={echo['failed']} ({echo['seconds']:.1f} s). Origins at the end: "
                     f"open={o['open']} accepted={o['accepted']} closed={o['closed']}.")
    if problems:
        lines.append("")
        lines.append("INVALID run, no figure:")
        lines += [f"- {p}" for p in problems]
    else:
        per = {r["n"]: per_tunnel(r["mem"], m0, "VmRSS", r["n"]) for r in rows}
        top = rows[-1]["n"]
        for base in [r["n"] for r in rows[:-1]]:
            lines.append(f"**Ratio RSS KiB/tunnel at {top:,} / at {base:,}: "
                         f"{per[top] / per[base]:.2f}**")
    text = "\n".join(lines)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 1 if problems else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stages", default="1000,10000,100000")
    p.add_argument("--parallel", type=int, default=200,
                   help="CONNECTs waiting for their 200 at once, all clients together")
    p.add_argument("--daemons", default="auto",
                   help="daemons sharing the listen address (auto: 1 unless the descriptor "
                        "limit needs more)")
    p.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    p.add_argument("--bin", help="daemon binary (default: BUILD/src/app/sandgate)")
    p.add_argument("--config", default=os.path.join(HERE, "idle.toml"))
    p.add_argument("--out", required=True)
    args = p.parse_args()
    args.stages = [int(s) for s in args.stages.split(",")]
    if args.stages != sorted(args.stages):
        sys.exit("run.py: --stages must grow")
    # pid 1 of its own PID namespace: SIGTERM has no default action here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    nofile, why = setup_namespace()
    os.makedirs(args.out, exist_ok=True)
    try:
        sys.exit(run(args, args.out, nofile, why))
    except RuntimeError as e:
        print(f"INVALID run, no figure: {e}", flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
