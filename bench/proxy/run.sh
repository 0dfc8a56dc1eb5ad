#!/usr/bin/env bash
# bench/proxy/run.sh - sandgate against a direct connection and peer proxies, one command.
#
#   bench/proxy/run.sh                 # build Release, full run vs squid + haproxy (~8 min)
#   bench/proxy/run.sh --quick         # smoke test (~2 min, 1 rep, short durations)
#   bench/proxy/run.sh --peers all     # squid tinyproxy haproxy socat srt (~20 min)
#   bench/proxy/run.sh --spec          # spec durations (S2 15 s, S3 20 s), no shrinking
#   bench/proxy/run.sh -- --scenarios S2,S3 --reps 1    # anything after -- goes to the harness
#   bench/proxy/run.sh --netns         # run everything in a private network namespace (root)
#   bench/proxy/run.sh --intercept     # TLS interception: S5/S6 vs squid-bump + mitmproxy-bump
#   bench/proxy/run.sh --intercept --quick
#
# Builds build/release (cmake --preset release), runs bench/peers/run.sh with sandgate as
# contender (config/bench.toml via bench/proxy/run_sandgate.sh, credentials bench:bench),
# then prints the harness's report and the ratio table (bench/proxy/ratios.py) with the
# project's targets. With --intercept it runs the harness's S5/S6 instead, with sandgate's
# interception CA (run_sandgate.sh --ca) as --contender-ca, and, since sandgate does not
# intercept the harness's IP-literal CONNECT, measures it by name right after on the same
# origin (bench/proxy/intercept_by_name.sh). Exit status: 0 all targets met,
# 1 some missed, 2 setup/run failure. See bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
peers_dir=${PEERS_DIR:-$root/bench/peers}
peers=""
intercept=0
build=1
netns=auto
harness_args=()

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

while [ $# -gt 0 ]; do
    case $1 in
        --quick) harness_args+=(--quick); shift ;;
        --intercept) intercept=1; shift ;;
        --spec) harness_args+=(--max-minutes 0); shift ;;
        --peers) peers=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --netns) netns=1; shift ;;
        --no-netns) netns=0; shift ;;
        --out) harness_args+=(--out "$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; harness_args+=("$@"); break ;;
        *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$intercept" = 1 ]; then
    [ "$peers" = all ] && peers=squid-bump,mitmproxy-bump
    peers=${peers:-squid-bump,mitmproxy-bump}
else
    [ "$peers" = all ] && peers=squid,tinyproxy,haproxy,socat,srt
    peers=${peers:-squid,haproxy}
fi

[ -x "$peers_dir/run.sh" ] || { echo "run.sh: peers harness not found at $peers_dir (set PEERS_DIR)" >&2; exit 2; }
command -v wrk >/dev/null && command -v nginx >/dev/null || {
    echo "run.sh: harness dependencies missing; run $peers_dir/setup.sh once (root, apt)" >&2; exit 2; }

if [ "$build" = 1 ]; then
    (cd "$root" && cmake --preset release >/dev/null &&
        cmake --build --preset release -j2) || { echo "run.sh: build failed" >&2; exit 2; }
fi
bin=$root/build/release/src/app/sandgate
[ -x "$bin" ] || { echo "run.sh: no binary at $bin" >&2; exit 2; }
# bench.toml names the interception CA, which run_sandgate.sh creates on first use: make sure
# it exists before the config is checked (a fresh machine has none yet).
SANDGATE_BIN=$bin "$root/bench/proxy/run_sandgate.sh" --ca >/dev/null || exit 2
"$bin" --check-config "$root/config/bench.toml" >/dev/null || exit 2

# The harness needs the fixed origin ports 18080/18443 (and its peers' ports) on 127.0.0.1.
# When something else on the machine holds them (another checkout's test server, a second
# run), run the whole harness in a private network namespace: its own loopback, same kernel,
# same per-namespace defaults (tcp_tw_reuse=2, port range, somaxconn). --netns forces it.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ "$netns" = auto ]; then
    netns=0
    for p in 18080 18443 18446 13128 13129 13132 13133 13200; do port_busy $p && netns=1; done
    [ "$netns" = 1 ] && echo "run.sh: harness ports busy on this machine: using a private network namespace" >&2
fi
launcher=()
if [ "$netns" = 1 ]; then
    command -v unshare >/dev/null && [ "$(id -u)" = 0 ] || {
        echo "run.sh: --netns needs root and unshare(1)" >&2; exit 2; }
    launcher=(unshare --net -- bash -c 'ip link set lo up && exec "$@"' bash)
fi
# A private scratch directory, so a concurrent run of the harness elsewhere is not disturbed.
export PEERS_RUN_DIR=${PEERS_RUN_DIR:-/tmp/peers-run-sandgate}

contender_args=(--contender "sandgate@13200=$here/run_sandgate.sh {PORT}" --contender-auth bench:bench)
if [ "$intercept" = 1 ]; then
    # The CA sandgate mints its leaves with: created once (sandgate ca init), its certificate is
    # what the harness's client trusts for sandgate.
    ca=$(SANDGATE_BIN=$bin "$here/run_sandgate.sh" --ca) || exit 2
    contender_args+=(--contender-ca "sandgate=$ca")
    harness_args=(--scenarios S5,S6 "${harness_args[@]}")
fi

# The harness writes its results directory on its first log line; keep its whole output.
log=$(mktemp /tmp/sandgate-bench-run.XXXXXX)
set +e
SANDGATE_BIN=$bin "${launcher[@]}" "$peers_dir/run.sh" --peers "$peers" \
    "${contender_args[@]}" "${harness_args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
out=$(sed -n 's/.*results -> \(.*\)$/\1/p' "$log" | head -1)
rm -f "$log"
if [ "$rc" != 0 ] || [ -z "$out" ] || [ ! -s "$out/raw.tsv" ]; then
    echo "run.sh: harness failed (exit $rc)${out:+; see $out/run.log}" >&2
    exit 2
fi
if [ "$intercept" = 1 ] && ! grep -q '^s56\.sandgate=intercept|[^|]*|1|' "$out/meta.txt"; then
    # sandgate inspects names, not IP literals: the harness's CONNECT 127.0.0.1:18446 stays
    # spliced and fails its interception check. Measure it by name, right after, on the same
    # origin with the same client and settings (bench/proxy/intercept_by_name.sh).
    echo
    echo "run.sh: sandgate was not intercepting in the harness's S5/S6 (IP literal); measuring it by name" >&2
    SANDGATE_BIN=$bin PEERS_DIR=$peers_dir "${launcher[@]}" "$here/intercept_by_name.sh" "$out" ||
        { echo "run.sh: the by-name S5/S6 run failed; see $out/by-name/" >&2; exit 2; }
fi
echo
echo "## sandgate: ratios to DIRECT and targets"
echo
if [ "$intercept" = 1 ]; then
    python3 "$here/ratios.py" "$out" --contender sandgate --intercept
else
    python3 "$here/ratios.py" "$out" --contender sandgate --baseline squid
fi
