#!/usr/bin/env bash
# Installs every Debian 12 package sandgate needs to build, run and test.
# Idempotent: when everything is present it returns without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libboost1.81-dev libboost-json1.81-dev
  libssl-dev openssl
  libnghttp2-dev
  # brotli: the response scrubber decodes `Content-Encoding: br` to scan it for the token.
  libbrotli-dev
  libc-ares-dev
  libtomlplusplus-dev
  # zlib: `sandgate audit` reads rotated .gz audit logs.
  zlib1g-dev
  prometheus-cpp-dev libcivetweb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format ccache
  # libsystemd: the daemon notifies systemd (sd_notify: ready, reload, stop, watchdog).
  libsystemd-dev
  # clang builds the fuzz and tsan presets; libclang-rt-14-dev holds libFuzzer and the
  # sanitizer runtimes (a Recommends of clang-14 only, so it is named here).
  clang libclang-rt-14-dev
  curl python3
  # jq: bench/audit/run.sh measures `sandgate audit` against a jq pipeline.
  jq
  # Clients the end-to-end tests run inside a sandbox besides curl and urllib.
  python3-requests python3-pip
  # The client matrix (tests/integration/clients_test.cpp): wget, Go's net/http, Java's
  # HttpClient (java's source launcher), and dpkg-deb/dpkg-scanpackages for apt's flat
  # repository; curl, git, python3-requests, pip, apt-get and npm are named elsewhere here.
  wget golang-go openjdk-17-jdk-headless dpkg-dev
  # Real HTTP/2 peers for the h2 codec tests: nghttp, nghttpd and python3-h2.
  nghttp2-client nghttp2-server python3-h2
  # testssl.sh scans the leaf sandgate presents to an intercepted client (its TLS settings).
  testssl.sh
  # h2spec (third_party/h2spec) is built offline by its test from Debian's Go packages.
  golang-golang-x-net-dev golang-github-spf13-cobra-dev golang-github-fatih-color-dev
  # AWS's own clients sign requests with a sandbox's placeholder keys, which sandgate signs
  # again (SigV4); botocore also computes the signature the AWS stand-in expects.
  awscli python3-boto3
  nftables iproute2 dnsmasq-base dnsutils iputils-ping util-linux
  # prometheus: promtool checks the alerting rules; a real Prometheus scrapes the daemon in
  # a test. logrotate: the shipped snippet runs in a test. python3-yaml: the manifest checks.
  prometheus logrotate python3-yaml
  # systemd-analyze verifies the shipped unit (no running systemd needed).
  systemd
  # strace: a test checks the unit's SystemCallFilter= against the calls the daemon makes.
  strace
  # time: bench/proxy/h2.sh measures h2load's CPU per request with /usr/bin/time.
  time
  # valgrind: bench/proxy/percall.py and h2.sh --instr count instructions with callgrind.
  valgrind
)

# npm drives one end-to-end test (a package installed through sandgate). A Node.js from
# elsewhere (NodeSource's nodejs ships npm) is fine; otherwise take Debian's.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root (or with sudo)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
