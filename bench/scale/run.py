#!/usr/bin/env python3
"""Cost of registering one sandbox as the number of sandboxes grows (issue 13, item 5).

For each contender (a sandgate binary), each profile size R and each sandbox count N, starts
the daemon with a main config holding one profile of R host rules and N drop-in files in its
sandboxes_dir, each written the way sandgate-launch writes them (id, profile, sources, one
allow rule of its own). Then, REPS times, renames one more drop-in into the directory and
times until the daemon prints {"event":"reloaded"} on stderr, and removes it again, timed the
same way. The time includes the daemon's 20 ms quiet period after a change (DropInWatch).
Memory: VmRSS of the daemon once it is ready, and per sandbox the growth over the N=10 run of
the same contender and profile.

With a decide benchmark per contender (bench/scale/decide_bench.cpp), also runs it: the cost
of one decision with N sandboxes of one profile.

    bench/scale/run.py --contender before=OLD/sandgate,OLD/scale_decide_bench \
                       --contender after=build/release/src/app/sandgate,build/release/bench/scale_decide_bench

Prints tables and the ratios 10,000 vs 10 sandboxes.
"""

import argparse
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def rule_text(i):
    zone = f"zone{i}.example"
    return f"host.{zone}" if i % 2 == 0 else f"*.{zone}"


def dropin_text(i):
    # 10.64.0.0/10: one source address per sandbox, as the launcher's pool hands them out.
    a = 0x0A400000 + 4 * i + 2
    ip = ".".join(str((a >> s) & 0xFF) for s in (24, 16, 8, 0))
    return (
        "# written by sandgate-launch\n"
        f'id = "sb{i}"\nprofile = "p"\nsources = ["{ip}"]\n'
        f'allow = ["own{i}.example"]\n'
    )


def write_config(root, n, rules, ca_dir=None):
    drop = os.path.join(root, "sandboxes.d")
    os.makedirs(drop)
    inject = ""
    if ca_dir:
        # One static credential injected by the profile (interception under the CA in ca_dir):
        # every sandbox has its placeholder.
        os.makedirs(os.path.join(root, "state"), mode=0o700, exist_ok=True)
        token = os.path.join(root, "token")
        with open(token, "w") as f:
            f.write("bench-token\n")
        os.chmod(token, 0o600)
        inject = (
            "[interception]\n"
            f'ca_cert = "{ca_dir}/ca.pem"\n'
            f'ca_key = "{ca_dir}/ca.key"\n'
            "[credentials.api]\n"
            'provider = "static"\n'
            f'file = "{token}"\n'
            'env = ["API_TOKEN"]\n'
            "[[profiles.p.inject]]\n"
            f'hosts = ["{rule_text(0)}"]\n'
            'credential = "api"\n'
            'as = "bearer"\n'
        )
    allow = ", ".join(f'"{rule_text(i)}"' for i in range(rules))
    with open(os.path.join(root, "main.toml"), "w") as f:
        f.write(
            "workers = 1\n"
            'sandboxes_dir = "sandboxes.d"\n'
            "[listeners]\n"
            'explicit = ["127.0.0.1:0"]\n'
            "[log]\n"
            'audit = "off"\n'
            "[launcher]\n"
            f'state_dir = "{root}/state"\n'
            "[profiles.p]\n"
            f"allow = [{allow}]\n"
            'deny = ["blocked.example"]\n'
            + inject
        )
    for i in range(n):
        with open(os.path.join(drop, f"sb{i:06d}.toml"), "w") as f:
            f.write(dropin_text(i))
    return drop


