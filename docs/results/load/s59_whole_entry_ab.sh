#!/bin/bash
# A = HEAD before this change (/tmp/head), B = working tree: a command after kernscope.load() stored the whole load
R=$1; F=$2; shift 2
for i in $(seq $R); do
  for side in A B; do
    if [ $side = A ]; then pp=/tmp/head/src; else pp=/work/main/src; fi
    d=$(mktemp -d)
    PYTHONPATH=$pp KERNSCOPE_CACHE_DIR=$d /work/main/.venv/bin/python -c "import kernscope; kernscope.load('$F')" 2>/dev/null
    PYTHONPATH=$pp KERNSCOPE_CACHE_DIR=$d /usr/bin/time -o /tmp/t_ab -f "$side %e s %M KB" /work/main/.venv/bin/python -m kernscope "$@" $F --format json > /tmp/abw_$side.json 2>/dev/null
    cat /tmp/t_ab; rm -rf $d
  done
done
cmp -s /tmp/abw_A.json /tmp/abw_B.json && echo "outputs identical" || echo "outputs differ"
