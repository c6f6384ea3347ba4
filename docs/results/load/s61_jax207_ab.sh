#!/bin/bash
# cold analyze of the real 207 MB JAX profile, f17414d (/tmp/head) vs the working tree, interleaved, fresh cache each run
cd /work/main
for round in $(seq 1 8); do
  for v in old new; do
    if [ $v = old ]; then PP=/tmp/head/src; else PP=/work/main/src; fi
    rm -rf /tmp/kc_ab; export KERNSCOPE_CACHE_DIR=/tmp/kc_ab
    /usr/bin/time -o /tmp/tj -f "%e %M" env PYTHONPATH=$PP .venv/bin/python -m kernscope analyze /tmp/jax/long.xplane.pb --format json -o /tmp/ab_j_$v.json >/dev/null 2>/dev/null
    echo "round $round $v $(cat /tmp/tj) sha $(sha1sum < /tmp/ab_j_$v.json | cut -c1-10)"
  done
done