class Daemon:
    def __init__(self, binary, config):
        self.proc = subprocess.Popen(
            [binary, "--config", config],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stderr:
            self.lines.put((time.monotonic(), raw.decode(errors="replace").strip()))
        self.lines.put((time.monotonic(), None))

    def wait_for(self, event, timeout=600):
        deadline = time.monotonic() + timeout
        while True:
            at, line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise RuntimeError(f"daemon exited waiting for {event}")
            if f'"event":"{event}"' in line:
                return at
            if '"event":"reload_failed"' in line:
                raise RuntimeError("reload failed")

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(binary, n, rules, reps, credentials=False):
    root = tempfile.mkdtemp(prefix="sandgate-scale-")
    try:
        ca_dir = None
        if credentials:
            ca_dir = os.path.join(root, "ca")
            subprocess.run([binary, "ca", "init", ca_dir], check=True, stdout=subprocess.DEVNULL)
        drop = write_config(root, n, rules, ca_dir)
        t0 = time.monotonic()
        d = Daemon(binary, os.path.join(root, "main.toml"))
        try:
            startup = d.wait_for("ready") - t0
            time.sleep(0.3)
            rss = d.rss_kib()
            adds, removes = [], []
            for r in range(reps):
                i = n + r
                final = os.path.join(drop, f"sb{i:06d}.toml")
                tmp = os.path.join(drop, f".sb{i:06d}.tmp")
                with open(tmp, "w") as f:
                    f.write(dropin_text(i))
                t = time.monotonic()
                os.rename(tmp, final)  # IN_MOVED_TO, as the launcher registers
                adds.append(d.wait_for("reloaded") - t)
                time.sleep(0.05)
                t = time.monotonic()
                os.unlink(final)
                removes.append(d.wait_for("reloaded") - t)
                time.sleep(0.05)
            rss_after = d.rss_kib()
        finally:
            d.stop()
        return {
            "startup_s": startup,
            "rss_kib": rss,
            "rss_after_kib": rss_after,
            "add_ms": statistics.median(adds) * 1e3,
            "remove_ms": statistics.median(removes) * 1e3,
            "add_max_ms": max(adds) * 1e3,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def decide_costs(bench):
    out = subprocess.run(
        [bench, "--benchmark_format=json", "--benchmark_min_time=0.2"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    costs = {}
    for b in json.loads(out)["benchmarks"]:
        # "BM_DecideMiss/sandboxes:10/rules:20"
        name, n, r = b["name"].split("/")[:3]
        costs[(name, int(n.split(":")[1]), int(r.split(":")[1]))] = b["cpu_time"]
    return costs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--contender", action="append", required=True,
                   help="NAME=SANDGATE[,DECIDE_BENCH]")
    p.add_argument("--sizes", default="10,1000,10000")
    p.add_argument("--rules", default="20,200")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--credentials", action="store_true",
                   help="the profile injects one static credential (placeholders for every sandbox)")
    args = p.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rule_counts = [int(x) for x in args.rules.split(",")]
    contenders = []
    for c in args.contender:
        name, paths = c.split("=", 1)
        parts = paths.split(",")
        contenders.append((name, parts[0], parts[1] if len(parts) > 1 else None))

    results = {}
    for name, binary, _ in contenders:
        for rules in rule_counts:
            for n in sizes:
                print(f"# {name}: {n} sandboxes, profile of {rules} rules ...", file=sys.stderr,
                      flush=True)
                results[(name, rules, n)] = measure(binary, n, rules, args.reps, args.credentials)

    print("\n## Registering one sandbox (median of %d; includes the 20 ms quiet period)\n"
          % args.reps)
    print("| contender | rules | sandboxes | add ms | remove ms | add max ms | startup s "
          "| RSS MiB | KiB per sandbox |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _, _ in contenders:
        for rules in rule_counts:
            base = results[(name, rules, sizes[0])]
            for n in sizes:
                m = results[(name, rules, n)]
                per = ((m["rss_kib"] - base["rss_kib"]) / (n - sizes[0])) if n != sizes[0] else None
                print(f"| {name} | {rules} | {n} | {m['add_ms']:.1f} | {m['remove_ms']:.1f} "
                      f"| {m['add_max_ms']:.1f} | {m['startup_s']:.2f} | {m['rss_kib'] / 1024:.0f} "
                      f"| {'' if per is None else f'{per:.1f}'} |")
    lo, hi = sizes[0], sizes[-1]
    print(f"\n## Ratios, {hi} vs {lo} sandboxes\n")
    print("| contender | rules | add | remove |")
    print("|---|---|---|---|")
    for name, _, _ in contenders:
        for rules in rule_counts:
            a, b = results[(name, rules, lo)], results[(name, rules, hi)]
            print(f"| {name} | {rules} | {b['add_ms'] / a['add_ms']:.2f}x "
                  f"| {b['remove_ms'] / a['remove_ms']:.2f}x |")

    benches = [(name, bench) for name, _, bench in contenders if bench]
    if benches:
        print("\n## One decision (ns, CPU time)\n")
        print("| contender | benchmark | rules | " + " | ".join(f"N={n}" for n in sizes)
              + f" | {hi} vs {lo} |")
        print("|---|---|---|" + "---|" * (len(sizes) + 1))
        for name, bench in benches:
            costs = decide_costs(bench)
            for bm in sorted({k[0] for k in costs}):
                for rules in rule_counts:
                    row = [costs.get((bm, n, rules)) for n in sizes]
                    if None in row:
                        continue
                    print(f"| {name} | {bm} | {rules} | "
                          + " | ".join(f"{c:.0f}" for c in row)
                          + f" | {row[-1] / row[0]:.2f}x |")


if __name__ == "__main__":
    main()
