#!/usr/bin/env python3
"""Ratio table of a peers-harness run (bench/peers/run.sh results directory).

    bench/proxy/ratios.py RESULTS_DIR [--contender sandgate] [--baseline squid]
    bench/proxy/ratios.py RESULTS_DIR --intercept [--contender sandgate]

Reads RESULTS_DIR/meta.txt and raw.tsv and prints, per target, every headline figure next to
its ratio to DIRECT (median over reps of target/DIRECT in the same rep, as the harness's own
report does), then the contender's figures against sandgate's targets and against the
baseline peer (squid by default). With --intercept the figures are the TLS-interception
scenarios S5 (keep-alive requests inside an intercepted CONNECT) and S6 (new intercepted
connections per second), compared with DIRECT, squid-bump and mitmproxy-bump. Exit status 0
when every target is met, 1 otherwise, 2 on missing data.
"""
import argparse
import statistics
import sys
from collections import defaultdict

# (key, title, scenario, case, value function name, higher is better, target)
# target: ratio to DIRECT (>=) or, for S4, KiB per idle tunnel (<=).
TARGETS = {
    "s1_http": 0.8,
    "s1_https": 0.9,
    "s2_c64": 0.7,
    "s2_c256": 0.7,
    "s3": 0.7,
    "s4": 4.0,
}


def load(out_dir):
    meta, targets, order = {}, {}, []
    with open(f"{out_dir}/meta.txt") as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            if k.startswith("target."):
                name = k[7:]
                kind, desc, ok, policy, note = (v.split("|") + [""] * 5)[:5]
                targets[name] = dict(kind=kind, desc=desc, ok=ok == "1", policy=policy, note=note)
                order.append(name)
            else:
                meta[k] = v
    data = defaultdict(dict)
    with open(f"{out_dir}/raw.tsv") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5:
                continue
            scen, case, tgt, rep, kv = parts[:5]
            d = {}
            for item in kv.split():
                k, _, v = item.partition("=")
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
            data[(scen, case, tgt)][rep] = d
    return meta, targets, order, data


def mbps(d):
    return d["bytes"] / d["secs"] / 1e6 if d.get("secs") and d.get("bytes") else None


def rps(d):
    return d.get("rps")


def rate(d):
    return d.get("rate")


def kib(d):
    x = d.get("kib_pss")
    return x if isinstance(x, float) and x == x else None


# S5/S6 (issue 10): ratio to DIRECT (>=), ahead of squid's ssl-bump, at least 10x mitmproxy.
INTERCEPT_TARGET = 0.5
INTERCEPT_PEERS = (("squid-bump", "ahead of", 1.0), ("mitmproxy-bump", "≥ ×10 of", 10.0))


class Run56:
    """The S5/S6 figures of one results directory (the harness's, or by-name/ beside it)."""

    def __init__(self, out_dir, label=""):
        self.out_dir, self.label = out_dir, label
        self.meta, self.targets, self.order, self.data = load(out_dir)
        self.s56 = {}
        for k, v in self.meta.items():
            if k.startswith("s56."):
                mode, ca, ok, note = (v.split("|") + [""] * 4)[:4]
                self.s56[k[4:]] = dict(mode=mode, ok=ok == "1", note=note)

    def usable(self, t):
        return t in self.s56 and self.s56[t]["ok"] and self.targets.get(t, {}).get("ok", False)

    @staticmethod
    def rate(d):
        # A run with errors or a failed client does not count: the harness prints it INVALID.
        if d.get("failed") or (d.get("errors") or 0) or not d.get("ok"):
            return None
        return d.get("rate")

    def med(self, scen, case, tgt):
        xs = [self.rate(d) for d in self.data.get((scen, case, tgt), {}).values()]
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    def versus(self, scen, case, tgt, other):
        """median over reps of tgt / other in the same rep"""
        base = self.data.get((scen, case, other), {})
        xs = []
        for rep, d in self.data.get((scen, case, tgt), {}).items():
            if rep in base:
                a, b = self.rate(d), self.rate(base[rep])
                if a is not None and b:
                    xs.append(a / b)
        return statistics.median(xs) if xs else None

    def us_per_op(self, scen, case, tgt, key="proxy_cpu"):
        xs = [d[key] / d["ok"] * 1e6 for d in self.data.get((scen, case, tgt), {}).values()
              if self.rate(d) is not None and key in d]
        return statistics.median(xs) if xs else None


