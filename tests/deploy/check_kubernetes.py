#!/usr/bin/env python3
"""Offline checks of the Kubernetes manifests in deploy/kubernetes (no cluster, no kubectl).

usage: check_kubernetes.py --sandgate BIN DIR

Parses every *.yaml in DIR and checks what the deployment relies on: the kinds and API
versions, selectors that match their pod templates and Services that select pods, probes on
/healthz and /readyz at the admin port of the config the pod mounts, prometheus.io scrape
annotations naming that port and /metrics, the native sidecar (an init container with
restartPolicy: Always and a startup probe), the proxy URL the agent gets pointing at the
config's explicit listener with a sandbox the drop-in defines, volumes that exist and name
ConfigMaps and Secrets that exist, the containers' security contexts, and that each embedded
sandgate.toml passes `sandgate --check-config` (its absolute directories moved to a temp
dir). Prints each problem; exits 1 if there is one.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import urllib.parse

import yaml

class StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (PyYAML keeps the last
    silently; the API server's strict decoding, and kubectl, refuse it)."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f'duplicate key {key!r}', key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)

API = {'Namespace': 'v1', 'ConfigMap': 'v1', 'Secret': 'v1', 'Service': 'v1', 'Pod': 'v1',
       'DaemonSet': 'apps/v1'}
SANDGATE_UID = 65532


class Checker:
    def __init__(self, sandgate):
        self.sandgate = sandgate
        self.problems = []
        self.objects = []

    def fail(self, where, message):
        self.problems.append(f'{where}: {message}')

    def load(self, directory):
        for path in sorted(glob.glob(os.path.join(directory, '*.yaml'))):
            with open(path) as f:
                try:
                    for doc in yaml.load_all(f, Loader=StrictLoader):
                        if doc is not None:
                            self.objects.append((os.path.basename(path), doc))
                except yaml.YAMLError as e:
                    self.fail(os.path.basename(path), f'YAML: {e}')
        if not self.objects:
            self.fail(directory, 'no manifests')

    def find(self, kind, name, namespace):
        for _, o in self.objects:
            md = o.get('metadata', {})
            if o.get('kind') == kind and md.get('name') == name and md.get('namespace') == namespace:
                return o
        return None

    def check_all(self):
        names = set()
        for path, o in self.objects:
            kind = o.get('kind')
            md = o.get('metadata', {})
            where = f'{path}: {kind}/{md.get("name")}'
            if kind not in API:
                self.fail(where, f'unexpected kind {kind!r}')
                continue
            if o.get('apiVersion') != API[kind]:
                self.fail(where, f'apiVersion {o.get("apiVersion")!r}, expected {API[kind]!r}')
            if not re.fullmatch(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?', md.get('name', '')):
                self.fail(where, 'metadata.name is not a DNS label')
            if kind != 'Namespace' and not md.get('namespace'):
                self.fail(where, 'no metadata.namespace')
            key = (kind, md.get('namespace'), md.get('name'))
            if key in names:
                self.fail(where, 'defined twice')
            names.add(key)
        for path, o in self.objects:
            kind = o['kind']
            where = f'{path}: {kind}/{o["metadata"]["name"]}'
            ns = o['metadata'].get('namespace')
            if ns and kind != 'Namespace' and not self.find('Namespace', ns, None):
                self.fail(where, f'namespace {ns!r} is not defined here')
            if kind == 'DaemonSet':
                self.check_daemonset(where, o)
            elif kind == 'Pod':
                self.check_pod(where, o['metadata'], o['spec'], ns)
            elif kind == 'Service':
                self.check_service(where, o)

    def check_daemonset(self, where, ds):
        spec = ds['spec']
        tmpl = spec['template']
        labels = tmpl['metadata'].get('labels', {})
        for k, v in spec['selector']['matchLabels'].items():
            if labels.get(k) != v:
                self.fail(where, f'selector {k}={v} does not match the pod template')
        pod = tmpl['spec']
        if not pod.get('hostNetwork'):
            self.fail(where, 'node mode needs hostNetwork: the launcher redirects into the host netns')
        if pod.get('dnsPolicy') != 'ClusterFirstWithHostNet':
            self.fail(where, 'hostNetwork pods need dnsPolicy: ClusterFirstWithHostNet')
        self.check_pod(where, tmpl['metadata'], pod, ds['metadata']['namespace'])

    def check_service(self, where, svc):
        ns = svc['metadata']['namespace']
        selector = svc['spec'].get('selector', {})
        pods = [t for t in self.pod_templates(ns)
                if all(t[0].get('labels', {}).get(k) == v for k, v in selector.items())]
        if not pods:
            self.fail(where, f'selector {selector} matches no pod')
        ann = svc['metadata'].get('annotations', {})
        for port in svc['spec']['ports']:
            target = port.get('targetPort', port['port'])
            for md, spec in pods:
                if self.container_port(spec, target) is None:
                    self.fail(where, f'targetPort {target!r} is no container port of the pods')
            if ann.get('prometheus.io/port') and int(ann['prometheus.io/port']) != port['port']:
                self.fail(where, 'prometheus.io/port is not the Service port')
        self.check_scrape_annotations(where, ann)

    def pod_templates(self, ns):
        for _, o in self.objects:
            if o['metadata'].get('namespace') != ns:
                continue
            if o['kind'] == 'DaemonSet':
                yield o['spec']['template']['metadata'], o['spec']['template']['spec']
            elif o['kind'] == 'Pod':
                yield o['metadata'], o['spec']

    @staticmethod
    def container_port(spec, ref):
        for c in spec.get('containers', []) + spec.get('initContainers', []):
            for p in c.get('ports', []):
                if ref in (p.get('name'), p.get('containerPort')):
                    return p['containerPort']
        return None

    def check_scrape_annotations(self, where, ann):
        if ann.get('prometheus.io/scrape') != 'true':
            self.fail(where, 'no prometheus.io/scrape: "true" annotation')
        if ann.get('prometheus.io/path') != '/metrics':
            self.fail(where, 'prometheus.io/path is not /metrics')
        if not str(ann.get('prometheus.io/port', '')).isdigit():
            self.fail(where, 'prometheus.io/port is not a port number (a string)')

    def sandgate_container(self, where, spec):
        found = [c for c in spec.get('containers', []) + spec.get('initContainers', [])
                 if c['name'] == 'sandgate']
        if len(found) != 1:
            self.fail(where, 'expected exactly one container named sandgate')
            return None
        return found[0]

    def check_pod(self, where, md, spec, ns):
        volumes = {v['name']: v for v in spec.get('volumes', [])}
        for c in spec.get('containers', []) + spec.get('initContainers', []):
            for m in c.get('volumeMounts', []):
                if m['name'] not in volumes:
                    self.fail(where, f'{c["name"]} mounts undefined volume {m["name"]!r}')
        for name, v in volumes.items():
            if 'configMap' in v and not self.find('ConfigMap', v['configMap']['name'], ns):
                self.fail(where, f'volume {name}: ConfigMap {v["configMap"]["name"]!r} not defined')
            if 'secret' in v and not self.find('Secret', v['secret']['secretName'], ns):
                self.fail(where, f'volume {name}: Secret {v["secret"]["secretName"]!r} not defined')
        self.check_scrape_annotations(where, md.get('annotations', {}))

        c = self.sandgate_container(where, spec)
        if c is None:
            return
        config_path = c['args'][c['args'].index('--config') + 1]
        cfg_text, dropins = self.mounted_config(where, spec, c, ns, config_path)
        if cfg_text is None:
            return
        cfg = tomllib.loads(cfg_text)
        admin = cfg.get('listeners', {}).get('admin', '')
        admin_port = int(admin.rsplit(':', 1)[1]) if admin else None
        if admin_port is None:
            self.fail(where, 'the config has no admin listener: no probes, no metrics')
        elif not admin.startswith(('0.0.0.0:', '[::]:')):
            self.fail(where, f'admin listener {admin} is not reachable by the kubelet')
        for probe, path in (('startupProbe', '/readyz'), ('readinessProbe', '/readyz'),
                            ('livenessProbe', '/healthz')):
            p = c.get(probe, {}).get('httpGet')
            if not p:
                self.fail(where, f'sandgate has no {probe}')
                continue
            if p.get('path') != path:
                self.fail(where, f'{probe} path is {p.get("path")!r}, expected {path}')
            if self.container_port(spec, p['port']) != admin_port:
                self.fail(where, f'{probe} port {p["port"]!r} is not the admin port {admin_port}')
        ann_port = md.get('annotations', {}).get('prometheus.io/port')
        if ann_port and int(ann_port) != admin_port:
            self.fail(where, f'prometheus.io/port {ann_port} is not the admin port {admin_port}')
        if cfg.get('log', {}).get('audit') not in ('stdout', None) and \
                not cfg['log']['audit'].startswith('/var/'):
            self.fail(where, 'the audit log is neither stdout nor on a volume')
        self.check_security(where, spec, c)
        self.check_sidecar(where, spec, c, cfg, dropins, ns)
        self.check_config(where, cfg_text, dropins)

    def mounted_config(self, where, spec, c, ns, config_path):
        """The config file's text (from the ConfigMap mounted where --config points) and the
        drop-ins of a mounted sandboxes_dir, if any."""
        volumes = {v['name']: v for v in spec.get('volumes', [])}
        cfg_text = None
        for m in c.get('volumeMounts', []):
            v = volumes.get(m['name'], {})
            if 'configMap' in v and config_path.startswith(m['mountPath'].rstrip('/') + '/'):
                cm = self.find('ConfigMap', v['configMap']['name'], ns)
                key = config_path[len(m['mountPath'].rstrip('/')) + 1:]
                cfg_text = (cm or {}).get('data', {}).get(key)
        if cfg_text is None:
            self.fail(where, f'{config_path} is in no mounted ConfigMap')
            return None, {}
        sandboxes_dir = tomllib.loads(cfg_text).get('sandboxes_dir', '')
        dropins = {}
        for m in c.get('volumeMounts', []):
            v = volumes.get(m['name'], {})
            if m['mountPath'].rstrip('/') != sandboxes_dir.rstrip('/'):
                continue
            if 'secret' in v:
                s = self.find('Secret', v['secret']['secretName'], ns) or {}
                data = s.get('stringData', {})
                for item in v['secret'].get('items', [{'key': k, 'path': k} for k in data]):
                    dropins[item['path']] = data.get(item['key'], '')
            elif 'configMap' in v:
                cm = self.find('ConfigMap', v['configMap']['name'], ns) or {}
                dropins.update({k: t for k, t in cm.get('data', {}).items() if k.endswith('.toml')})
            elif 'hostPath' not in v:
                self.fail(where, f'sandboxes_dir {sandboxes_dir} is mounted from {list(v)}')
            if not m.get('readOnly'):
                self.fail(where, 'the daemon only reads sandboxes_dir: mount it readOnly')
        if sandboxes_dir and not any(m['mountPath'].rstrip('/') == sandboxes_dir.rstrip('/')
                                     for m in c.get('volumeMounts', [])):
            self.fail(where, f'sandboxes_dir {sandboxes_dir} is not mounted')
        return cfg_text, dropins

    def check_security(self, where, spec, c):
        pod_sc = spec.get('securityContext', {})
        sc = c.get('securityContext', {})
        uid = sc.get('runAsUser', pod_sc.get('runAsUser'))
        if uid != SANDGATE_UID:
            self.fail(where, f'sandgate runs as uid {uid}, expected {SANDGATE_UID}')
        if not (sc.get('runAsNonRoot', pod_sc.get('runAsNonRoot'))):
            self.fail(where, 'sandgate is not runAsNonRoot')
        if sc.get('allowPrivilegeEscalation') is not False:
            self.fail(where, 'sandgate allows privilege escalation')
        if sc.get('readOnlyRootFilesystem') is not True:
            self.fail(where, 'sandgate root filesystem is writable')
        caps = sc.get('capabilities', {})
        if caps.get('drop') != ['ALL'] or caps.get('add'):
            self.fail(where, 'sandgate must drop ALL capabilities and add none')
        seccomp = sc.get('seccompProfile', pod_sc.get('seccompProfile', {}))
        if seccomp.get('type') != 'RuntimeDefault':
            self.fail(where, 'no RuntimeDefault seccomp profile')
        if spec.get('terminationGracePeriodSeconds', 30) < 8:
            self.fail(where, 'shutdown needs about 7 s: terminationGracePeriodSeconds too short')
        if spec.get('automountServiceAccountToken') is not False:
            self.fail(where, 'the pod mounts a service account token it does not need')

    def check_sidecar(self, where, spec, c, cfg, dropins, ns):
        if c not in spec.get('initContainers', []):
            return  # node mode
        if c.get('restartPolicy') != 'Always':
            self.fail(where, 'a native sidecar is an init container with restartPolicy: Always')
        later = spec['initContainers'][spec['initContainers'].index(c) + 1:]
        if any(i.get('restartPolicy') != 'Always' for i in later):
            self.fail(where, 'a one-shot init container after sandgate would wait for it to exit')
        explicit = cfg.get('listeners', {}).get('explicit', [])
        sandboxes = {}
        for text in dropins.values():
            d = tomllib.loads(text)
            sandboxes[d.get('id')] = d
        for agent in spec.get('containers', []):
            env = {e['name']: e for e in agent.get('env', [])}
            for var in ('HTTPS_PROXY', 'HTTP_PROXY'):
                e = env.get(var)
                if not e:
                    self.fail(where, f'{agent["name"]} has no {var}')
                    continue
                url = e.get('value')
                ref = e.get('valueFrom', {}).get('secretKeyRef')
                if ref:
                    s = self.find('Secret', ref['name'], ns) or {}
                    url = s.get('stringData', {}).get(ref['key'])
                u = urllib.parse.urlsplit(url or '')
                if f'{u.hostname}:{u.port}' not in explicit:
                    self.fail(where, f'{var} {u.hostname}:{u.port} is not an explicit listener {explicit}')
                sb = sandboxes.get(u.username)
                if sb is None:
                    self.fail(where, f'{var} names sandbox {u.username!r}, which no drop-in defines')
                elif sb.get('token') != u.password:
                    self.fail(where, f'{var} has a token other than sandbox {u.username!r}\'s')

    def check_config(self, where, cfg_text, dropins):
        with tempfile.TemporaryDirectory() as tmp:
            moved = re.sub(r'"(/(?:etc|run|var)/[^"]*)"',
                           lambda m: '"' + tmp + m.group(1) + '"', cfg_text)
            cfg = tomllib.loads(moved)
            for path in (cfg.get('sandboxes_dir'),
                         os.path.dirname(cfg.get('credentials', {}).get('placeholder_key_file', ''))):
                if path:
                    os.makedirs(path, exist_ok=True)
            for name, text in dropins.items():
                with open(os.path.join(cfg['sandboxes_dir'], name), 'w') as f:
                    f.write(text)
            path = os.path.join(tmp, 'sandgate.toml')
            with open(path, 'w') as f:
                f.write(moved)
            r = subprocess.run([self.sandgate, '--check-config', path], capture_output=True,
                               text=True, timeout=30)
            if r.returncode != 0:
                self.fail(where, f'sandgate --check-config: {r.stderr.strip()}')


def objects_of(c, kind):
    return [o for _, o in c.objects if o['kind'] == kind]


def pod_spec(c, kind):
    o = objects_of(c, kind)[0]
    return o['spec']['template']['spec'] if kind == 'DaemonSet' else o['spec']


def sandgate_of(c, kind):
    spec = pod_spec(c, kind)
    return next(x for x in spec.get('containers', []) + spec.get('initContainers', [])
                if x['name'] == 'sandgate')


# Each breaks one thing the checks are for; the checker must then report a problem.
MUTATIONS = {
    'liveness probe on the wrong path':
        lambda c: sandgate_of(c, 'DaemonSet')['livenessProbe']['httpGet'].update(path='/'),
    'startup probe missing from the sidecar':
        lambda c: sandgate_of(c, 'Pod').pop('startupProbe'),
    'sidecar without restartPolicy: Always':
        lambda c: sandgate_of(c, 'Pod').pop('restartPolicy'),
    'scrape annotation on another port':
        lambda c: objects_of(c, 'Pod')[0]['metadata']['annotations'].update(
            {'prometheus.io/port': '9091'}),
    'Service selecting no pod':
        lambda c: objects_of(c, 'Service')[0]['spec']['selector'].update(
            {'app.kubernetes.io/name': 'sandgat'}),
    'a config sandgate refuses':
        lambda c: objects_of(c, 'ConfigMap')[0]['data'].update(
            {'sandgate.toml': objects_of(c, 'ConfigMap')[0]['data']['sandgate.toml']
             + '\nno_such_key = 1\n'}),
    'a proxy token the sandbox does not have':
        lambda c: next(s for s in objects_of(c, 'Secret'))['stringData'].update(
            {'proxy-url': 'http://agent:wrong@127.0.0.1:3128'}),
    'a capability added':
        lambda c: sandgate_of(c, 'DaemonSet')['securityContext']['capabilities'].update(
            add=['NET_ADMIN']),
    'a volume that does not exist':
        lambda c: pod_spec(c, 'DaemonSet')['volumes'].pop(0),
    'no hostNetwork for the node daemon':
        lambda c: pod_spec(c, 'DaemonSet').pop('hostNetwork'),
}


def self_test(sandgate, directory):
    """Every mutation must be caught; the unmutated manifests must pass."""
    failures = []
    for name, mutate in MUTATIONS.items():
        c = Checker(sandgate)
        c.load(directory)
        mutate(c)
        c.check_all()
        if not c.problems:
            failures.append(name)
        else:
            print(f'caught: {name}: {c.problems[0]}')
    # A key given twice (PyYAML alone would keep the last one silently).
    with tempfile.TemporaryDirectory() as tmp:
        for path in glob.glob(os.path.join(directory, '*.yaml')):
            with open(path) as f:
                text = f.read()
            if path.endswith('node-daemonset.yaml'):
                text = text.replace('      hostNetwork: true\n',
                                    '      hostNetwork: true\n      hostNetwork: false\n', 1)
            with open(os.path.join(tmp, os.path.basename(path)), 'w') as f:
                f.write(text)
        c = Checker(sandgate)
        c.load(tmp)
        if not any('duplicate key' in p for p in c.problems):
            failures.append('a duplicated key')
        else:
            print('caught: a duplicated key')
    for name in failures:
        print(f'self-test: not caught: {name}', file=sys.stderr)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--sandgate', required=True)
    ap.add_argument('--self-test', action='store_true',
                    help='check that the checks catch broken manifests')
    ap.add_argument('dir')
    args = ap.parse_args()
    if args.self_test:
        return self_test(args.sandgate, args.dir)
    c = Checker(args.sandgate)
    c.load(args.dir)
    if not c.problems:
        c.check_all()
    for p in c.problems:
        print(p, file=sys.stderr)
    print(f'{len(c.objects)} objects; {len(c.problems)} problem(s)')
    return 1 if c.problems else 0


if __name__ == '__main__':
    sys.exit(main())
