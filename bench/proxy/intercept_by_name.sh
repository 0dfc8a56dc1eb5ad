#!/usr/bin/env bash
# intercept_by_name.sh RESULTS_DIR
# S5/S6 for sandgate with the origin named: CONNECT localhost:18446 instead of the harness's
# CONNECT 127.0.0.1:18446. sandgate inspects host names only (an IP literal is never
# intercepted, see docs/policy.md), so in the harness's own S5/S6 it fails the interception
# check and is skipped. This script measures it right after that run, on the same origin (the
# harness's rendered nginx config, its origin CA and its tlsbench client, same flags, same
# durations, reps and key type as RESULTS_DIR/meta.txt), against DIRECT to the same name,
# interleaved per repetition as the harness does. The origin's leaf names IP:127.0.0.1 and
# DNS:localhost, so the client and sandgate's upstream leg both verify "localhost".
#
# Results: RESULTS_DIR/by-name/{raw.tsv,meta.txt,tls/,*.log} in the harness's format, with
# targets "direct" (DIRECT by name) and "sandgate"; bench/proxy/ratios.py --intercept reads them.
# Run it where the harness ran (bench/proxy/run.sh --intercept does, in the same kind of
# network namespace); it needs the origin ports free, i.e. the harness finished.
#
# Environment: SANDGATE_BIN, PEERS_DIR, PEERS_RUN_DIR (as bench/proxy/run.sh sets them).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
peers_dir=${PEERS_DIR:-$root/bench/peers}
out=${1:?usage: intercept_by_name.sh RESULTS_DIR}
meta=$out/meta.txt
RUN=${PEERS_RUN_DIR:-/tmp/peers-run-sandgate}
[ -s "$meta" ] || { echo "intercept_by_name.sh: no $meta" >&2; exit 2; }
get() { sed -n "s/^$1=//p" "$meta" | head -1; }
reps=$(get reps) s5_dur=$(get s5_duration) s5_conns=$(get s5_conns)
s6_dur=$(get s6_duration) s6_conc=$(get s6_concurrency) key=$(get tls_key)
[ -n "$reps" ] && [ -n "$s5_dur" ] && [ -n "$key" ] || { echo "intercept_by_name.sh: $meta has no S5/S6 settings" >&2; exit 2; }

