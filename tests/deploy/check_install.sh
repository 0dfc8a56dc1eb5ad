#!/usr/bin/env bash
# Installs the build in BUILD_DIR into a temporary DESTDIR and checks what landed there: the
# binaries, the unit (its ExecStart naming the installed binary, verified by systemd-analyze
# with the staged path), sysusers.d, the deployment files and the docs.
set -euo pipefail
build=$1
stage=$(mktemp -d)
trap 'rm -rf "${stage}"' EXIT
DESTDIR=${stage} cmake --install "${build}" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "${build}/CMakeCache.txt")
root=${stage}${prefix}
fail=0
for f in bin/sandgate bin/sandgate-launch lib/systemd/system/sandgate.service \
         lib/sysusers.d/sandgate.conf share/sandgate/examples/sandgate \
         share/sandgate/examples/sandgate.toml share/sandgate/kubernetes/node-daemonset.yaml \
         share/sandgate/prometheus/sandgate-rules.yml share/sandgate/grafana/sandgate-dashboard.json \
         share/doc/sandgate/deployment.md; do
  if [ ! -e "${root}/${f}" ]; then echo "not installed: ${prefix}/${f}" >&2; fail=1; fi
done
unit=${root}/lib/systemd/system/sandgate.service
grep -qx "ExecStart=${prefix}/bin/sandgate --config /etc/sandgate/sandgate.toml" "${unit}" || {
  echo "the installed unit does not run ${prefix}/bin/sandgate" >&2; fail=1; }
# Verified as installed, with the binary where the stage put it.
mkdir -p "${stage}/verify"
sed "s|${prefix}/bin/|${root}/bin/|g" "${unit}" >"${stage}/verify/sandgate.service"
out=$(systemd-analyze verify --man=no "${stage}/verify/sandgate.service" 2>&1) || fail=1
if [ -n "${out}" ]; then echo "${out}" >&2; fail=1; fi
"${root}/bin/sandgate" --version
exit ${fail}
