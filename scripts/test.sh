#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests beside the code, and the integration
# tests in tests/ (real `tidal` processes on loopback ports with temporary data folders).
# `.ci/run` calls this script; the README gives it as the test command.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required (https://rustup.rs)" >&2
  exit 1
fi
# rustfmt and clippy ship with rustup's default profile; add them if this toolchain lacks them.
if command -v rustup >/dev/null 2>&1; then
  cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
fi

# The differential test runs DuckDB through Python's duckdb module.
if ! python3 -c 'import duckdb' >/dev/null 2>&1; then
  echo "== installing the Python duckdb module (differential tests)"
  python3 -m pip install --quiet duckdb || pip3 install --quiet duckdb
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