name=localhost tport=18446 port=13200
tlsb=$RUN/bin/tlsbench origin_ca=$RUN/tls/s56-ca-$key.crt
pstat="/usr/bin/python3 $peers_dir/lib/pstat.py"
mem_limit=$((2 << 30))
d=$out/by-name
mkdir -p "$d/tls"
raw=$d/raw.tsv
: >"$raw"
log() { printf '[%s] by-name: %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$d/run.log" >&2; }
[ -x "$tlsb" ] && [ -s "$origin_ca" ] && [ -s "$RUN/nginx/nginx.conf" ] ||
    { echo "intercept_by_name.sh: harness scratch files missing under $RUN (run the harness's S5/S6 first)" >&2; exit 2; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 18080 18443 $tport $port; do
    port_open $p && { echo "intercept_by_name.sh: port $p is in use" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

opid="" spid=""
cleanup() {
    local p
    for p in $spid $opid; do kill -TERM "$p" 2>/dev/null; done
    for p in $spid $opid; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
nginx -c "$RUN/nginx/nginx.conf" -p "$RUN/nginx" -e "$d/nginx-error.log" >"$d/nginx.log" 2>&1 </dev/null &
opid=$!
ORIGIN_CA=$origin_ca ORIGIN_TLS_PORT=$tport "$here/run_sandgate.sh" $port >"$d/sandgate.log" 2>&1 </dev/null &
spid=$!
for i in $(seq 1 100); do port_open $tport && port_open $port && break; sleep 0.1; done
sg_ca=$("$here/run_sandgate.sh" --ca) || exit 2
auth=$(printf bench:bench | base64)

# The same checks as the harness's: sandgate's CA verifies what the client gets, the origin's
# CA does not (so sandgate minted the leaf); DIRECT works by name.
c_dir=$(curl -s -o /dev/null -m 5 -w '%{http_code}' --cacert "$origin_ca" https://$name:$tport/small)
c_sg=$(curl -s -o /dev/null -m 10 -w '%{http_code}' --proxy-user bench:bench --cacert "$sg_ca" -x http://127.0.0.1:$port https://$name:$tport/small)
c_or=$(curl -s -o /dev/null -m 10 -w '%{http_code}' --proxy-user bench:bench --cacert "$origin_ca" -x http://127.0.0.1:$port https://$name:$tport/small)
log "checks: DIRECT $c_dir, sandgate with its CA $c_sg, with the origin CA $c_or (want 200 200 000)"
[ "$c_dir" = 200 ] && [ "$c_sg" = 200 ] && [ "$c_or" = 000 ] || { log "check FAILED (see $d/)"; exit 2; }

{
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc=$(nproc)"
    echo "reps=$reps"; echo "scenarios=S5,S6"
    echo "s5_duration=$s5_dur"; echo "s5_conns=$s5_conns"; echo "s6_duration=$s6_dur"; echo "s6_concurrency=$s6_conc"
    echo "tls_key=$key"
    echo "s56_origin=$name:$tport (127.0.0.1), leaf $key signed by $(basename "$origin_ca")"
    echo "target.direct=direct|DIRECT (no proxy), by name $name|1|n/a|"
    echo "target.sandgate=proxy|sandgate (contender), CONNECT $name:$tport|1|-|"
    echo "s56.direct=direct|$origin_ca|1|"
    echo "s56.sandgate=intercept|$sg_ca|1|by name: CONNECT $name:$tport"
    echo "sandgate_commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
    echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$d/meta.txt"

delta() { # SNAP0 SNAP1 -> "proxy_cpu=.. origin_cpu=.. sys_cores=.." (as the harness computes it)
    awk -v a="$1" -v b="$2" -v ncpu="$(nproc)" 'BEGIN {
        n = split(a, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "="); A[kv[1]] = kv[2] }
        n = split(b, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "="); B[kv[1]] = kv[2] }
        tot = B["total"] - A["total"]
        printf "proxy_cpu=%.2f origin_cpu=%.2f sys_cores=%.2f", B["proxy"] - A["proxy"], B["origin"] - A["origin"], (tot > 0 ? (B["busy"] - A["busy"]) / tot * ncpu : 0) }'
}
# one SCEN TARGET REP MODE CONNS DURATION: one tlsbench run, recorded as the harness records it
one() {
    local scen=$1 t=$2 rep=$3 mode=$4 c=$5 dur=$6 f=$d/tmp.out args ca pid rc
    if [ "$t" = direct ]; then args=(--raw --proxy 127.0.0.1:$tport); ca=$origin_ca; pid=0
    else args=(--proxy 127.0.0.1:$port --proxy-auth "$auth"); ca=$sg_ca; pid=$spid; fi
    timeout $((dur + 150)) prlimit --as=$mem_limit "$tlsb" "${args[@]}" --target $name:$tport \
        --cafile "$ca" --mode "$mode" --concurrency "$c" --duration "$dur" --timeout 10 --setup-timeout 60 \
        --snap-cmd "$pstat snap proxy=$pid origin=$opid" >"$f" 2>&1; rc=$?
    [ "$rep" = warm ] && return 0
    cp "$f" "$d/tls/$scen-c$c-$t-$rep.txt"
    local s0 s1 res kv
    s0=$(sed -n 's/^SNAP0 //p' "$f"); s1=$(sed -n 's/^SNAP1 //p' "$f"); res=$(grep '^mode=' "$f" | tail -1)
    if [ -z "$s1" ] || [[ "$res" != *" ok="* ]]; then
        printf '%s\t%s\t%s\t%s\t%s\n' "$scen" "c$c" "$t" "$rep" "rate=0 ok=0 errors=1 failed=1 rc=$rc" >>"$raw"
        log "$t: $scen c$c rep $rep FAILED (rc $rc): $(tail -1 "$f" | cut -c1-300)"
        return 0
    fi
    kv=$(tr ' ' '\n' <<<"$res" | awk -F= '
        $1=="rate"||$1=="ok"||$1=="errors"||$1=="setup_errors"||$1 ~ /^err_/||$1=="handshakes"||$1=="resumed"||$1=="reconnects"||$1=="hs_mean_us"||$1=="setup_s"||$1=="tls"||$1=="cipher"||$1=="leaf_key"||$1=="leaf_issuer"||$1=="first_error" {printf "%s ", $0}
        $1=="p50_us"{printf "p50_ms=%.3f ", $2/1000} $1=="p99_us"{printf "p99_ms=%.3f ", $2/1000}
        $1=="cpu_user"{u=$2} $1=="cpu_sys"{s=$2} $1=="duration"{dd=$2}
        END {printf "client_cpu=%.3f wall=%s", u+s, dd}')
    printf '%s\t%s\t%s\t%s\t%s\n' "$scen" "c$c" "$t" "$rep" "$kv rc=$rc $(delta "$s0" "$s1")" >>"$raw"
    log "$t: $scen c$c rep $rep: $(grep -o 'rate=[0-9.]*' <<<"$kv" | head -1) $(grep -o ' errors=[0-9]*' <<<" $kv" | head -1) (load $(cut -d' ' -f1 /proc/loadavg))"
}

log "S5 c{$s5_conns} ${s5_dur}s, S6 c$s6_conc ${s6_dur}s, $reps reps, DIRECT and sandgate by name $name:$tport"
for t in direct sandgate; do one S5 $t warm ka 16 1; done
for rep in $(seq 1 "$reps"); do
    for c in $s5_conns; do for t in direct sandgate; do one S5 $t "$rep" ka "$c" "$s5_dur"; done; done
done
for t in direct sandgate; do one S6 $t warm cycle "$s6_conc" 1; done
for rep in $(seq 1 "$reps"); do
    for t in direct sandgate; do one S6 $t "$rep" cycle "$s6_conc" "$s6_dur"; done
done
log "done: $raw"
