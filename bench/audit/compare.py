#!/usr/bin/env python3
"""Checks that `sandgate audit --format json` and bench/audit/denials.jq found the same denial
summary: per (sandbox, host, port, reason), the same count, first and last time.

usage: compare.py SANDGATE_JSON JQ_JSON      exit 0 same, 1 different
"""
import json
import sys


def from_sandgate(path):
    with open(path) as f:
        report = json.load(f)
    out = {}
    for s in report["sandboxes"]:
        for d in s["denials"]:
            out[(s["sandbox"], d["host"], d["port"], d["reason"])] = (
                d["count"], d["first_seen"], d["last_seen"])
    shown = report["not_shown"]["denials"]["lines"]
    return out, shown


def from_jq(path):
    with open(path) as f:
        summary = json.load(f)
    out = {}
    for key, v in summary.items():
        sandbox, host, port, reason = json.loads(key)
        out[(sandbox, host, port, reason)] = (v["count"], v["first"], v["last"])
    return out


def main():
    sg, not_shown = from_sandgate(sys.argv[1])
    jq = from_jq(sys.argv[2])
    if not_shown:
        print(f"compare: sandgate left {not_shown} denial lines out (raise --max-groups)")
        return 1
    if sg != jq:
        only_sg = sorted(set(sg) - set(jq))[:5]
        only_jq = sorted(set(jq) - set(sg))[:5]
        differ = [k for k in sg if k in jq and sg[k] != jq[k]][:5]
        print(f"compare: DIFFERENT: {len(sg)} vs {len(jq)} groups; only sandgate {only_sg}; "
              f"only jq {only_jq}; differing {[(k, sg[k], jq[k]) for k in differ]}")
        return 1
    lines = sum(v[0] for v in sg.values())
    print(f"compare: same denial summary: {len(sg)} groups, {lines} denial lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
