#!/bin/sh
# A one-line edit of 1M records, two gens side by side (issue 49's figures of 2026-11-28):
#   BASE=<older gen> NEW=<gen> DATA=<a writable copy of the 1M NDJSON data> WORK=<folder> \
#     sh bench/edit_ab.sh ROUNDS
# Builds DATA as an archive with each gen (WORK/base, WORK/new; skipped when there), then, each
# round, changes the "height" of line 1000 of creature.ndjson (a new file renamed over it, as an
# editor saves) and rebuilds with both gens, the order alternating by round. Prints each build's
# wall seconds and peak RSS (/usr/bin/time). Make DATA with `cp -al target/bench/data-1m-ndjson
# <copy>`: the edit renames a new file over the table, so the source's inode is never written.
set -eu
rounds=${1:-5}
for which in base new; do
  if [ $which = base ]; then gen=$BASE; else gen=$NEW; fi
  [ -d "$WORK/$which" ] || SOURCE_DATE_EPOCH=1700000000 "$gen" build --archive --data "$DATA" --out "$WORK/$which" > /dev/null
done
i=0
while [ $i -lt "$rounds" ]; do
  python3 - "$DATA/creature.ndjson" "$(( $(date +%s) % 100000 + i ))" <<'PY'
import os, re, sys
table, height = sys.argv[1], sys.argv[2].encode()
with open(table, 'rb') as f, open(table + '.tmp', 'wb') as out:
    for number, line in enumerate(f, 1):
        if number == 1000:
            line = re.sub(rb'"height":\d+', b'"height":' + height, line, count=1)
        out.write(line)
os.rename(table + '.tmp', table)
PY
  if [ $((i % 2)) -eq 0 ]; then order="base new"; else order="new base"; fi
  for which in $order; do
    if [ $which = base ]; then gen=$BASE; else gen=$NEW; fi
    SOURCE_DATE_EPOCH=1700000000 /usr/bin/time -f "$which %e s %M KB" "$gen" build --archive --data "$DATA" \
      --out "$WORK/$which" 2>&1 >/dev/null | grep -E "^(base|new) |note"
  done
  i=$((i + 1))
done
