#!/usr/bin/env python3
"""Ratio table of a peers-harness run (../shared/peers/run.sh results directory).

    bench/proxy/ratios.py RESULTS_DIR [--contender sandgate] [--baseline squid]

Reads RESULTS_DIR/meta.txt and raw.tsv and prints, per target, every headline figure next to
its ratio to DIRECT (median over reps of target/DIRECT in the same rep, as the harness's own
report does), then the contender's figures against sandgate's targets and against the
baseline peer (squid by default). Exit status 0 when every target is met, 1 otherwise, 2 on
missing data.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--contender", default="sandgate")
    ap.add_argument("--baseline", default="squid")
    args = ap.parse_args()
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
