#!/usr/bin/env bash
# Installs the Debian packages the kernel tests drive, when running as root and any is
# missing. Without root it only reports what is missing: those tests then skip.
set -euo pipefail
need=()
for pair in iptables:iptables-restore nftables:nft conntrack:conntrack ipset:ipset iproute2:ip; do
  pkg=${pair%%:*} bin=${pair##*:}
  command -v "$bin" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: not root, missing ${need[*]}: kernel tests will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
