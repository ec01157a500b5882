#!/usr/bin/env bash
# Builds the loadcell image FROM scratch out of a binary built here:
#   deploy/image/build.sh BINARY TAG
# e.g. cargo build --release -p loadcell && deploy/image/build.sh target/release/loadcell loadcell:latest
# The binary is stripped and copied with every shared library `ldd` names
# (libc, libm, libgcc_s, libz and the loader), at the same paths.
set -euo pipefail
binary=$1
tag=$2
here=$(cd "$(dirname "$0")" && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/local/bin"
cp "$binary" "$ctx/rootfs/usr/local/bin/loadcell"
strip "$ctx/rootfs/usr/local/bin/loadcell"
for lib in $(ldd "$binary" | grep -o '/[^ ]*'); do
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
done
cp "$here/Dockerfile" "$ctx/Dockerfile"
docker build -q -t "$tag" "$ctx"