def intercept_main(args):
    """S5/S6 summary: every target's figures and ratios, then the contender's targets.

    sandgate inspects host names only, so in the harness's S5/S6 (CONNECT 127.0.0.1:18446) it
    fails the interception check; bench/proxy/intercept_by_name.sh then measures it by name
    right after, into RESULTS_DIR/by-name/. Its comparisons with the peers are then ratios of
    ratios to each run's own DIRECT.
    """
    try:
        main_run = Run56(args.out_dir)
    except OSError as e:
        print(f"ratios.py: {e}", file=sys.stderr)
        return 2
    runs = [main_run]
    try:
        runs.append(Run56(f"{args.out_dir}/by-name", " [2nd run]"))
    except OSError:
        pass
    cases = {}
    for r in runs:
        for k in r.data:
            if k[0] in ("S5", "S6"):
                cases.setdefault(k[0], set()).add(k[1])
    cols = [(scen, c, f"{scen} {c} {'req/s' if scen == 'S5' else 'conns/s'}")
            for scen in ("S5", "S6") for c in sorted(cases.get(scen, ()), key=lambda x: int(x[1:]))]
    if not cols:
        print("ratios.py: no S5/S6 figures in this run", file=sys.stderr)
        return 2

    print(f"Run: {args.out_dir}  (reps={main_run.meta.get('reps')}, S5 {main_run.meta.get('s5_duration')} s "
          f"c{{{main_run.meta.get('s5_conns')}}}, S6 {main_run.meta.get('s6_duration')} s "
          f"c{main_run.meta.get('s6_concurrency')}, keys {main_run.meta.get('tls_key')}; "
          f"nproc={main_run.meta.get('nproc')}; {main_run.meta.get('date')})")
    if len(runs) > 1:
        print(f"By name: {runs[1].out_dir}  ({runs[1].meta.get('date')}, load {runs[1].meta.get('load')})")
    print()
    print("| target | mode | " + " | ".join(t for *_, t in cols) +
          " | proxy µs/req S5 | proxy µs/conn S6 | origin µs/conn S6 |")
    print("|---|---|" + "---|" * (len(cols) + 3))
    for r in runs:
        for t in (t for t in r.order if t in r.s56):
            desc = r.targets[t]["desc"] + r.label
            if not r.usable(t):
                note = r.s56[t]["note"] or r.targets[t]["note"]
                print(f"| {desc} | not usable: {note} |" + " |" * (len(cols) + 3))
                continue
            cells = []
            for scen, case, _ in cols:
                v, x = r.med(scen, case, t), r.versus(scen, case, t, "direct")
                cells.append("–" if v is None else f"{v:,.0f}" + (f" (×{x:.2f})" if x is not None else ""))
            us5 = [r.us_per_op("S5", c, t) for scen, c, _ in cols if scen == "S5"]
            us6 = [r.us_per_op("S6", c, t) for scen, c, _ in cols if scen == "S6"]
            or6 = [r.us_per_op("S6", c, t, "origin_cpu") for scen, c, _ in cols if scen == "S6"]
            f = lambda xs: "/".join(f"{u:,.0f}" for u in xs if u is not None) or "–"
            print(f"| {desc} | {r.s56[t]['mode']} | " + " | ".join(cells) +
                  f" | {'–' if t == 'direct' else f(us5)} | {'–' if t == 'direct' else f(us6)} | {f(or6)} |")

    c = args.contender
    crun = next((r for r in runs if r.usable(c) and r.s56[c]["mode"] == "intercept"), None)
    if crun is None:
        print(f"\nno usable intercepting contender '{c}' in this run", file=sys.stderr)
        return 2
    bad = []
    for (scen, case, tgt), reps in sorted(crun.data.items()):
        if tgt == c and scen in ("S5", "S6"):
            for rep, d in sorted(reps.items()):
                if crun.rate(d) is None:
                    bad.append(f"{scen} {case} rep {rep}: errors={d.get('errors', 0):.0f} {d.get('first_error', '')}")
    if bad:
        print()
        print(f"WARNING: {len(bad)} repetition(s) of {c} had errors and are left out (see {crun.out_dir}/tls/):")
        for line in bad:
            print(f"  - {line}")
    peers = [p for p in INTERCEPT_PEERS if main_run.usable(p[0])]
    print()
    if crun is not main_run:
        print(f"{c} ran by name in a second run: {c} / peer = ({c} ×DIRECT of its run) / "
              "(peer ×DIRECT of the harness's run).")
        print()
    print(f"| figure | {c} ×DIRECT | target | met | " +
          " | ".join(f"{c} / {p} | {how} {p}" for p, how, _ in peers) + " |")
    print("|---|---|---|---|" + "---|---|" * len(peers))
    all_met = True
    for scen, case, title in cols:
        x = crun.versus(scen, case, c, "direct")
        met = x is not None and x >= INTERCEPT_TARGET
        all_met &= met
        cells = [f"×{x:.2f}" if x is not None else "–", f"≥ ×{INTERCEPT_TARGET}",
                 "–" if x is None else ("yes" if met else "NO")]
        for p, _, need in peers:
            if crun is main_run:
                y = main_run.versus(scen, case, c, p)
            else:
                py = main_run.versus(scen, case, p, "direct")
                y = x / py if x is not None and py else None
            ok = y is not None and (y >= need if need > 1 else y > need)
            all_met &= ok
            cells += ["–" if y is None else f"×{y:.2f}", "–" if y is None else ("yes" if ok else "NO")]
        print(f"| {title} | " + " | ".join(cells) + " |")
    missing = [p for p, *_ in INTERCEPT_PEERS if not main_run.usable(p)]
    if missing:
        print(f"\n(not in this run or not usable: {', '.join(missing)}; those targets are unchecked)")
        all_met = False
    return 0 if all_met else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--contender", default="sandgate")
    ap.add_argument("--baseline", default="squid")
    ap.add_argument("--intercept", action="store_true",
                    help="S5/S6 (TLS interception) against DIRECT, squid-bump and mitmproxy-bump")
    args = ap.parse_args()
    if args.intercept:
        return intercept_main(args)
    try:
        meta, targets, order, data = load(args.out_dir)
    except OSError as e:
        print(f"ratios.py: {e}", file=sys.stderr)
        return 2

    s2c = meta.get("s2_conns", "64 256").split()
    s4n = meta.get("s4_tunnels", "5000")
    cols = [("s1_http", "S1 HTTP tunnel MB/s", "S1", "http", mbps),
            ("s1_https", "S1 HTTPS tunnel MB/s", "S1", "https", mbps)]
    for c in s2c:
        cols.append((f"s2_c{c}", f"S2 c{c} req/s", "S2", f"c{c}", rps))
    cols.append(("s3", "S3 tunnels/s", "S3", f"c{meta.get('s3_concurrency', '64')}", rate))
    cols.append(("s4", "S4 KiB/idle tunnel", "S4", f"n{s4n}", kib))

    def med(scen, case, tgt, fn):
        xs = [fn(d) for d in data.get((scen, case, tgt), {}).values()]
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    def ratio(scen, case, tgt, fn):
        base = data.get((scen, case, "direct"), {})
        xs = []
        for rep, d in data.get((scen, case, tgt), {}).items():
            if rep in base:
                a, b = fn(d), fn(base[rep])
                if a is not None and b:
                    xs.append(a / b)
        return statistics.median(xs) if xs else None

    def cell(key, scen, case, tgt, fn):
        v = med(scen, case, tgt, fn)
        if v is None:
            return "–", None, None
        if key == "s4":
            return f"{v:.1f}", v, v
        r = ratio(scen, case, tgt, fn)
        return (f"{v:,.0f} (×{r:.2f})" if r is not None else f"{v:,.0f}"), v, r

    print(f"Run: {args.out_dir}  (reps={meta.get('reps')}, S2 {meta.get('s2_duration')} s, "
          f"S3 {meta.get('s3_duration')} s, S4 {s4n} tunnels; nproc={meta.get('nproc')})")
    print()
    print("| target | " + " | ".join(c[1] for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    figs = {}
    for t in order:
        if not targets[t]["ok"]:
            print(f"| {targets[t]['desc']} | not usable: {targets[t]['note']} |" + " |" * (len(cols) - 1))
            continue
        row = []
        for key, _, scen, case, fn in cols:
            text, v, r = cell(key, scen, case, t, fn)
            figs[(t, key)] = r
            row.append(text)
        print(f"| {targets[t]['desc']} | " + " | ".join(row) + " |")

    c, b = args.contender, args.baseline
    if c not in targets or not targets[c]["ok"]:
        print(f"\nno usable contender '{c}' in this run", file=sys.stderr)
        return 2

    # Repetitions that did not measure the proxy: a load test with errors, or no proxy CPU
    # at all (the daemon was not running). They still enter the medians above; say so.
    bad = []
    for (scen, case, tgt), reps in sorted(data.items()):
        if tgt != c:
            continue
        for rep, d in sorted(reps.items()):
            if scen == "S1":
                errs = 0.0 if d.get("code") == 200.0 and d.get("rc") == 0.0 else 1.0
            elif scen == "S2":
                errs = sum(d.get(k, 0.0) or 0.0 for k in
                           ("non2xx", "err_connect", "err_read", "err_write", "err_timeout"))
            elif scen == "S3":
                errs = d.get("errors", 0.0) or 0.0
            else:
                errs = 0.0
            dead = scen in ("S1", "S2", "S3") and d.get("proxy_cpu", 1.0) == 0.0
            failed = scen == "S4" and (d.get("failed", 0.0) or 0.0) > 0
            if errs or dead or failed:
                what = []
                if errs:
                    what.append("transfer failed" if scen == "S1" else f"{errs:.0f} client errors")
                if dead:
                    what.append("0 proxy CPU: the daemon was not running")
                if failed:
                    what.append(f"{d.get('failed'):.0f} tunnels failed")
                bad.append(f"{scen} {case} rep {rep}: " + ", ".join(what))
    if bad:
        print()
        print(f"WARNING: {len(bad)} repetition(s) of {c} did not measure normally "
              f"(see {args.out_dir}/raw.tsv and run.log):")
        for line in bad:
            print(f"  - {line}")
    print()
    print(f"| figure | {c} | target | met | {b} | ahead of {b} |")
    print("|---|---|---|---|---|---|")
    all_met = True
    for key, title, *_ in cols:
        v = figs.get((c, key))
        base = figs.get((b, key))
        goal = TARGETS.get(key)
        if key == "s4":
            met = v is not None and goal is not None and v <= goal
            ahead = None if v is None or base is None else v < base
            vt, gt, bt = (f"{v:.1f} KiB" if v is not None else "–"), f"≤ {goal} KiB", (
                f"{base:.1f} KiB" if base is not None else "–")
        else:
            met = v is not None and goal is not None and v >= goal
            ahead = None if v is None or base is None else v > base
            vt, gt, bt = (f"×{v:.2f}" if v is not None else "–"), f"≥ ×{goal}", (
                f"×{base:.2f}" if base is not None else "–")
        all_met &= bool(met) and ahead is not False
        met_text = "–" if v is None else ("yes" if met else "NO")
        print(f"| {title} | {vt} | {gt} | {met_text} | {bt} | "
              f"{'–' if ahead is None else ('yes' if ahead else 'NO')} |")
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
