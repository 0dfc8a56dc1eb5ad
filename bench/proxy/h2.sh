#!/usr/bin/env bash
# bench/proxy/h2.sh - intercepted HTTP/2 against the same origin directly (issue 40): h2load
# (nghttp2-client) loads nghttpd over TLS, once directly and once the way a sandbox wired by
# sandgate-launch reaches it: its connection redirected by nftables to sandgate's transparent
# listener, which intercepts it (a leaf under its own CA, HTTP/2 on both legs) and forwards
# each stream to the origin.
#
#   bench/proxy/h2.sh                          # build/release, 3 reps of 5 s per point
#   bench/proxy/h2.sh --reps 5 --seconds 8 --points 1x1,10x10
#   bench/proxy/h2.sh --bin before=/tmp/sg-old --bin after=build/release/src/app/sandgate
#   bench/proxy/h2.sh --perf 10x10             # also: perf record sandgate at that point
#   bench/proxy/h2.sh --trace 1x1              # also: system calls and context switches per
#                                              # request of sandgate and the origin there
#   bench/proxy/h2.sh --io 50x10               # also: writes and reads per request of sandgate,
#                                              # the origin and h2load there (perf stat, every
#                                              # target)
#   bench/proxy/h2.sh --allocs 10x10           # also: sandgate's heap allocations per request
#                                              # there (alloc_count.c preloaded, counted at exit)
#   bench/proxy/h2.sh --instr 10x10            # also: each binary's user-space instructions
#                                              # per request there (callgrind; load-independent)
#
# Points are CONNECTIONSxSTREAMS (h2load -c, -m); default 1x1,1x10,10x10,50x10,4x100. Each rep
# measures every target at every point, the targets in an order that rotates with the rep. The
# origin serves a 1 KiB file. Per target and point: requests/s, mean latency (h2load's "time
# for request"), sandgate's CPU per request (user + system, all threads, /proc) and the
# origin's and h2load's; ratios to direct in the same rep, medians over the reps. Runs in a
# network namespace of its own (loopback only), removed when done. Needs root, ip, nft, nghttpd,
# h2load, openssl, /usr/bin/time.
# Environment: H2_AUDIT (the daemons' audit log; "off" for none), H2_WORKERS (their workers;
# default 0, one per core), H2_PERF_ARGS and H2_PERF_REPORT (perf record's and perf report's
# options for --perf), H2_PERF_DATA (a file to keep --perf's perf.data in), H2_INSTR_REQUESTS
# (--instr's smaller run, default 2000 requests; the larger one is twice that), H2_INSTR_DIR (a
# directory to keep --instr's callgrind outputs in, for callgrind_annotate), H2_PIN (set: the
# load on cores of their own, the way a proxy on its own host sees it: sandgate on CPU 0 with
# one worker unless H2_WORKERS says otherwise, nghttpd and h2load on CPU 1, directly and
# through sandgate alike).
# Exit status: 0 done, 2 setup failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bins=()
reps=3
seconds=5
points=1x1,1x10,10x10,50x10,4x100
perf_point=""
trace_point=""
io_point=""
client_wrap=()
allocs_point=""
instr_point=""

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bins+=("$2"); shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --points) points=$2; shift 2 ;;
        --perf) perf_point=$2; shift 2 ;;
        --trace) trace_point=$2; shift 2 ;;
        --io) io_point=$2; shift 2 ;;
        --allocs) allocs_point=$2; shift 2 ;;
        --instr) instr_point=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "h2.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

fail() { echo "h2.sh: $*" >&2; exit 2; }
[ -x /usr/bin/time ] || fail "/usr/bin/time not found (Debian package time)"
for tool in ip nft nghttpd h2load openssl setpriv; do command -v $tool >/dev/null || fail "$tool not found"; done
# shellcheck source=netns_lib.sh
. "$here/netns_lib.sh"
binaries_of "$root" "${bins[@]}"
IFS=, read -r -a point_list <<<"$points"

enter_netns sgh2

# The origin's CA and its leaf for "localhost" (P-256, as the harness's S5/S6 origin).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=h2-bench-ca \
    -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$work/origin.key" -out "$work/origin.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$work/ext"
openssl x509 -req -in "$work/origin.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
    -days 2 -extfile "$work/ext" -out "$work/origin.pem" 2>/dev/null
