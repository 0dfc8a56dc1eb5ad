#!/usr/bin/env bash
# bench/proxy/l4.sh - S3 like for like: proxy CPU per tunnel of haproxy's L4 relay, of
# sandgate's transparent listener (the way a sandbox wired by sandgate-launch reaches it: no
# CONNECT) and of sandgate's CONNECT, side by side (bench/README.md, "S3 without the CONNECT").
#
#   bench/proxy/l4.sh                                  # build/release, 3 reps of 8 s
#   bench/proxy/l4.sh --bin /tmp/sg-old --reps 5 --seconds 10 --conc 64
#   bench/proxy/l4.sh --bin before=/tmp/sg-old --bin after=build/release/src/app/sandgate
#   bench/proxy/l4.sh --tls                            # HTTPS tunnels instead (below)
#   bench/proxy/l4.sh --other-port                     # the origin on the harness's ports
#
# The harness's S3 compares sandgate's CONNECT with haproxy's L4 relay, to which the client
# sends no CONNECT at all. Here they all run at once on loopback, in a network namespace of
# the script's own, beside the harness's nginx origin, and tunnelbench (from a harness run)
# loads one at a time (--conc tunnels at once, 64 unless told; each a GET of /small, closed):
#   haproxy      tunnelbench --raw to haproxy's L4 relay (the harness's `listen l4_http`), which
#                dials the origin
#   transparent  tunnelbench --raw to the origin itself, as a uid of its own; an nftables rule
#                for that uid redirects it to sandgate's transparent listener, which knows the
#                sandbox by its source address, takes the connection as HTTP (the port's first
#                bytes), decides each request on its Host and forwards it
#   connect      tunnelbench with CONNECT to sandgate's explicit listener (the harness's S3)
# With --tls every tunnel carries HTTPS, as nearly all of a sandbox's do: tlsbench --mode cycle
# (a full TLS handshake with the harness's S5/S6 origin, one GET, the close; from a harness run
# with --intercept) through haproxy's relay (`listen l4_https`), sandgate's transparent listener
# (which reads the ClientHello, decides on its name and relays) and its CONNECT. Nothing is
# intercepted: every target relays bytes. Plain HTTP, by contrast, is forwarded request by
# request by the transparent listener (parsed, decided on each Host, written again), which is
# more than a relay does.
# The origin (the harness's nginx, its configuration copied) listens on ports 80 and 443 in
# the namespace, the ports a sandbox's web traffic goes to, where the transparent listener
# waits for the client's first bytes. --other-port keeps the harness's 18080 and 18446, a port
# where the transparent listener lets the server speak first if the client is silent for
# `peek_timeout_ms` (a timer raced against the first bytes, for every connection).
# Each --bin NAME=PATH (or PATH, named sandgate) runs as a daemon of its own, and adds the
# targets NAME-transparent and NAME-connect (one binary: transparent and connect), so binaries
# are compared in one run, against the same haproxy. Each rep measures every target one after
# the other, in an order that rotates with the rep.
# Proxy CPU is the target's user + system time from /proc (all its threads) over the tunnels
# tunnelbench completed; a second table splits it into user and system time and adds the
# context switches of all its threads, per tunnel. The nat rule makes conntrack follow every
# connection of the namespace, for all targets alike. Removes its namespace when done; nothing leaves it. Needs
# root, ip, nft, haproxy, nginx.
# Exit status: 0 done, 2 setup failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
run=${PEERS_RUN_DIR:-/tmp/peers-run-sandgate}
bins=()
reps=3
seconds=8
conc=64
tls=0
web=1

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bins+=("$2"); shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --conc) conc=$2; shift 2 ;;
        --tls) tls=1; shift ;;
        --other-port) web=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "l4.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

fail() { echo "l4.sh: $*" >&2; exit 2; }
for tool in ip nft haproxy nginx; do command -v $tool >/dev/null || fail "$tool not found"; done
# shellcheck source=netns_lib.sh
. "$here/netns_lib.sh"
binaries_of "$root" "${bins[@]}"
[ -f "$run/nginx/nginx.conf" ] && [ -x "$run/bin/tunnelbench" ] ||
    fail "no harness run in $run (run bench/proxy/run.sh once, or set PEERS_RUN_DIR)"
# The origin port each client dials (the nat rule's), haproxy's relay to it, and the client.
http_port=18080 https_port=18446
[ $web = 1 ] && http_port=80 https_port=443
origin_port=$http_port relay_port=18081 client=("$run/bin/tunnelbench")
if [ $tls = 1 ]; then
    [ -x "$run/bin/tlsbench" ] && [ -f "$run/tls/s56-ca-ec256.crt" ] ||
        fail "no tlsbench or S5/S6 origin in $run (run bench/proxy/run.sh --intercept once)"
    origin_port=$https_port relay_port=18447
    client=("$run/bin/tlsbench" --mode cycle --cafile "$run/tls/s56-ca-ec256.crt")
