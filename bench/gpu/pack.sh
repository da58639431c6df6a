#!/usr/bin/env bash
# Builds the release binaries and the solver's test binaries here and packs them, stripped,
# into gpu-carry/bins.tar.xz for bench/gpu/solver_checks.sh and run.sh on the GPU machine
# (the device tool carries at most 64 MiB; unstripped binaries are 20-70 MB each).
# PACK_MPI=1 builds the solver with MPI (the GPU ranks and mpi_ranks tests; needs Open MPI's
# headers here, and libmpi.so.40 there: both machines have Open MPI 4.1).
set -euo pipefail
cd "$(dirname "$0")/../.."
features=()
[[ ${PACK_MPI:-0} == 1 ]] && features=(--features solver/mpi)
cargo build --release --workspace --bins "${features[@]}"
tests=$(cargo test --release -p solver "${features[@]}" --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])')
stage=$(mktemp -d)
for b in solver shmctl viewer analysis forwarder dem-gpu-bench sph-gpu-bench; do
  strip -o "$stage/$b" "target/release/$b"
done
while read -r name exe; do strip -o "$stage/$name" "$exe"; done <<< "$tests"
mkdir -p gpu-carry
tar -cJf gpu-carry/bins.tar.xz -C "$stage" .
rm -rf "$stage"
ls -la gpu-carry/bins.tar.xz
