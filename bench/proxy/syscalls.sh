#!/usr/bin/env bash
# bench/proxy/syscalls.sh - system calls per S2 request and per S3 tunnel under the harness's
# load, for sandgate binaries and haproxy side by side (bench/README.md, "System calls under
# load"). percall.py counts one operation at a time; this counts what a loaded daemon does.
#
#   bench/proxy/syscalls.sh                                  # build/release and haproxy
#   bench/proxy/syscalls.sh --bin before=OLD --bin after=NEW --seconds 6
#   bench/proxy/syscalls.sh --no-haproxy --scenarios S3
#
# Uses what a harness run (bench/proxy/run.sh) left in $PEERS_RUN_DIR (/tmp/peers-run-sandgate):
# its nginx origin, its haproxy configuration and tunnelbench. Targets run one at a time, each
# alone with the origin: `perf stat` on the proxy's process (every system call, the common ones
# by name, and the reads that failed) while wrk (S2: -t2, absolute-form GET /small with
# abs.lua) or tunnelbench (S3: connect, CONNECT, GET /small, close; haproxy's L4 relay gets no
# CONNECT) runs with --conc connections; each count is divided by the requests or tunnels done.
# Loopback only. Exit status: 0 done, 2 setup failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
peers_dir=${PEERS_DIR:-$root/bench/peers}
run=${PEERS_RUN_DIR:-/tmp/peers-run-sandgate}
seconds=6
conc=64
scenarios=S2,S3
haproxy=1
bins=()

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bins+=("$2"); shift 2 ;;
        --no-haproxy) haproxy=0; shift ;;
        --seconds) seconds=$2; shift 2 ;;
        --conc) conc=$2; shift 2 ;;
        --scenarios) scenarios=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "syscalls.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#bins[@]} -gt 0 ] || bins=("sandgate=$root/build/release/src/app/sandgate")

fail() { echo "syscalls.sh: $*" >&2; exit 2; }
for tool in perf wrk nginx; do command -v $tool >/dev/null || fail "$tool not found"; done
[ -f "$run/nginx/nginx.conf" ] && [ -x "$run/bin/tunnelbench" ] ||
    fail "no harness run in $run (run bench/proxy/run.sh once, or set PEERS_RUN_DIR)"
if [ "$haproxy" = 1 ]; then
    command -v haproxy >/dev/null || fail "haproxy not found (or --no-haproxy)"
    [ -f "$run/haproxy/haproxy.cfg" ] || fail "no $run/haproxy/haproxy.cfg"
fi
auth=$(printf bench:bench | base64)
calls=(recvfrom sendmsg sendto writev write read epoll_wait epoll_ctl accept accept4 socket
       connect shutdown close ioctl fcntl getsockopt setsockopt futex timerfd_settime getpid)
events="raw_syscalls:sys_enter$(printf ',syscalls:sys_enter_%s' "${calls[@]}")"

work=$(mktemp -d /tmp/sg-syscalls.XXXXXX)
pids=()
stop_all() {
    for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
    pids=()
    sleep 0.3
}
trap 'stop_all; rm -rf "$work"' EXIT
stop_last() {  # the target started last (its own session, so its whole group)
    kill -- "-${pids[-1]}" 2>/dev/null || true
    unset 'pids[-1]'
    sleep 0.3
}

wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    fail "nothing listens on 127.0.0.1:$1"
}

