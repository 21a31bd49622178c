#!/usr/bin/env bash
# vips_avif.sh INPUT OUTDIR WIDTHxHEIGHT Q
#
# The libvips side of `bench variants --set avif`: the photo fitted into
# WIDTHxHEIGHT (never enlarged, autorotated; the bench passes the size our
# output has, so both encode the same pixels) and saved as AVIF through
# libheif (`heifsave`, AV1, libaom, quality Q, default effort), metadata
# stripped. Env VIPS_CONCURRENCY is honoured.
set -euo pipefail

IN=$(realpath "$1")
OUT=$(realpath -m "$2")
mkdir -p "$OUT"
vipsthumbnail "$IN" -s "$3>" -o "$OUT/.web.v"
vips heifsave "$OUT/.web.v" "$OUT/web_avif.avif" --compression av1 --Q "$4" --strip
rm -f "$OUT/.web.v"
