#!/usr/bin/env bash
# vips_mls.sh INPUT OUTDIR SIX_SCRIPT
#
# The libvips side of `bench variants --set mls`: the six variants
# (SIX_SCRIPT, the shared reference's vips_six.sh, in its `parallel` mode)
# and, at the same time, the unbranded MLS template's two outputs. With
# SIX_SCRIPT `-`, the two outputs alone (the reference of `bench
# profile-sweep`, a library rendered again for the MLS template):
#   mls_full.jpg   fit 2048x2048, never enlarged, JPEG under 3,000,000 bytes
#   mls_small.jpg  840x525 exactly, centre crop (fill), JPEG under 300,000 bytes
# Each is resized once (`vipsthumbnail`, JPEG shrink-on-load, autorotated)
# to a vips-format file, then encoded with a quality search like ours: from
# 90 down in steps of 5 to 30 until the file is under the cap. Metadata is
# stripped. Env VIPS_CONCURRENCY is honoured by every vips process.
set -euo pipefail

IN=$(realpath "$1")
OUT=$(realpath -m "$2")
mkdir -p "$OUT"

six=
if [ "$3" != - ]; then
  bash "$(realpath "$3")" "$IN" "$OUT" parallel &
  six=$!
fi

capped() { # capped NAME BOX CAP [vipsthumbnail options...]
  local name=$1 box=$2 cap=$3
  shift 3
  local resized="$OUT/.$name.v"
  vipsthumbnail "$IN" -s "$box" "$@" -o "$resized"
  for q in 90 85 80 75 70 65 60 55 50 45 40 35 30; do
    vips jpegsave "$resized" "$OUT/$name.jpg" --Q "$q" --strip
    [ "$(stat -c %s "$OUT/$name.jpg")" -le "$cap" ] && break
  done
  rm -f "$resized"
}
capped mls_full '2048x2048>' 3000000
capped mls_small '840x525' 300000 --smartcrop centre

if [ -n "$six" ]; then wait "$six"; fi