# count PID SCENARIO PORT RAW(0|1): prints "ops name=per-op ..." for one load.
count() {
    local pid=$1 scen=$2 port=$3 raw=$4 out=$work/perf.txt ops
    perf stat -x, -e "$events" -e syscalls:sys_exit_recvfrom --filter 'ret < 0' \
        -p "$pid" -o "$out" -- sleep "$seconds" &
    local perf_pid=$!
    sleep 0.2
    if [ "$scen" = S2 ]; then
        local url=http://127.0.0.1:$port
        [ "$raw" = 1 ] && auth_b64= || auth_b64=$auth
        ABS_URL=http://127.0.0.1:18080/small PROXY_AUTH_B64=$auth_b64 \
            wrk -t2 -c"$conc" -d"$((seconds - 1))s" -s "$peers_dir/tools/abs.lua" "$url" >"$work/load.txt"
        ops=$(awk '/requests in/ { print $1 }' "$work/load.txt")
    else
        local mode=(--target 127.0.0.1:18080 --proxy-auth "$auth")
        [ "$raw" = 1 ] && mode=(--raw)
        "$run/bin/tunnelbench" --proxy "127.0.0.1:$port" "${mode[@]}" --concurrency "$conc" \
            --duration "$((seconds - 1))" >"$work/load.txt" 2>&1
        ops=$(grep -o 'ok=[0-9]*' "$work/load.txt" | cut -d= -f2)
    fi
    wait "$perf_pid"
    [ -n "$ops" ] && [ "$ops" -gt 0 ] || fail "$scen through port $port completed nothing: $(cat "$work/load.txt")"
    awk -F, -v ops="$ops" '
        $3 == "raw_syscalls:sys_enter" { all = $1 }
        $3 ~ /^syscalls:sys_enter_/ { sub("syscalls:sys_enter_", "", $3); n[$3] = $1 }
        $3 == "syscalls:sys_exit_recvfrom" { failed = $1 }
        END {
            printf "%d all=%.2f", ops, all / ops
            for (k in n) if (n[k] > 0) printf " %s=%.2f", k, n[k] / ops
            printf " recvfrom_failed=%.2f\n", failed / ops
        }' "$out"
}

mkdir -p "$run/nginx/tmp"
setsid nginx -c "$run/nginx/nginx.conf" -p "$run/nginx/" </dev/null >"$work/nginx.log" 2>&1 &
pids+=($!)
wait_port 18080

results=()
measure() {  # NAME PID S2PORT S3PORT S3RAW
    local name=$1 pid=$2 s2=$3 s3=$4 raw=$5 scen
    for scen in ${scenarios//,/ }; do
        local port=$s2 r=0
        [ "$scen" = S3 ] && { port=$s3; r=$raw; }
        results+=("$name $scen $(count "$pid" "$scen" "$port" "$r")")
        echo "syscalls.sh: $name $scen done" >&2
    done
}

if [ "$haproxy" = 1 ]; then
    setsid haproxy -f "$run/haproxy/haproxy.cfg" </dev/null >"$work/haproxy.log" 2>&1 &
    pids+=($!)
    wait_port 13129
    measure haproxy "$(pgrep -n -x haproxy)" 13129 18081 1
    stop_last
fi
port=13290
for spec in "${bins[@]}"; do
    name=${spec%%=*} bin=${spec#*=}
    [ -x "$bin" ] || fail "no binary at $bin"
    SANDGATE_BIN=$bin setsid "$here/run_sandgate.sh" "$port" </dev/null >"$work/$name.log" 2>&1 &
    pids+=($!)
    wait_port "$port"
    measure "$name" "$(pgrep -n -f "^$bin --config")" "$port" "$port" 0
    stop_last
    port=$((port + 1))
done

# One column per target and scenario, one row per system call (per request or per tunnel).
printf '%s\n' "${results[@]}" | awk -v order="all ${calls[*]/recvfrom/recvfrom recvfrom_failed}" '
    { col = $1 " " $2; cols[++nc] = col; ops[col] = $3
      for (i = 4; i <= NF; i++) { split($i, kv, "="); v[col, kv[1]] = kv[2]; seen[kv[1]] = 1 } }
    END {
        printf "%-16s", "per operation"; for (c = 1; c <= nc; c++) printf " %14s", cols[c]; print ""
        printf "%-16s", "operations"; for (c = 1; c <= nc; c++) printf " %14s", ops[cols[c]]; print ""
        n = split(order, names, " ")
        for (i = 1; i <= n; i++) {
            k = names[i]
            if (!(k in seen)) continue
            printf "%-16s", k
            for (c = 1; c <= nc; c++) printf " %14s", ((cols[c], k) in v) ? v[cols[c], k] : "-"
            print ""
        }
    }'
