#!/bin/sh
# The peak memory of a fresh archive build of 1M records, two gens side by side (issue 49's
# figures of 2026-11-28):
#   BASE=<older gen> NEW=<gen> DATA=<the 1M NDJSON data> WORK=<folder> sh bench/fresh_peak.sh ROUNDS
# Each round builds DATA as an archive with each gen, the order alternating by round, into
# WORK/out after removing both it and its state folder WORK/.out.gen: with the state folder
# left, the build uses its kept extracts and reads no record for its names and filter values,
# which is a rebuild into an empty folder, not a fresh build (about 65 MB less at 1M). Prints each
# build's wall seconds and peak RSS (/usr/bin/time) with the load average.
set -eu
rounds=${1:-3}
i=0
while [ $i -lt "$rounds" ]; do
  if [ $((i % 2)) -eq 0 ]; then order="base new"; else order="new base"; fi
  for which in $order; do
    if [ $which = base ]; then gen=$BASE; else gen=$NEW; fi
    rm -rf "$WORK/out" "$WORK/.out.gen"
    SOURCE_DATE_EPOCH=1700000000 /usr/bin/time -f "$which %e s %M KB load $(cut -d' ' -f1 /proc/loadavg)" \
      "$gen" build --archive --data "$DATA" --out "$WORK/out" 2>&1 >/dev/null | grep -E "^(base|new) "
  done
  i=$((i + 1))
done
