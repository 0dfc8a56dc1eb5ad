#!/usr/bin/env bash
# bench/audit/run.sh - `sandgate audit` against a jq pipeline on the same audit log, one run.
#
#   bench/audit/run.sh                  # 1 GiB log, build Release, print times and ratios
#   bench/audit/run.sh --size 200000000 # a smaller log (bytes)
#   bench/audit/run.sh --bin build/dev/src/app/sandgate   # no build, use this binary
#   bench/audit/run.sh --gzip           # also time both on a gzip copy (jq through zcat)
#   bench/audit/run.sh --keep           # keep the generated log in the work directory
#
# Generates a realistic audit log (bench/audit/gen_log.py: 340 sandboxes, ~3,000 allowed
# hosts, ~600 denied ones, 80% tunnels and requests, 14% denials, 6% errors), then times, in
# the same run, `sandgate audit --format json` and bench/audit/denials.jq (jq -n, streaming),
# which computes the same denial summary (per sandbox, host, port, reason: count, first, last
# time), checks that both found the same summary (bench/audit/compare.py), and prints the
# wall-clock and CPU ratios with the target (at least 10x less CPU time than jq), and checks
# that reading the log twice takes no more memory than once. jq is installed by
# scripts/install-deps.sh. Exit status: 0 target met, 1 missed or summaries differ, 2 setup
# failure. See bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
size=$((1 << 30))
bin=""
gzip_too=0
keep=0
work=${AUDIT_BENCH_DIR:-${TMPDIR:-/tmp}/sandgate-audit-bench}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --size) size=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --gzip) gzip_too=1; shift ;;
        --keep) keep=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

for tool in jq python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done
if [ -z "$bin" ]; then
    (cd "$root" && cmake --preset release >/dev/null && cmake --build --preset release -j2 --target sandgate) >&2
    bin=$root/build/release/src/app/sandgate
fi
[ -x "$bin" ] || { echo "run.sh: no sandgate binary at $bin" >&2; exit 2; }

mkdir -p "$work"
log=$work/audit.log
cleanup() { [ "$keep" = 1 ] || rm -f "$log" "$log.gz"; rm -f "$work"/*.out; }
trap cleanup EXIT
if [ ! -f "$log" ] || [ "$(stat -c %s "$log")" -lt "$size" ]; then
    python3 "$here/gen_log.py" "$size" "$log"
fi
bytes=$(stat -c %s "$log")
# Read once so both tools start from the page cache.
cat "$log" >/dev/null

# measure NAME CMD...: runs CMD (stdout to $work/NAME.out), prints "wall cpu maxrss_kb".
measure() {
    local name=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$work/$name.time" "$@" >"$work/$name.out"
    awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/$name.time"
}

echo "log: $log, $bytes bytes, $(wc -l <"$log") lines; load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
read -r sg_wall sg_cpu sg_rss < <(measure sandgate "$bin" audit --format json --max-groups 10000000 "$log")
read -r jq_wall jq_cpu jq_rss < <(measure jq jq -n -c -f "$here/denials.jq" "$log")
status=0
python3 "$here/compare.py" "$work/sandgate.out" "$work/jq.out" || status=1

row() { printf '%-34s %9s s %9s s %9s MiB %10s MB/s\n' "$1" "$2" "$3" "$(( $4 / 1024 ))" \
        "$(awk -v b="$bytes" -v t="$2" 'BEGIN { printf "%.0f", b / 1e6 / t }')"; }
printf '%-34s %11s %11s %13s %15s\n' "" "wall" "cpu" "max RSS" "throughput"
row "sandgate audit --format json" "$sg_wall" "$sg_cpu" "$sg_rss"
row "jq -n -f denials.jq" "$jq_wall" "$jq_cpu" "$jq_rss"

# Memory follows the groups, not the input: the same log twice (twice the lines, the same
# groups) must not take more memory than once.
read -r twice_wall twice_cpu twice_rss < <(measure sandgate_twice "$bin" audit --format json --max-groups 10000000 "$log" "$log")
row "sandgate audit, the log twice" "$twice_wall" "$twice_cpu" "$twice_rss"
if [ "$twice_rss" -gt $(( sg_rss + sg_rss / 10 + 4096 )) ]; then
    echo "memory grew with the input: ${sg_rss} KiB once, ${twice_rss} KiB twice"
    status=1
fi

if [ "$gzip_too" = 1 ]; then
    gzip -1 -c "$log" >"$log.gz"
    read -r gz_wall gz_cpu gz_rss < <(measure sandgate_gz "$bin" audit --format json --max-groups 10000000 "$log.gz")
    row "sandgate audit, gzip input" "$gz_wall" "$gz_cpu" "$gz_rss"
    read -r zjq_wall zjq_cpu zjq_rss < <(measure jq_gz sh -c "zcat '$log.gz' | jq -n -c -f '$here/denials.jq'")
    row "zcat | jq -n -f denials.jq" "$zjq_wall" "$zjq_cpu" "$zjq_rss"
    python3 "$here/compare.py" "$work/sandgate_gz.out" "$work/jq.out" || status=1
    echo "ratio on gzip input (wall): $(awk -v a="$zjq_wall" -v b="$gz_wall" 'BEGIN { printf "%.1f", a / b }')x"
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }'; }
wall_ratio=$(ratio "$jq_wall" "$sg_wall")
cpu_ratio=$(ratio "$jq_cpu" "$sg_cpu")
echo "ratio jq/sandgate: wall ${wall_ratio}x, cpu ${cpu_ratio}x (target: >= 10x, on cpu time)"
# CPU time (user + sys) is what each tool needed whatever else the machine runs; wall time on a
# loaded machine mostly measures the others.
if awk -v r="$cpu_ratio" 'BEGIN { exit !(r < 10) }'; then
    echo "target missed"
    status=1
fi
exit $status
