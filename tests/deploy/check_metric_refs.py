#!/usr/bin/env python3
"""Checks that the Prometheus rules and Grafana dashboards in deploy/ use metrics that exist.

usage: check_metric_refs.py --metrics SCRAPE [--declared METRICS_CPP] [--rules FILE]...
                            [--dashboard FILE]...

SCRAPE is a real /metrics answer of sandgate (Prometheus text format). A family with no
sample yet (sandgate_credential_expiry_seconds before a token with an expiry is cached) is not
in a scrape: with --declared (src/telemetry/metrics.cpp), a name registered there passes too,
without its labels checked. For every PromQL
expression (rule exprs, dashboard targets and template queries) this checks that each
sandgate_* metric is in the scrape, that each label matcher names a label the metric has and
(for = and =~ of plain alternatives) values it takes, that each recording rule referenced is
defined, and, for dashboards, that the JSON is well formed for Grafana (unique panel ids, a
grid position, a data source and an expr per target, and every $variable defined). Prints
each problem; exits 1 if there is one.
"""
import argparse
import json
import re
import sys

import yaml

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+\S+')
LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
METRIC_REF = re.compile(r'(?<![\w:])(sandgate_[a-zA-Z0-9_]+)(?![\w:])(\s*\{([^}]*)\})?')
RECORDED_REF = re.compile(r'(?<![\w:])([a-zA-Z_]\w*:[a-zA-Z0-9_:]+)')
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
# Labels Prometheus adds at scrape time, and the histogram bucket label.
TARGET_LABELS = {'job', 'instance', 'le'}
# Families registered in metrics.cpp (--declared), and their histogram series.
DECLARED = set()
GRAFANA_BUILTINS = {'__rate_interval', '__interval', '__range', '__all', '__name'}


def parse_scrape(text):
    """metric name -> {label -> set of values}."""
    metrics = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = metrics.setdefault(m.group(1), {})
        for k, v in LABEL_PAIR.findall(m.group(3) or ''):
            labels.setdefault(k, set()).add(v)
    return metrics


def check_expr(where, expr, metrics, recorded, problems):
    # Template variables stand for label values: the check is of names, not of selections.
    seen = False
    for m in METRIC_REF.finditer(expr):
        name, matchers = m.group(1), m.group(3)
        seen = True
        if name not in metrics:
            if name not in DECLARED:
                problems.append(f'{where}: metric {name} is not in the scrape')
            continue
        for label, op, value in MATCHER.findall(matchers or ''):
            if label in TARGET_LABELS:
                continue
            if label not in metrics[name]:
                problems.append(f'{where}: {name} has no label {label!r}')
                continue
            if op in ('!=', '!~') or '$' in value:
                continue
            alternatives = value.split('|') if op == '=~' else [value]
            for alt in alternatives:
                if re.fullmatch(r'[\w.\-]*', alt) and alt not in metrics[name][label]:
                    problems.append(f'{where}: {name}{{{label}}} never takes the value {alt!r}')
    # Labels grouped by must be labels of the metrics aggregated (or the target's).
    known = set(TARGET_LABELS)
    partial = False
    for m in METRIC_REF.finditer(expr):
        if m.group(1) in metrics:
            known.update(metrics[m.group(1)])
        else:
            partial = True
    for clause in re.findall(r'\b(?:by|without)\s*\(([^)]*)\)', expr):
        for label in filter(None, (x.strip() for x in clause.split(','))):
            if label not in known and not partial:
                problems.append(f'{where}: grouped by {label!r}, which its metrics do not have')
    for name in RECORDED_REF.findall(expr):
        seen = True
        if name not in recorded:
            problems.append(f'{where}: recording rule {name} is not defined')
    if not seen and 'up{' not in expr and 'up ' not in expr:
        problems.append(f'{where}: references no sandgate metric: {expr}')


def check_rules(path, metrics, recorded, problems):
    with open(path) as f:
        doc = yaml.safe_load(f)
    for group in doc.get('groups', []):
        for rule in group.get('rules', []):
            name = rule.get('alert') or rule.get('record')
            check_expr(f'{path}: {name}', rule['expr'], metrics, recorded, problems)


def recorded_names(paths):
    names = set()
    for path in paths:
        with open(path) as f:
            doc = yaml.safe_load(f)
        for group in doc.get('groups', []):
            names.update(r['record'] for r in group.get('rules', []) if 'record' in r)
    return names


def check_dashboard(path, metrics, recorded, problems):
    with open(path) as f:
        dash = json.load(f)
    for key in ('title', 'uid', 'panels', 'schemaVersion'):
        if key not in dash:
            problems.append(f'{path}: no {key!r}')
    variables = {v['name'] for v in dash.get('templating', {}).get('list', [])}
    ids = set()
    exprs = []
    for v in dash.get('templating', {}).get('list', []):
        if v.get('type') == 'query':
            q = v['query']['query'] if isinstance(v['query'], dict) else v['query']
            exprs.append((f'{path}: variable {v["name"]}', q))
    for panel in dash.get('panels', []):
        where = f'{path}: panel {panel.get("id")} "{panel.get("title")}"'
        if panel.get('id') in ids:
            problems.append(f'{where}: duplicate id')
        ids.add(panel.get('id'))
        grid = panel.get('gridPos', {})
        if not all(isinstance(grid.get(k), int) for k in 'xywh') or grid['x'] + grid['w'] > 24:
            problems.append(f'{where}: bad gridPos {grid}')
        if panel.get('type') == 'row':
            continue
        if 'datasource' not in panel:
            problems.append(f'{where}: no datasource')
        targets = panel.get('targets', [])
        if not targets:
            problems.append(f'{where}: no targets')
        for t in targets:
            if not t.get('expr'):
                problems.append(f'{where}: target {t.get("refId")} has no expr')
                continue
            exprs.append((f'{where} {t.get("refId")}', t['expr']))
    text = json.dumps(dash)
    for ref in set(re.findall(r'\$\{?([a-zA-Z_]\w*)', text)):
        if ref not in variables and ref not in GRAFANA_BUILTINS:
            problems.append(f'{path}: ${ref} is not a variable of the dashboard')
    for where, expr in exprs:
        check_expr(where, expr, metrics, recorded, problems)
    return len(exprs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--metrics', required=True)
    ap.add_argument('--declared')
    ap.add_argument('--rules', action='append', default=[])
    ap.add_argument('--dashboard', action='append', default=[])
    args = ap.parse_args()
    with open(args.metrics) as f:
        metrics = parse_scrape(f.read())
    if not metrics:
        print(f'{args.metrics}: no samples', file=sys.stderr)
        return 1
    if args.declared:
        with open(args.declared) as f:
            for name in re.findall(r'"(sandgate_[a-z0-9_]+)"', f.read()):
                DECLARED.update({name, name + '_bucket', name + '_sum', name + '_count'})
    recorded = recorded_names(args.rules)
    problems = []
    for path in args.rules:
        check_rules(path, metrics, recorded, problems)
    n = 0
    for path in args.dashboard:
        n += check_dashboard(path, metrics, recorded, problems)
    for p in problems:
        print(p, file=sys.stderr)
    print(f'{len(metrics)} metric names in the scrape; {n} dashboard expressions; '
          f'{len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
