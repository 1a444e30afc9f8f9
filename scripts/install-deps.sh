#!/usr/bin/env bash
# Installs the Debian 12 packages ablate needs to build, test and analyse.
# Usage: scripts/install-deps.sh   (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git clang-format
  libopenmpi-dev openmpi-bin
  libopenblas-dev
  libhdf5-dev hdf5-tools
  libyaml-dev
  python3 python3-h5py python3-numpy python3-scipy python3-matplotlib python3-pandas
  python3-torch
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo" >&2; exit 1; }
  SUDO=sudo
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
