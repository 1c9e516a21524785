#!/usr/bin/env bash
# Installs, as root, what the real-node tests (tests/tests/kube_node.rs) need beside
# scripts/install-test-deps.sh's etcd, helm and kubectl: the node's runtime (Debian's containerd
# and runc, the CNI plugins, iptables and conntrack for kube-proxy), the image tools
# (debootstrap, buildah: scripts/build-images.sh) and dnsmasq (the cluster DNS). Idempotent;
# apt-get runs only when a package is missing. The node itself is the script QUARRY_NODE_SH names.
set -euo pipefail
packages=(containerd runc containernetworking-plugins iptables conntrack debootstrap buildah dnsmasq-base openssl curl xz-utils)
if [ "$(id -u)" -ne 0 ]; then
  echo "install-node-deps: needs root (the node runs as root)" >&2
  exit 1
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> apt-get install ${missing[*]}"
  apt-get update
  # No recommends: buildah's would pull podman's network stack, which the build does not use.
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "==> node packages already installed"
fi