fi

enter_netns sgl4
# Binary i's transparent client runs as uid 64000+i, which the rule for it sends to its
# listener (13300+i); its explicit listener is 13200+i.
{
    printf 'table ip sgl4 {\nchain out {\ntype nat hook output priority -100;\n'
    for i in "${!names[@]}"; do
        echo "meta skuid $((64000 + i)) ip daddr 127.0.0.1 tcp dport $origin_port redirect to :$((13300 + i))"
    done
    printf '}\n}\n'
} | ip netns exec "$ns" nft -f -

mkdir -p "$run/nginx/tmp"
sed -e "s|^pid .*|pid $work/nginx.pid;|" -e "s|127.0.0.1:18080 |127.0.0.1:$http_port |" \
    -e "s|127.0.0.1:18446 |127.0.0.1:$https_port |" "$run/nginx/nginx.conf" >"$work/nginx.conf"
ip netns exec "$ns" nginx -c "$work/nginx.conf" -p "$run/nginx/" </dev/null >"$work/nginx.log" 2>&1 &

# The harness's haproxy L4 relay (its conf/haproxy.cfg's `listen l4_http`, or `l4_https`).
cat >"$work/haproxy.cfg" <<EOF
global
    maxconn 9000
    log stdout format raw local0
defaults
    log global
    maxconn 9000
    timeout connect 5s
    timeout client 600s
    timeout server 600s
listen l4
    mode tcp
    option tcplog
    bind 127.0.0.1:$relay_port backlog 4096
    server origin 127.0.0.1:$origin_port
EOF
ip netns exec "$ns" haproxy -f "$work/haproxy.cfg" </dev/null >"$work/haproxy.log" 2>&1 &
pid_haproxy=$!   # `ip netns exec` execs the command: the same process

# config/bench.toml's S1-S4 part, with a transparent listener and the client's address.
pids=() ports=($origin_port $relay_port)
for i in "${!names[@]}"; do
cat >"$work/sandgate-$i.toml" <<EOF
workers = 0
sandboxes_dir = ""
[listeners]
explicit = ["127.0.0.1:$((13200 + i))"]
transparent = ["127.0.0.1:$((13300 + i))"]
[limits]
max_connections = 20000
max_connections_per_sandbox = 20000
max_unauthenticated_per_source = 1024
[log]
audit = "$work/audit-$i.log"
[sandboxes.bench]
token = "bench"
sources = ["127.0.0.1"]
ports = [$origin_port]
allow_cidrs = ["127.0.0.1/32"]
EOF
ip netns exec "$ns" "${paths[$i]}" --config "$work/sandgate-$i.toml" </dev/null >"$work/sandgate-$i.log" 2>&1 &
pids+=($!)
ports+=($((13200 + i)) $((13300 + i)))
done

