#!/usr/bin/env python3
"""Sums a heaptrack collapsed-stack file by the innermost frame of gen's own code, to show where
the peak heap goes. Usage:
  cargo build --profile profiling; heaptrack -o gen.heap target/profiling/gen build ...
  heaptrack_print -f gen.heap.zst -F stacks.txt --flamegraph-cost-type peak
  python3 bench/heapsum.py stacks.txt [N]
"""
import sys, re, collections
costs = collections.Counter()
total = 0
for line in open(sys.argv[1]):
    stack, _, cost = line.rstrip().rpartition(' ')
    try: cost = int(cost)
    except ValueError: continue
    total += cost
    frames = stack.split(';')
    ours = [f for f in frames if re.search(r'genapi|gen::|_6genapi|load::|render::|plan::|write::|index::|manifest::|schema::|paging::', f)]
    key = ours[-1] if ours else (frames[-1] if frames else '?')
    key = re.sub(r"::h[0-9a-f]{16}", "", key)
    costs[key] += cost
print(f"peak heap total {total/1e6:.1f} MB")
for key, cost in costs.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 12):
    print(f"{cost/1e6:8.1f} MB  {key[:150]}")
