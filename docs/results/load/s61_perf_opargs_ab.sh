#!/bin/bash
# cold perf (fresh cache) and perf after analyze: HEAD (/tmp/head2) vs the working tree (op shapes by the compiled scanner)
cd /work/main
for round in 1 2 3; do
 for f in gpt mi300x ns; do
  F=/tmp/rep/$f.json
  for v in old new; do
   if [ $v = old ]; then PP=/tmp/head2/src; else PP=/work/main/src; fi
   rm -rf /tmp/kc_ab; export KERNSCOPE_CACHE_DIR=/tmp/kc_ab
   /usr/bin/time -o /tmp/tp -f "%e %M" env PYTHONPATH=$PP .venv/bin/python -m kernscope perf $F --format json -o /tmp/ab_p_$v.json >/dev/null 2>/dev/null
   rm -rf /tmp/kc_ab
   PYTHONPATH=$PP .venv/bin/python -m kernscope analyze $F --format json -o /tmp/ab_a.json >/dev/null 2>/dev/null
   /usr/bin/time -o /tmp/tq -f "%e %M" env PYTHONPATH=$PP .venv/bin/python -m kernscope perf $F --format json -o /tmp/ab_q_$v.json >/dev/null 2>/dev/null
   echo "round $round $f $v perf-cold $(cat /tmp/tp) perf-after-analyze $(cat /tmp/tq) sha $(cat /tmp/ab_p_$v.json /tmp/ab_q_$v.json | sha1sum | cut -c1-10)"
  done
 done
done
