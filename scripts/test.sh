#!/usr/bin/env bash
# Installs what sandgate needs, builds it, and runs every test: unit, integration (the real
# binary on loopback and in private network namespaces), first in the normal build, then
# under AddressSanitizer + UndefinedBehaviorSanitizer. Run as root (namespaces need it).
# SANDGATE_PRESETS="dev" limits the run to one preset.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
for preset in ${SANDGATE_PRESETS:-dev asan-ubsan}; do
  echo "== preset ${preset}"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}"
  ctest --preset "${preset}"
done
echo "== clang-format"
files=$(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find src tests bench -name '*.[ch]pp')
clang-format --dry-run --Werror ${files}
echo "all tests passed"
