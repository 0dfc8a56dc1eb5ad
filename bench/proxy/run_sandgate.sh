#!/usr/bin/env bash
# run_sandgate.sh PORT [extra sandgate args]
# Renders config/bench.toml with the given listen port (and audit path) into
# /tmp/sandgate-bench/PORT/ and execs the sandgate daemon on it, in the foreground, so the
# PID the peers harness started is the daemon itself (its CPU and PSS are what is measured).
#
# Environment:
#   SANDGATE_BIN           daemon binary   (default: <repo>/build/release/src/app/sandgate)
#   SANDGATE_BENCH_CONFIG  template config (default: <repo>/config/bench.toml)
#   SANDGATE_BENCH_AUDIT   audit log path  (default: /tmp/sandgate-bench/PORT/audit.log;
#                          "off" disables the audit log)
#   SANDGATE_BENCH_WORKERS worker threads  (default: the template's value, 0 = one per core)
set -euo pipefail
port=${1:?usage: run_sandgate.sh PORT}
shift
case $port in (*[!0-9]*|'') echo "run_sandgate.sh: bad port '$port'" >&2; exit 2 ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${SANDGATE_BIN:-$root/build/release/src/app/sandgate}
template=${SANDGATE_BENCH_CONFIG:-$root/config/bench.toml}
dir=/tmp/sandgate-bench/$port
audit=${SANDGATE_BENCH_AUDIT:-$dir/audit.log}

[ -x "$bin" ] || { echo "run_sandgate.sh: no binary at $bin (cmake --preset release && cmake --build build/release --target sandgate)" >&2; exit 1; }
mkdir -p "$dir"
rm -f "$dir/audit.log"
sed -e "s|^explicit = \[.*\]|explicit = [\"127.0.0.1:$port\"]|" \
    -e "s|^audit = .*|audit = \"$audit\"|" \
    ${SANDGATE_BENCH_WORKERS:+-e "s|^workers = [0-9]*|workers = $SANDGATE_BENCH_WORKERS|"} \
    "$template" > "$dir/sandgate.toml"
# One line per start (the PID stays the daemon's after exec): when a harness rep shows the
# daemon gone, this says whether and when it was restarted.
printf '%s pid=%s bin=%s\n' "$(date -u +%FT%TZ)" "$$" "$bin" >>"$dir/starts.log"
exec "$bin" --config "$dir/sandgate.toml" "$@"
