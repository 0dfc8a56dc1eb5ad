#!/usr/bin/env bash
# Installs what sandgate needs, builds it and sandgate-launch (release), and runs the daemon on
# config/sandgate.toml (or the config given as the first argument).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build build/release --target sandgate sandgate-launch
exec ./build/release/src/app/sandgate --config "${1:-config/sandgate.toml}"