mkdir -p "$work/www"
head -c 1024 /dev/zero | tr '\0' x >"$work/www/index.html"
origin_port=18447
pin_proxy=() pin_load=() workers=${H2_WORKERS:-0}
if [ -n "${H2_PIN:-}" ]; then
    pin_proxy=(taskset -c 0) pin_load=(taskset -c 1) workers=${H2_WORKERS:-1}
fi
ip netns exec "$ns" "${pin_load[@]}" nghttpd -d "$work/www" "$origin_port" "$work/origin.key" "$work/origin.pem" \
    </dev/null >"$work/nghttpd.log" 2>&1 &
pid_origin=$!

# Binary i's client runs as uid 64100+i, which the rule for it sends to its transparent
# listener (13310+i).
{
    printf 'table ip sgh2 {\nchain out {\ntype nat hook output priority -100;\n'
    for i in "${!names[@]}"; do
        echo "meta skuid $((64100 + i)) ip daddr 127.0.0.1 tcp dport $origin_port redirect to :$((13310 + i))"
    done
    printf '}\n}\n'
} | ip netns exec "$ns" nft -f -

# start_daemon I LOG [WRAPPER...]: binary i as a daemon on its config (its listeners), under
# WRAPPER when given (a profiler, a preloaded shim), its output in LOG; its pid in pids[I].
start_daemon() {
    local i=$1 log=$2
    shift 2
    ip netns exec "$ns" "${pin_proxy[@]}" "$@" "${paths[$i]}" --config "$work/sandgate-$i.toml" </dev/null >"$log" 2>&1 &
    pids[$i]=$!
}
# as_client UID COMMAND...: COMMAND in the namespace as UID, which decides where nftables sends
# its connections (64100+i: binary i's transparent listener; 0: the origin itself), under
# client_wrap when that is set.
as_client() {
    local uid=$1
    shift
    ip netns exec "$ns" "${client_wrap[@]}" "${pin_load[@]}" setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@"
}

pids=() ports=($origin_port)
for i in "${!names[@]}"; do
    mkdir -p "$work/ca-$i"
    "${paths[$i]}" ca init "$work/ca-$i" >/dev/null 2>&1 || fail "sandgate ca init failed"
    cat >"$work/sandgate-$i.toml" <<EOF
workers = $workers
sandboxes_dir = ""
[listeners]
explicit = ["127.0.0.1:$((13210 + i))"]
transparent = ["127.0.0.1:$((13310 + i))"]
[limits]
max_connections = 20000
max_connections_per_sandbox = 20000
[log]
audit = "${H2_AUDIT:-$work/audit-$i.log}"
[dns.hosts]
"localhost" = ["127.0.0.1"]
[interception]
ca_cert = "$work/ca-$i/ca.pem"
ca_key = "$work/ca-$i/ca.key"
upstream_ca_file = "$work/ca.pem"
[sandboxes.bench]
token = "bench"
sources = ["127.0.0.1"]
ports = [$origin_port]
allow = ["localhost"]
inspect = ["localhost:$origin_port"]
allow_cidrs = ["127.0.0.1/32"]   # localhost resolves to loopback
EOF
    start_daemon "$i" "$work/sandgate-$i.log"
    ports+=($((13310 + i)))
done

