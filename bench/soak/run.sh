#!/usr/bin/env bash
# bench/soak/run.sh [--build dev|release] [run.py options: --minutes 30 --rate 300 ...]
#
# The soak (issue 36 item 2): one daemon for --minutes under a mixed load, failing when
# anything grows that should not, when a request gets an unexpected answer, or when the audit
# log does not account for the requests made. See run.py and bench/README.md ("The soak").
# Run by hand, not in CI. Needs root: the run happens in a network namespace of its own
# (unshare --net: only loopback, fixed ports clash with nothing), and launched sandboxes
# (sandgate-launch, ids soak-PID-N) need namespaces, veths and nftables.
#
# --build dev (default) / --build release: build that preset's sandgate and sandgate-launch
# first; --no-build: use what build/dev (or SANDGATE_BIN / SANDGATE_LAUNCH_BIN) has.
# Results: /tmp/sg-soak-results/<timestamp>-<pid>/ (report.md, samples.csv, daemon.stderr, ...).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
preset=dev
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build) preset=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        *) break ;;
    esac
done

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespace, launched sandboxes)" >&2; exit 2; }
if [ $build = 1 ]; then
    (cd "$root" && cmake --preset "$preset" >/dev/null &&
        cmake --build --preset "$preset" --target sandgate sandgate-launch >/dev/null)
fi
bin=${SANDGATE_BIN:-$root/build/$preset/src/app/sandgate}
launch=${SANDGATE_LAUNCH_BIN:-$root/build/$preset/src/launcher/sandgate-launch}
# python3-h2 is Debian's: use Debian's python even when another python3 comes first in PATH.
python=/usr/bin/python3

out=/tmp/sg-soak-results/$(date -u +%Y%m%d-%H%M%S)-$$
mkdir -p "$out"
{
    echo "date=$(date -u +%FT%TZ)"
    echo "commit=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet -- src || echo -dirty)"
    echo "binary=$bin ($preset)"
    echo "kernel=$(uname -r) cpus=$(nproc)"
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "args=$*"
} >"$out/meta.txt"
echo "results: $out"
status=0
unshare --net "$python" "$here/run.py" --bin "$bin" --launch-bin "$launch" --out "$out" "$@" ||
    status=$?
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/meta.txt"
cat "$out/meta.txt"
exit $status
