#!/usr/bin/env bash
# bench/proxy/inject_ab.sh [--resign] [REPS] [SECONDS] - what credential injection costs an
# intercepted request (issue 11: at most 10 % over one without), as an A/B in one run: two
# daemons from the same binary on config/bench.toml, B with a static credential injected
# (Bearer) on every request to the S5 origin; the harness's S5 client (tlsbench, keep-alive
# GET /small inside an intercepted CONNECT by name, 16 connections) against each in turn, REPS
# times (default 3), SECONDS each (default 10). Prints, per rep and as medians: requests/s and
# the daemon's CPU per request (user + system, from /proc), and B / A for both.
#
# --resign (issue 38: at most 15 % over a plain injected header): every request carries a SigV4
# Authorization signed with the sandbox's placeholder key (UNSIGNED-PAYLOAD); A replaces it
# with a Bearer token (as above), B signs the request again with AWS keys (as = "aws_sigv4").
#
# Needs the harness's scratch files (nginx config, origin CA, tlsbench) under
# PEERS_RUN_DIR (default /tmp/peers-run-sandgate): run `bench/proxy/run.sh --intercept
# --quick` once first. SANDGATE_BIN as for run_sandgate.sh (default build/release).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
resign=0
if [ "${1:-}" = --resign ]; then resign=1; shift; fi
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

# The credential, named "aws" in both daemons so that the placeholder the requests carry is the
# same: B injects it as Bearer; with --resign, A does, and B signs again with AWS keys.
printf 'ghs_injectbench0123456789abcdef\n' >"$work/token"
printf 'AKIAINJECTBENCHKEY01\n' >"$work/key-id"
printf 'injectBenchSecretKey/0123456789abcdefghijk\n' >"$work/secret"
head -c 32 /dev/urandom >"$work/placeholder.key"
chmod 600 "$work/token" "$work/key-id" "$work/secret" "$work/placeholder.key"
template() { # NAME PROVIDER-LINES AS: bench.toml plus the credential bound to the origin's name
    cp "$root/config/bench.toml" "$work/$1.toml"
    cat >>"$work/$1.toml" <<EOF

[credentials]
placeholder_key_file = "$work/placeholder.key"

[credentials.aws]
$2

[[sandboxes.bench.inject]]
hosts = ["localhost"]
credential = "aws"
as = "$3"
EOF
}
template inject "$(printf 'provider = "static"\nfile = "%s"' "$work/token")" bearer
config_a= config_b=$work/inject.toml headers=()
if [ $resign = 1 ]; then
    template resign "$(printf 'provider = "aws_static"\naccess_key_id_file = "%s"\nsecret_access_key_file = "%s"' \
        "$work/key-id" "$work/secret")" aws_sigv4
    config_a=$work/inject.toml config_b=$work/resign.toml
    # What an SDK signing with the placeholder sends (the signature itself is not checked).
    placeholder=sgph_$(printf 'sandgate-placeholder-v1\0bench\0aws' |
        openssl dgst -sha256 -mac HMAC -macopt "hexkey:$(od -An -vtx1 "$work/placeholder.key" | tr -d ' \n')" |
        awk '{print substr($NF, 1, 40)}')
    now=$(date -u +%Y%m%dT%H%M%SZ)
    headers=(--header "X-Amz-Date: $now" --header "X-Amz-Content-Sha256: UNSIGNED-PAYLOAD"
             --header "Authorization: AWS4-HMAC-SHA256 Credential=$placeholder/${now:0:8}/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=$(printf '%064d' 0)")
fi

nginx -c "$RUN/nginx/nginx.conf" -p "$RUN/nginx" -e "$work/nginx-error.log" >"$work/nginx.log" 2>&1 </dev/null &
pids+=($!)
export SANDGATE_BIN=$bin ORIGIN_CA=$origin_ca ORIGIN_TLS_PORT=18446
SANDGATE_BENCH_CONFIG=$config_a SANDGATE_BENCH_AUDIT=$work/audit-a.log \
    "$here/run_sandgate.sh" 13200 >"$work/a.log" 2>&1 </dev/null &
pids+=($!); pid_a=$!
SANDGATE_BENCH_CONFIG=$config_b SANDGATE_BENCH_AUDIT=$work/audit-b.log \
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
    out=$("$tlsb" --proxy 127.0.0.1:$1 --proxy-auth "$auth" --target localhost:18446 --cafile "$ca" "${headers[@]}" \
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
