#!/usr/bin/env bash
# Builds the loadcell image FROM scratch out of a binary built here:
#   deploy/image/build.sh BINARY TAG
# e.g. cargo build --release -p loadcell && deploy/image/build.sh target/release/loadcell loadcell:latest
# The binary is stripped and copied with every shared library `ldd` names
# (libc, libm, libgcc_s, libz and the loader), at the same paths, beside
# loadcell-shard (the shard entry point of deploy/kubernetes and
# deploy/swarm) and busybox-static's sh to run it.
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
# A shell for the entry-point script both orchestrators run (Debian's
# busybox-static: no library to bring).
busybox=$(command -v busybox)
cp "$busybox" "$ctx/rootfs/usr/local/bin/busybox"
mkdir -p "$ctx/rootfs/bin"
mkdir -p -m 1777 "$ctx/rootfs/tmp" # where a shard writes its result
for applet in sh cat; do
    ln -s /usr/local/bin/busybox "$ctx/rootfs/bin/$applet"
done
cp "$here/loadcell-shard" "$ctx/rootfs/usr/local/bin/loadcell-shard"
cp "$here/Dockerfile" "$ctx/Dockerfile"
docker build -q -t "$tag" "$ctx"