for port in "${ports[@]}"; do wait_port "$port"; done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# measure TARGET POINT SECONDS: prints "TARGET POINT requests req_per_s mean_latency_us
# sandgate_cpu_us_per_req origin_cpu_us_per_req client_cpu_us_per_req" (sandgate's is 0 for
# direct; the client's is h2load's, from /usr/bin/time). Every CPU figure includes h2load's
# warm-up second, the same share for all three.
measure() {
    local name=$1 point=$2 dur=$3 uid=0 pid="" i=0
    local c=${point%x*} m=${point#*x}
    if [ "$name" != direct ]; then
        for i in "${!names[@]}"; do [ "$name" = "${names[$i]}" ] && break; done
        uid=$((64100 + i)) pid=${pids[$i]}
    fi
    local s0=0 s1=0 o0 o1 out
    [ -n "$pid" ] && s0=$(cpu_ticks "$pid")
    o0=$(cpu_ticks "$pid_origin")
    out=$(as_client "$uid" /usr/bin/time -f 'h2load-cpu %U %S' h2load -c "$c" -m "$m" -t 1 -D "$dur" --warm-up-time=1 \
        "https://localhost:$origin_port/index.html" 2>&1) || fail "$name $point: h2load failed: $out"
    [ -n "$pid" ] && s1=$(cpu_ticks "$pid")
    o1=$(cpu_ticks "$pid_origin")
    local done_n rps mean client
    client=$(awk '/^h2load-cpu / { print ($2 + $3) * 1e6 }' <<<"$out")
    done_n=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
    rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
    mean=$(awk '/^time for request:/ { v = $6; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
                  print (u == "ms" ? v * 1000 : u == "s" ? v * 1e6 : v) }' <<<"$out")
    [ -n "$done_n" ] && [ "$done_n" -gt 0 ] ||
        fail "$name $point completed nothing: $(grep -E '^(requests|status codes):' <<<"$out"); sandgate's last audit lines: $(tail -n 2 "$work"/audit-*.log)"
    awk -v n="$name" -v p="$point" -v ok="$done_n" -v r="$rps" -v l="$mean" \
        -v s="$((s1 - s0))" -v o="$((o1 - o0))" -v hz="$(getconf CLK_TCK)" -v c="${client:-0}" \
        'BEGIN { printf "%s %s %d %.0f %.0f %.2f %.2f %.2f\n", n, p, ok, r, l, s * 1e6 / hz / ok, o * 1e6 / hz / ok, c / ok }'
}

targets=(direct "${names[@]}")
for t in "${targets[@]}"; do measure "$t" 1x1 1 >/dev/null; done   # each path once before the reps
results=()
for rep in $(seq "$reps"); do
    for point in "${point_list[@]}"; do
        for i in "${!targets[@]}"; do
            t=${targets[$(((i + rep - 1) % ${#targets[@]}))]}
            results+=("$rep $(measure "$t" "$point" "$seconds")")
            echo "h2.sh: rep $rep: ${results[-1]}" >&2
        done
    done
done
if grep -qs SANDBOX_NETWORK_DENIED "$work"/audit-*.log; then
    fail "sandgate refused requests: $(grep -h -m3 SANDBOX_NETWORK_DENIED "$work"/audit-*.log)"
fi

if [ -n "$perf_point" ]; then
    command -v perf >/dev/null || fail "perf not found"
    # shellcheck disable=SC2086 # H2_PERF_ARGS: e.g. "-e syscalls:sys_enter_futex -g"
    perf record ${H2_PERF_ARGS:--F 999 -g} -p "${pids[-1]}" -o "$work/perf.data" -- sleep "$seconds" >/dev/null 2>&1 &
    perf_pid=$!
    measure "${names[-1]}" "$perf_point" "$seconds" >/dev/null
    wait $perf_pid || true
    [ -z "${H2_PERF_DATA:-}" ] || cp "$work/perf.data" "$H2_PERF_DATA"   # to report on it again
    for sort in dso symbol; do
        perf report -i "$work/perf.data" --no-children --sort $sort --stdio ${H2_PERF_REPORT:--g none} 2>/dev/null |
            grep -v '^#' | grep '%' | head -30 | cut -c1-160
    done
fi

if [ -n "$trace_point" ]; then
    command -v strace >/dev/null || fail "strace not found"
    switches() {
        local v=0 t
        for t in /proc/$1/task/*/status; do
            v=$((v + $(awk '/ctxt_switches/ { s += $2 } END { print s }' "$t")))
        done
        echo $v
    }
    for t in direct "${names[-1]}"; do
        sg_pid=${pids[-1]}
        w0=$(switches "$sg_pid") x0=$(switches "$pid_origin")
        line=$(measure "$t" "$trace_point" "$seconds")
        w1=$(switches "$sg_pid") x1=$(switches "$pid_origin")
        n=$(awk '{ print $3 }' <<<"$line")
        awk -v t="$t" -v n="$n" -v s="$((w1 - w0))" -v o="$((x1 - x0))" 'BEGIN {
            printf "%s %s: context switches per request: sandgate %.2f, origin %.2f\n", t, "'"$trace_point"'", s / n, o / n }'
    done
    for who in sandgate origin; do
        [ $who = sandgate ] && tp=${pids[-1]} || tp=$pid_origin
        timeout "$((seconds + 2))" strace -c -f -q -p "$tp" -o "$work/strace-$who.txt" &
        st_pid=$!
        sleep 0.5
        line=$(measure "${names[-1]}" "$trace_point" "$seconds")
        wait $st_pid 2>/dev/null || true
        n=$(awk '{ print $3 }' <<<"$line")
        echo "$who's system calls per request through ${names[-1]} at $trace_point (under strace: rates are not the figures):"
        awk -v n="$n" '$1 ~ /^[0-9.]+$/ && NF >= 5 { printf "  %-16s %8.2f\n", $NF, $4 / n }
                       $1 == "total" { printf "  %-16s %8.2f\n", "total", $3 / n }' "$work/strace-$who.txt" | head -14
    done
fi

if [ -n "$io_point" ]; then
    # Fewer, larger writes are what batching buys: each write is a TLS record and a segment the
    # peer must read. Counted with perf stat on each process (h2load under perf stat itself).
    command -v perf >/dev/null || fail "perf not found"
    io_events=syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read
    io_sum() {  # FILE: "writes reads" summed from perf stat -x, output (0 0 without it)
        awk -F, '$3 ~ /enter_(sendto|write|writev)$/ { w += $1 } $3 ~ /enter_(recvfrom|read)$/ { r += $1 }
                 END { print w + 0, r + 0 }' "$1" 2>/dev/null || echo 0 0
    }
    echo "writes / reads per request at $io_point (perf stat):"
    for t in direct "${names[@]}"; do
        sg_pid=""
        for i in "${!names[@]}"; do [ "$t" = "${names[$i]}" ] && sg_pid=${pids[$i]}; done
        [ -z "$sg_pid" ] || { perf stat -x, -e "$io_events" -p "$sg_pid" -o "$work/io-sg" & }
        ps_sg=$!
        perf stat -x, -e "$io_events" -p "$pid_origin" -o "$work/io-origin" &
        ps_origin=$!
        client_wrap=(perf stat -x, -e "$io_events" -o "$work/io-client" --)
        line=$(measure "$t" "$io_point" "$seconds")
        client_wrap=()
        kill -INT $ps_origin; wait $ps_origin 2>/dev/null || true
        [ -z "$sg_pid" ] || { kill -INT $ps_sg; wait $ps_sg 2>/dev/null || true; }
        n=$(awk '{ print $3 }' <<<"$line")
        # A count perf stat did not write is reported as such, not taken for 0 (nor fatal).
        for f in io-client io-origin ${sg_pid:+io-sg}; do
            [ -s "$work/$f" ] || echo "h2.sh: --io $t: perf stat wrote no $f" >&2
        done
        read -r cw cr < <(io_sum "$work/io-client") || true
        read -r ow or < <(io_sum "$work/io-origin") || true
        sw=0 sr=0
        [ -z "$sg_pid" ] || read -r sw sr < <(io_sum "$work/io-sg") || true
        rm -f "$work/io-client" "$work/io-origin" "$work/io-sg"
        awk -v t="$t" -v n="$n" -v cw="$cw" -v cr="$cr" -v ow="$ow" -v or="$or" -v sw="$sw" -v sr="$sr" 'BEGIN {
            printf "  %-10s client %.2f / %.2f   origin %.2f / %.2f   sandgate %.2f / %.2f\n",
                   t, cw / n, cr / n, ow / n, or / n, sw / n, sr / n }'
    done
fi

if [ -n "$allocs_point" ]; then
    # The last binary again, as a daemon of its own with the shim, on the first one's listener
    # (stopped meanwhile): once serving nothing, once under load; the difference per request.
    gcc -O2 -shared -fPIC -o "$work/alloc_count.so" "$here/alloc_count.c" || fail "cannot build alloc_count.so"
    kill -TERM "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    last=$((${#names[@]} - 1))
    counted_run() {
        start_daemon "$last" "$work/alloc-daemon.log" \
            env LD_PRELOAD="$work/alloc_count.so" ALLOC_COUNT_FILE="$work/allocs-$1"
        wait_port $((13310 + last))
        local n=0
        [ "$1" = idle ] || n=$(measure "${names[$last]}" "$allocs_point" "$seconds" | awk '{ print $3 }')
        kill -TERM "${pids[$last]}"; wait "${pids[$last]}" 2>/dev/null || true
        echo "$n $(head -1 "$work/allocs-$1")"
    }
    read -r _ idle < <(counted_run idle)
    read -r n loaded < <(counted_run loaded)
    awk -v n="$n" -v a="$idle" -v b="$loaded" -v p="$allocs_point" 'BEGIN {
        printf "sandgate heap allocations per request at %s: %.1f (%d requests)\n", p, (b - a) / n, n }'
    # Asio's recycling allocator missing its cache, by frame size (at least 0.1 per request).
    awk -v n="$n" '$1 == "aligned" && $3 / n >= 0.1 { printf "  aligned %6d bytes: %.2f per request\n", $2, $3 / n }' \
        "$work/allocs-loaded"
fi

if [ -n "$instr_point" ]; then
    # Instructions do not depend on what else the machine runs, so small changes show that the
    # CPU figures' noise hides. Each binary again, as a daemon of its own under callgrind on its
    # listener (the measured one stopped), twice: loaded with N and with 2N requests by h2load,
    # counted at exit; the difference per request, so start-up, shutdown and the first
    # connections cancel. Kernel time is not in it.
    command -v valgrind >/dev/null || fail "valgrind not found"
    n1=${H2_INSTR_REQUESTS:-2000}
    echo "user-space instructions per request at $instr_point (callgrind, $n1 and $((2 * n1)) requests):"
    for i in "${!names[@]}"; do
        kill -TERM "${pids[$i]}" 2>/dev/null || true   # --allocs may have stopped it already
        wait "${pids[$i]}" 2>/dev/null || true
        ir=()  # the totals of the N run, then of the 2N run
        for n in $n1 $((2 * n1)); do
            start_daemon "$i" "$work/callgrind-$i-$n.log" \
                valgrind --tool=callgrind --callgrind-out-file="$work/callgrind-$i-$n"
            wait_port $((13310 + i)) 600
            out=$(as_client $((64100 + i)) h2load -c "${instr_point%x*}" -m "${instr_point#*x}" -t 1 -n "$n" \
                "https://localhost:$origin_port/index.html" 2>&1) || fail "--instr ${names[$i]}: h2load failed: $out"
            grep -q "^requests: .* $n succeeded" <<<"$out" ||
                fail "--instr ${names[$i]}: not every request succeeded: $(grep '^requests:' <<<"$out")"
            kill -TERM "${pids[$i]}"; wait "${pids[$i]}" 2>/dev/null || true
            ir+=("$(awk '/^(summary|totals):/ { print $2; exit }' "$work/callgrind-$i-$n")")
            [ -n "${ir[-1]}" ] || fail "--instr ${names[$i]}: no totals from callgrind ($work/callgrind-$i-$n.log)"
            [ -z "${H2_INSTR_DIR:-}" ] || cp "$work/callgrind-$i-$n" "$H2_INSTR_DIR/${names[$i]}-$instr_point-$n.callgrind"
        done
        awk -v t="${names[$i]}" -v a="${ir[0]}" -v b="${ir[1]}" -v n="$n1" \
            'BEGIN { printf "  %-10s %.0f\n", t, (b - a) / n }'
    done
fi

# Per target and point: medians over the reps of requests/s, mean latency, CPU per request,
# and of each rep's ratios to direct at the same point.
printf '%s\n' "${results[@]}" | awk '
    { rep = $1; nm = $2; pt = $3; k = nm SUBSEP pt
      rps[k, rep] = $5; lat[k, rep] = $6; scpu[k, rep] = $7; ocpu[k, rep] = $8; ccpu[k, rep] = $9
      if (!(nm in seen)) { seen[nm] = 1; names[++n] = nm }
      if (!(pt in pseen)) { pseen[pt] = 1; pts[++np] = pt }
      if (rep > reps) reps = rep }
    function median(a, k,   i, j, t, v) {
        for (i = 1; i <= reps; i++) v[i] = a[k, i] + 0
        for (i = 1; i <= reps; i++) for (j = i + 1; j <= reps; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return reps % 2 ? v[(reps + 1) / 2] : (v[reps / 2] + v[reps / 2 + 1]) / 2
    }
    END {
        printf "%-10s %-7s %9s %8s %10s %8s %12s %12s %10s %12s\n", "target", "point", "req/s", "x direct",
               "mean us", "x direct", "sg us/req", "origin us/req", "sg/origin", "client us/req"
        for (p = 1; p <= np; p++) for (i = 1; i <= n; i++) {
            nm = names[i]; pt = pts[p]; k = nm SUBSEP pt; d = "direct" SUBSEP pt
            for (r = 1; r <= reps; r++) {
                rr[k, r] = rps[k, r] / rps[d, r]; lr[k, r] = lat[k, r] / lat[d, r]
                cr[k, r] = ocpu[d, r] > 0 ? scpu[k, r] / ocpu[d, r] : 0
            }
            printf "%-10s %-7s %9.0f %8.2f %10.0f %8.2f %12.2f %12.2f %10.2f %12.2f\n", nm, pt, median(rps, k),
                   median(rr, k), median(lat, k), median(lr, k), median(scpu, k), median(ocpu, k),
                   nm == "direct" ? 0 : median(cr, k), median(ccpu, k)
        }
    }'
