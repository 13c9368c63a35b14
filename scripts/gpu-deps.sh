#!/usr/bin/env bash
# Unpacks what the GPU machine lacks into the ignored third_party/ folder, which travels with
# the working tree (`run` with carry: ["third_party"]): doctest's header and Google Benchmark
# (headers, library, CMake config) from Debian's packages. Run here, where apt-get works.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/third_party"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download doctest-dev libbenchmark-dev libbenchmark1debian >/dev/null)
mkdir -p "$dest/doctest" "$dest/prefix"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/x"; done
cp "$tmp/x/usr/include/doctest/doctest.h" "$dest/doctest/doctest.h"
rm -rf "$dest/prefix/usr"
cp -a "$tmp/x/usr" "$dest/prefix/"
echo "third_party/ ready: doctest.h, Google Benchmark $(ls "$dest"/prefix/usr/lib/x86_64-linux-gnu/libbenchmark.so.1.* | xargs -n1 basename)"
