#!/usr/bin/env bash
# Fails when python/coscheduling/_core.pyi differs from the stub the Rust sources
# generate (pyo3-stub-gen). The stub is generated into a temporary file and compared.
# Regenerate with: cargo run -p cosched-py --bin stub_gen
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
committed="$root/python/coscheduling/_core.pyi"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cargo run --quiet --manifest-path "$root/Cargo.toml" -p cosched-py --bin stub_gen -- "$tmp/_core.pyi" >/dev/null
if ! diff -u "$committed" "$tmp/_core.pyi"; then
    echo "error: $committed is out of date; regenerate it with: cargo run -p cosched-py --bin stub_gen" >&2
    exit 1
fi
echo "stubs: $committed is up to date"