for port in "${ports[@]}"; do wait_port $port; done
for pid in $pid_haproxy "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || fail "a target did not start ($(cat "$work"/*.log))"
done

# "user_ticks system_ticks voluntary_switches involuntary_switches" of a process, all threads.
usage_of() {
    local v=0 iv=0 t a b
    for t in /proc/$1/task/*/status; do
        read -r a b < <(awk '/^voluntary_ctxt/ { v = $2 } /^nonvoluntary_ctxt/ { iv = $2 } END { print v, iv }' "$t")
        v=$((v + a)) iv=$((iv + b))
    done
    echo "$(awk '{ print $14, $15 }' "/proc/$1/stat") $v $iv"
}
auth=$(printf bench:bench | base64)
# measure TARGET SECONDS: one load on one target (haproxy, or [NAME-]transparent|connect);
# prints "TARGET ok cpu_us_per_tunnel rate p99_us user_us sys_us vcsw ivcsw" (per tunnel).
measure() {
    local name=$1 dur=$2 pid uid=0 args i=0
    case $name in
        *transparent|*connect)
            [ ${#names[@]} = 1 ] || for i in "${!names[@]}"; do [ "${name%-*}" = "${names[$i]}" ] && break; done
            pid=${pids[$i]} ;;
    esac
    case $name in
        haproxy) pid=$pid_haproxy args=(--raw --proxy 127.0.0.1:$relay_port) ;;
        *transparent) uid=$((64000 + i)) args=(--raw --proxy 127.0.0.1:$origin_port) ;;
        *connect) args=(--proxy 127.0.0.1:$((13200 + i)) --proxy-auth "$auth") ;;
    esac
    local u0 u1 out ok rate p99
    read -r -a u0 < <(usage_of "$pid")
    out=$(ip netns exec "$ns" setpriv --reuid=$uid --regid=$uid --clear-groups -- "${client[@]}" "${args[@]}" \
        --target 127.0.0.1:$origin_port --concurrency "$conc" --duration "$dur" 2>&1) ||
        fail "$name: ${client[0]##*/} failed: $out"
    read -r -a u1 < <(usage_of "$pid")
    ok=$(grep -o 'ok=[0-9]*' <<<"$out" | cut -d= -f2)
    rate=$(grep -o 'rate=[0-9.]*' <<<"$out" | cut -d= -f2)
    p99=$(grep -o 'p99_us=[0-9]*' <<<"$out" | cut -d= -f2)
    [ -n "$ok" ] && [ "$ok" -gt 0 ] || fail "$name completed nothing: $out"
    grep -q 'err_[a-z_]*=[1-9]\| errors=[1-9]' <<<"$out" && echo "l4.sh: $name had errors: $out" >&2
    awk -v n="$name" -v ok="$ok" -v u="$((u1[0] - u0[0]))" -v s="$((u1[1] - u0[1]))" \
        -v v="$((u1[2] - u0[2]))" -v iv="$((u1[3] - u0[3]))" -v hz="$(getconf CLK_TCK)" -v r="$rate" -v p="$p99" \
        'BEGIN { printf "%s %d %.1f %.0f %s %.1f %.1f %.3f %.3f\n", n, ok, (u + s) * 1e6 / hz / ok, r, p,
                 u * 1e6 / hz / ok, s * 1e6 / hz / ok, v / ok, iv / ok }'
}

targets=(haproxy)
if [ ${#names[@]} = 1 ]; then
    targets+=(transparent connect)
else
    for n in "${names[@]}"; do targets+=("$n-transparent" "$n-connect"); done
fi
for t in "${targets[@]}"; do measure "$t" 1 >/dev/null; done   # each path once before the reps
results=()
for rep in $(seq "$reps"); do
    for i in "${!targets[@]}"; do
        t=${targets[$(((i + rep - 1) % ${#targets[@]}))]}
        results+=("$rep $(measure "$t" "$seconds")")
        echo "l4.sh: rep $rep: ${results[-1]}" >&2
    done
done
if grep -q SANDBOX_NETWORK_DENIED "$work"/audit-*.log; then
    fail "sandgate refused tunnels: $(grep -h -m3 SANDBOX_NETWORK_DENIED "$work"/audit-*.log)"
fi

# Per target: median proxy CPU per tunnel (each rep's in brackets), the median over reps of
# its ratio to haproxy's in the same rep, median tunnels/s and p99 latency.
printf '%s\n' "${results[@]}" | awk '
    { rep = $1; nm = $2; cpu[nm, rep] = $4; rate[nm, rep] = $5; p99[nm, rep] = $6
      user[nm, rep] = $7; sys[nm, rep] = $8; vcsw[nm, rep] = $9; ivcsw[nm, rep] = $10
      if (!(nm in seen)) { seen[nm] = 1; names[++n] = nm }
      if (rep > reps) reps = rep }
    function median(a, nm,   i, j, t, v) {
        for (i = 1; i <= reps; i++) v[i] = a[nm, i] + 0
        for (i = 1; i <= reps; i++) for (j = i + 1; j <= reps; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return reps % 2 ? v[(reps + 1) / 2] : (v[reps / 2] + v[reps / 2 + 1]) / 2
    }
    END {
        printf "%-20s %30s %10s %10s %8s\n", "target", "proxy CPU us/tunnel (reps)", "x haproxy", "tunnels/s", "p99 us"
        for (i = 1; i <= n; i++) {
            nm = names[i]; line = ""
            for (r = 1; r <= reps; r++) {
                line = line sprintf("%s%.0f", r > 1 ? "," : "", cpu[nm, r])
                ratio[nm, r] = cpu[nm, r] / cpu["haproxy", r]
            }
            printf "%-20s %8.1f %21s %10.2f %10.0f %8.0f\n", nm, median(cpu, nm), "(" line ")",
                median(ratio, nm), median(rate, nm), median(p99, nm)
        }
        printf "\n%-20s %10s %10s %12s %12s\n", "per tunnel, medians", "user us", "system us", "vol. csw", "invol. csw"
        for (i = 1; i <= n; i++) {
            nm = names[i]
            printf "%-20s %10.1f %10.1f %12.3f %12.3f\n", nm, median(user, nm), median(sys, nm),
                median(vcsw, nm), median(ivcsw, nm)
        }
    }'
