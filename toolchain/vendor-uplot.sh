#!/usr/bin/env bash
# Re-fetch the dashboard's charting library (uPlot) from the npm registry and check it.
#
# The dashboard works offline: the library is vendored in api/dashboard/vendor/uplot/ (the ES
# module build, its stylesheet and its MIT licence) and served by the API itself. This script is
# how those files were obtained; it is not part of `make setup`. It downloads the pinned package
# with `npm pack`, checks the tarball against the registry's integrity hash pinned below, and
# copies the three files. `--check` only verifies the vendored files against SHA256SUMS.
#
# To upgrade: set UPLOT_VERSION and UPLOT_INTEGRITY (`npm view uplot@X.Y.Z dist.integrity`), run
# this script, then review and commit the new files and SHA256SUMS.
set -euo pipefail

UPLOT_VERSION=1.6.32
UPLOT_INTEGRITY="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
FILES=(dist/uPlot.esm.js dist/uPlot.min.css LICENSE)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/api/dashboard/vendor/uplot"

if [[ "${1:-}" == "--check" ]]; then
  (cd "$DEST" && sha256sum --quiet -c SHA256SUMS) && echo "uPlot $UPLOT_VERSION: vendored files match SHA256SUMS"
  exit
fi

command -v npm >/dev/null || { echo "npm is required to fetch uPlot" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent "uplot@$UPLOT_VERSION" >/dev/null)
TARBALL="$WORK/uplot-$UPLOT_VERSION.tgz"
GOT="sha512-$(openssl dgst -sha512 -binary "$TARBALL" | base64 -w0)"
[[ "$GOT" == "$UPLOT_INTEGRITY" ]] || { echo "integrity mismatch: $GOT" >&2; exit 1; }
tar -xzf "$TARBALL" -C "$WORK"
mkdir -p "$DEST"
for f in "${FILES[@]}"; do cp "$WORK/package/$f" "$DEST/$(basename "$f")"; done
(cd "$DEST" && sha256sum "${FILES[@]##*/}" >SHA256SUMS)
echo "uPlot $UPLOT_VERSION vendored into api/dashboard/vendor/uplot/:"
cat "$DEST/SHA256SUMS"
