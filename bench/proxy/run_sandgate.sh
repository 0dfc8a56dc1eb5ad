#!/usr/bin/env bash
# run_sandgate.sh PORT [extra sandgate args]
# run_sandgate.sh --ca
# Renders config/bench.toml with the given listen port (and audit path, interception CA and
# upstream roots) into /tmp/sandgate-bench/PORT/ and execs the sandgate daemon on it, in the
# foreground, so the PID the peers harness started is the daemon itself (its CPU and PSS are
# what is measured).
#
# The interception CA (S5/S6) is created once with `sandgate ca init` in the CA directory when
# it is missing; its key must be mode 0600 and owned by the user the daemon runs as (checked
# here, and again by the daemon). `--ca` only makes sure the CA exists and prints the path of
# its certificate: the harness's `--contender-ca`.
#
# Environment:
#   SANDGATE_BIN           daemon binary   (default: <repo>/build/release/src/app/sandgate)
#   SANDGATE_BENCH_CONFIG  template config (default: <repo>/config/bench.toml)
#   SANDGATE_BENCH_AUDIT   audit log path  (default: /tmp/sandgate-bench/PORT/audit.log;
#                          "off" disables the audit log)
#   SANDGATE_BENCH_WORKERS worker threads  (default: the template's value, 0 = one per core)
#   SANDGATE_BENCH_CA_DIR  interception CA (default: /tmp/sandgate-bench/ca: ca.pem, ca.key)
#   ORIGIN_CA              roots the upstream leg trusts besides the system's (set by the
#                          harness: its S5/S6 origin CA); unset = no upstream_ca_file
#   ORIGIN_TLS_PORT        the inspected origin port (set by the harness; default 18446)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${SANDGATE_BIN:-$root/build/release/src/app/sandgate}
template=${SANDGATE_BENCH_CONFIG:-$root/config/bench.toml}
ca_dir=${SANDGATE_BENCH_CA_DIR:-/tmp/sandgate-bench/ca}

[ -x "$bin" ] || { echo "run_sandgate.sh: no binary at $bin (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }

# The CA in $ca_dir, created if missing; refuses one the daemon would refuse.
ensure_ca() {
    if [ ! -e "$ca_dir/ca.pem" ] && [ ! -e "$ca_dir/ca.key" ]; then
        mkdir -p "$(dirname "$ca_dir")"
        "$bin" ca init "$ca_dir" >"$ca_dir.init.log" 2>&1 || {
            echo "run_sandgate.sh: sandgate ca init $ca_dir failed:" >&2; cat "$ca_dir.init.log" >&2; exit 1; }
    fi
    [ -s "$ca_dir/ca.pem" ] && [ -s "$ca_dir/ca.key" ] || {
        echo "run_sandgate.sh: $ca_dir has only one of ca.pem and ca.key; remove it" >&2; exit 1; }
    local owner; owner=$(stat -c %u "$ca_dir/ca.key")
    [ "$owner" = "$(id -u)" ] || {
        echo "run_sandgate.sh: $ca_dir/ca.key is owned by uid $owner, not by $(id -u) who runs the daemon;" \
             "remove $ca_dir or set SANDGATE_BENCH_CA_DIR" >&2; exit 1; }
    [ "$(stat -c %a "$ca_dir/ca.key")" = 600 ] || chmod 600 "$ca_dir/ca.key"
}

if [ "${1:-}" = --ca ]; then
    ensure_ca
    echo "$ca_dir/ca.pem"
    exit 0
fi

port=${1:?usage: run_sandgate.sh PORT | run_sandgate.sh --ca}
shift
case $port in (*[!0-9]*|'') echo "run_sandgate.sh: bad port '$port'" >&2; exit 2 ;; esac
dir=/tmp/sandgate-bench/$port
audit=${SANDGATE_BENCH_AUDIT:-$dir/audit.log}
tls_port=${ORIGIN_TLS_PORT:-18446}
case $tls_port in (*[!0-9]*|'') echo "run_sandgate.sh: bad ORIGIN_TLS_PORT '$tls_port'" >&2; exit 2 ;; esac

ensure_ca
mkdir -p "$dir"
rm -f "$dir/audit.log"
if [ -n "${ORIGIN_CA:-}" ]; then
    upstream=(-e "s|^upstream_ca_file = .*|upstream_ca_file = \"$ORIGIN_CA\"|")
else
    upstream=(-e "/^upstream_ca_file = /d")
fi
sed -e "s|^explicit = \[.*\]|explicit = [\"127.0.0.1:$port\"]|" \
    -e "s|^audit = .*|audit = \"$audit\"|" \
    -e "s|^ca_cert = .*|ca_cert = \"$ca_dir/ca.pem\"|" \
    -e "s|^ca_key = .*|ca_key = \"$ca_dir/ca.key\"|" \
    "${upstream[@]}" \
    -e "/^ports = \[/s|18446|$tls_port|" \
    -e "/^inspect = \[/s|:18446\"|:$tls_port\"|" \
    ${SANDGATE_BENCH_WORKERS:+-e "s|^workers = [0-9]*|workers = $SANDGATE_BENCH_WORKERS|"} \
    "$template" > "$dir/sandgate.toml"
# One line per start (the PID stays the daemon's after exec): when a harness rep shows the
# daemon gone, this says whether and when it was restarted.
printf '%s pid=%s bin=%s\n' "$(date -u +%FT%TZ)" "$$" "$bin" >>"$dir/starts.log"
exec "$bin" --config "$dir/sandgate.toml" "$@"
