#!/usr/bin/env bash
# The source release tarball of a tag, reproducibly: the same bytes from the same tag on any
# machine with the same git and gzip (git archive: files sorted, every mtime the commit's
# time, owner root; gzip -n: no name or time in its header), and its SHA-256.
# Usage: scripts/release.sh [REF] [-o DIR]
#   REF   a tag vX.Y.Z (default: the tag v<version> of CMakeLists.txt's project(VERSION)),
#         or any commit (a snapshot, named ablate-X.Y.Z-g<commit>, not a release)
#   -o    where to write ablate-X.Y.Z.tar.gz and ablate-X.Y.Z.tar.gz.sha256 (default dist/)
# The version of the release is REF's CMakeLists.txt project(VERSION); CITATION.cff,
# CHANGELOG.md and analysis/pyproject.toml must say the same (else it refuses). Making a
# release: docs/site.md, "Releases" (update the version and CHANGELOG.md, commit, tag
# vX.Y.Z, run this, publish the tarball and its .sha256).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ref="" out=$root/dist
while [ $# -gt 0 ]; do
    case $1 in
    -o) [ $# -ge 2 ] || { echo "release: -o needs a directory" >&2; exit 2; }; out=$2; shift ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "release: unknown option '$1'" >&2; exit 2 ;;
    *) ref=$1 ;;
    esac
    shift
done
cd "$root"
show() { git show "$commit:$1" 2>/dev/null; }
if [ -z "$ref" ]; then
    v=$(sed -n 's/^project(ablate VERSION \([^ ]*\).*/\1/p' CMakeLists.txt)
    ref=v$v
fi
commit=$(git rev-parse --verify -q "$ref^{commit}") || { echo "release: no commit '$ref' (tags: $(git tag -l 'v*' | paste -sd ' '))" >&2; exit 2; }
version=$(show CMakeLists.txt | sed -n 's/^project(ablate VERSION \([^ ]*\).*/\1/p')
[ -n "$version" ] || { echo "release: $ref: CMakeLists.txt has no project(ablate VERSION ...)" >&2; exit 2; }
bad=""
show CITATION.cff | grep -qx "version: $version" || bad+=" CITATION.cff"
show analysis/pyproject.toml | grep -qx "version = \"$version\"" || bad+=" analysis/pyproject.toml"
show CHANGELOG.md | grep -q "^## $version\b" || bad+=" CHANGELOG.md"
[ -z "$bad" ] || { echo "release: $ref is version $version (CMakeLists.txt), but${bad} do(es) not say so" >&2; exit 2; }
name=ablate-$version
if [ "$(git rev-parse -q --verify "refs/tags/v$version^{commit}" || true)" != "$commit" ]; then
    name=$name-g$(git rev-parse --short=12 "$commit")
    echo "release: $ref is not the tag v$version: a snapshot, $name" >&2
fi
mkdir -p "$out"
tarball=$out/$name.tar.gz
git -c tar.umask=0022 archive --format=tar --prefix="$name/" "$commit" | gzip -9 -n > "$tarball.tmp"
mv -f "$tarball.tmp" "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "release: $tarball"
cat "$tarball.sha256"
