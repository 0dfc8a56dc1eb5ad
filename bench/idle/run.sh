#!/usr/bin/env bash
# bench/idle/run.sh [--no-build] [run.py options: --stages 1000,10000,100000 --bin PATH ...]
#
# Memory per idle CONNECT tunnel at 1,000, 10,000 and 100,000 tunnels, in one run (issue 13,
# S4): see run.py. Needs root (namespaces). Builds build/release (daemon and
# bench/idle_tunnels) unless --no-build, checks there is memory to spare, then, under the
# shared benchmark lock, runs run.py in namespaces of its own:
#   --net                  only loopback; run.py raises ip_local_port_range, somaxconn and
#                          tcp_max_syn_backlog there (per-namespace sysctls), never on the host
#   --pid --fork --kill-child --mount-proc
#                          run.py is pid 1 of its own PID namespace: when it ends, or when this
#                          script is killed, the kernel kills every process it started, and the
#                          namespaces go with them (no names, so two runs cannot clash)
# The descriptor limit is raised by run.py for itself and its children only.
# Results: /tmp/sg-idle-results/<timestamp>/ (report.md, daemon.stderr, sandgate.toml).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network and PID namespaces)" >&2; exit 2; }
if [ $build = 1 ]; then
    (cd "$root" && cmake --preset release >/dev/null &&
        cmake --build --preset release -j2 --target sandgate idle_tunnels >/dev/null)
fi

# 100,000 tunnels are 400,000 sockets on loopback (kernel memory, not in anyone's RSS) plus
# the daemon: a few GiB. Refuse to start without 6 GiB available.
avail=$(awk '/^MemAvailable:/{print int($2 / 1048576)}' /proc/meminfo)
[ "$avail" -ge 6 ] || { echo "run.sh: only ${avail} GiB available, want 6" >&2; exit 2; }

out=/tmp/sg-idle-results/$(date -u +%Y%m%d-%H%M%S)-$$
mkdir -p "$out"
{
    echo "date=$(date -u +%FT%TZ)"
    echo "commit=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
    echo "kernel=$(uname -r) cpus=$(nproc)"
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "mem_available_gib=$avail"
} >"$out/meta.txt"
echo "results: $out"

export SG_IDLE_HOST_NETNS
SG_IDLE_HOST_NETNS=$(stat -L -c %i /proc/self/ns/net)
status=0
flock /tmp/sandgate-bench.lock \
    unshare --net --pid --fork --kill-child --mount-proc \
    python3 "$here/run.py" --out "$out" --build "$root/build/release" "$@" || status=$?
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/meta.txt"
cat "$out/meta.txt"
exit $status
