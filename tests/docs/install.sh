#!/usr/bin/env bash
# mdBook for the manual's book build (tests/docs_book.rs): installed from the Rust package registry into
# tests/docs/target (no serve/watch features: only `mdbook build` is used). Idempotent: ~0 s
# when the pinned version is already there.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION=0.5.4
BIN="$HERE/target/bin/mdbook"
if [[ -x $BIN ]] && "$BIN" --version 2>/dev/null | grep -q "v$VERSION"; then
  exit 0
fi
# --debug: the tests build one small book. Beside CI's lint, an optimized build of mdBook took
# 5 min 31 s, a debug build 2 min 02 s (two CI runs, 2026-12-06).
cargo install mdbook --locked --version "$VERSION" --no-default-features --features search \
  --debug --root "$HERE/target"
"$BIN" --version
