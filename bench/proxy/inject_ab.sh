#!/usr/bin/env bash
# bench/proxy/inject_ab.sh [REPS] [SECONDS] - what credential injection costs an intercepted
# request (issue 11: at most 10 % over one without), as an A/B in one run: two daemons from the
# same binary on config/bench.toml, B with a static credential injected (Bearer) on every
# request to the S5 origin; the harness's S5 client (tlsbench, keep-alive GET /small inside an
# intercepted CONNECT by name, 16 connections) against each in turn, REPS times (default 3),
# SECONDS each (default 10). Prints, per rep and as medians: requests/s and the daemon's CPU
# per request (user + system, from /proc), and B / A for both.
#
# Needs the harness's scratch files (nginx config, origin CA, tlsbench) under
# PEERS_RUN_DIR (default /tmp/peers-run-sandgate): run `bench/proxy/run.sh --intercept
# --quick` once first. SANDGATE_BIN as for run_sandgate.sh (default build/release).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=${1:-3} secs=${2:-10}
RUN=${PEERS_RUN_DIR:-/tmp/peers-run-sandgate}
bin=${SANDGATE_BIN:-$root/build/release/src/app/sandgate}
tlsb=$RUN/bin/tlsbench origin_ca=$RUN/tls/s56-ca-ec256.crt
[ -x "$tlsb" ] && [ -s "$origin_ca" ] && [ -s "$RUN/nginx/nginx.conf" ] || {
    echo "inject_ab.sh: harness scratch files missing under $RUN (run bench/proxy/run.sh --intercept --quick first)" >&2; exit 2; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 18080 18443 18446 13200 13201; do
    port_open $p && { echo "inject_ab.sh: port $p is in use" >&2; exit 2; }
done

work=$(mktemp -d /tmp/sandgate-inject-ab.XXXXXX)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# B's template: bench.toml plus one credential bound to the origin's name.
printf 'ghs_injectbench0123456789abcdef\n' >"$work/token"
chmod 600 "$work/token"
cp "$root/config/bench.toml" "$work/inject.toml"
cat >>"$work/inject.toml" <<EOF

[credentials]
placeholder_key_file = "$work/placeholder.key"

[credentials.bench]
provider = "static"
file = "$work/token"

[[sandboxes.bench.inject]]
hosts = ["localhost"]
credential = "bench"
as = "bearer"
EOF

nginx -c "$RUN/nginx/nginx.conf" -p "$RUN/nginx" -e "$work/nginx-error.log" >"$work/nginx.log" 2>&1 </dev/null &
pids+=($!)
export SANDGATE_BIN=$bin ORIGIN_CA=$origin_ca ORIGIN_TLS_PORT=18446 SANDGATE_BENCH_AUDIT=$work/audit-a.log
"$here/run_sandgate.sh" 13200 >"$work/a.log" 2>&1 </dev/null &
pids+=($!); pid_a=$!
SANDGATE_BENCH_CONFIG=$work/inject.toml SANDGATE_BENCH_AUDIT=$work/audit-b.log \
    "$here/run_sandgate.sh" 13201 >"$work/b.log" 2>&1 </dev/null &
pids+=($!); pid_b=$!
for _ in $(seq 1 100); do port_open 18446 && port_open 13200 && port_open 13201 && break; sleep 0.1; done
ca=$("$here/run_sandgate.sh" --ca)
auth=$(printf bench:bench | base64)
for p in 13200 13201; do
    code=$(curl -s -o /dev/null -m 10 -w '%{http_code}' --proxy-user bench:bench --cacert "$ca" \
        -x http://127.0.0.1:$p https://localhost:18446/small)
    [ "$code" = 200 ] || { echo "inject_ab.sh: check through :$p gave $code (see $work)" >&2; cat "$work"/[ab].log >&2; exit 2; }
done

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime + stime, clock ticks
hz=$(getconf CLK_TCK)
one() { # PORT PID -> "rate us_per_req"
    local c0 c1 out rate ok
    c0=$(cpu "$2")
    out=$("$tlsb" --proxy 127.0.0.1:$1 --proxy-auth "$auth" --target localhost:18446 --cafile "$ca" \
        --mode ka --concurrency 16 --duration "$secs" --timeout 10 --setup-timeout 60 | grep '^mode=' | tail -1)
    c1=$(cpu "$2")
    rate=$(tr ' ' '\n' <<<"$out" | sed -n 's/^rate=//p')
    ok=$(tr ' ' '\n' <<<"$out" | sed -n 's/^ok=//p')
    grep -q ' errors=0 ' <<<" $out " || { echo "inject_ab.sh: errors: $out" >&2; exit 1; }
    awk -v r="$rate" -v ok="$ok" -v c="$((c1 - c0))" -v hz="$hz" 'BEGIN { printf "%.1f %.2f", r, c / hz / ok * 1e6 }'
}
one 13200 "$pid_a" >/dev/null; one 13201 "$pid_b" >/dev/null   # warm: leaves, sessions, token
printf 'rep\tA req/s\tA us/req\tB req/s\tB us/req\tB/A rate\tB/A cpu\n'
rows=()
for rep in $(seq 1 "$reps"); do
    read -r ra ca_ <<<"$(one 13200 "$pid_a")"
    read -r rb cb <<<"$(one 13201 "$pid_b")"
    row=$(awk -v ra="$ra" -v ca="$ca_" -v rb="$rb" -v cb="$cb" 'BEGIN { printf "%s\t%s\t%s\t%s\t%.3f\t%.3f", ra, ca, rb, cb, rb / ra, cb / ca }')
    rows+=("$row")
    printf '%s\t%s\n' "$rep" "$row"
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf 'median\tB/A rate %s\tB/A cpu per request %s\n' \
    "$(printf '%s\n' "${rows[@]}" | cut -f5 | median)" "$(printf '%s\n' "${rows[@]}" | cut -f6 | median)"
lines=$(grep -c '"credential"' "$work/audit-b.log" || true)
echo "B's audit lines naming the credential: $lines (A's: $(grep -c '"credential"' "$work/audit-a.log" || true))"
