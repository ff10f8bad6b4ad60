#!/bin/sh
# Issue 37: a fresh build of the published data with bulk-data files against one without
# ("bulk": false in gen.json), in interleaved rounds; each build's wall, user and system seconds
# and peak RSS (KB) are appended to times.txt, the bytes of the first round's trees to
# bytes.txt. Usage: bench/bulk.sh GEN DATA [ROUNDS], DATA a folder `gen import api-data` wrote
# (it is edited in place and restored). Run it in an empty folder: it writes out/ there.
set -eu
G=$1
D=$2
ROUNDS=${3:-7}
cp "$D/gen.json" gen.on.json
python3 -c "import json;c=json.load(open('gen.on.json'));c['bulk']=False;json.dump(c,open('gen.off.json','w'),indent=2)"
trap 'cp gen.on.json "$D/gen.json"' EXIT
round=1
while [ $round -le "$ROUNDS" ]; do
  for mode in on off; do
    cp gen.$mode.json "$D/gen.json"
    rm -rf out
    SOURCE_DATE_EPOCH=1786004122 /usr/bin/time -f "$mode %e %U %S %M" "$G" build -q --data "$D" --out out 2>>times.txt >/dev/null
    if [ $round = 1 ]; then
      echo "$mode $(du -sb out | cut -f1) $( [ -d out/api/v2/bulk-data ] && du -sb out/api/v2/bulk-data | cut -f1 || echo 0)" >>bytes.txt
    fi
  done
  cut -d' ' -f1 /proc/loadavg >>load.txt
  round=$((round + 1))
done
