#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this script).
# Needs only the Rust toolchain pinned in rust-toolchain.toml; protoc comes from a crate.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format"
cargo fmt --all -- --check
echo "== lint"
cargo clippy --locked --all-targets -- -D warnings
echo "== tests (unit, integration, benches in test mode)"
cargo test --locked --all-targets
