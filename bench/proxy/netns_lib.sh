# bench/proxy/netns_lib.sh - what the benchmarks that run in a network namespace of their own
# share (l4.sh, h2.sh), sourced after `fail` is defined:
#   binaries_of ROOT BIN...   --bin values (NAME=PATH, or PATH named sandgate; none: ROOT's
#                             release build) into the arrays `names` and `paths`, each checked
#   enter_netns PREFIX        a namespace PREFIX-PID with loopback up and TIME_WAIT ports
#                             reused (a rep opens tens of thousands of connections), and a
#                             scratch directory `work`; both removed at exit, with what runs
#                             in the namespace
#   wait_port PORT            until something listens on 127.0.0.1:PORT in it (else fail, with
#                             the logs in `work`)

binaries_of() {
    local root=$1 b
    shift
    names=() paths=()
    [ $# -gt 0 ] || set -- "sandgate=$root/build/release/src/app/sandgate"
    for b in "$@"; do
        case $b in *=*) names+=("${b%%=*}") paths+=("${b#*=}") ;; *) names+=(sandgate) paths+=("$b") ;; esac
        [ -x "${paths[-1]}" ] || fail "no binary at ${paths[-1]}"
    done
    [ "$(printf '%s\n' "${names[@]}" | sort -u | wc -l)" = ${#names[@]} ] || fail "two --bin have one name"
}

enter_netns() {
    ns=$1-$$
    work=$(mktemp -d "/tmp/$1.XXXXXX")
    trap netns_cleanup EXIT
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_tw_reuse=1 net.ipv4.ip_local_port_range="10000 65000"
}

netns_cleanup() {
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    sleep 0.3
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}

wait_port() {  # PORT [TRIES]: tries every 0.1 s, 100 times unless told
    for _ in $(seq "${2:-100}"); do
        ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "nothing listens on 127.0.0.1:$1 ($(cat "$work"/*.log))"
}
