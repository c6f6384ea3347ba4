#!/bin/bash
# every trace file: analyze / perf / memory --format json, old ($OLD_SRC, default /tmp/head) vs new ($NEW_SRC, default the working tree), no cache; byte compare
cd /work/main
n=0; same=0; diff=0
for f in $(find /work/shared/traces tests/data src/kernscope/examples \( -name "*.json" -o -name "*.json.gz" -o -name "*.xplane.pb" -o -name "*.xplane.pb.gz" \) -size +1k | sort); do
  for cmd in analyze perf memory; do
    PYTHONPATH=${OLD_SRC:-/tmp/head/src} timeout 300 .venv/bin/python -m kernscope $cmd $f --format json --no-cache -o /tmp/sw_old.json >/dev/null 2>/tmp/sw_old.err; a=$?
    PYTHONPATH=${NEW_SRC:-/work/main/src} timeout 300 .venv/bin/python -m kernscope $cmd $f --format json --no-cache -o /tmp/sw_new.json >/dev/null 2>/tmp/sw_new.err; b=$?
    n=$((n+1))
    if [ $a = $b ] && { [ $a != 0 ] || cmp -s /tmp/sw_old.json /tmp/sw_new.json; } && cmp -s /tmp/sw_old.err /tmp/sw_new.err; then same=$((same+1)); else diff=$((diff+1)); echo "DIFF $cmd $f rc $a $b"; fi
    rm -f /tmp/sw_old.json /tmp/sw_new.json
  done
done
echo "files x commands: $n same: $same differ: $diff"
