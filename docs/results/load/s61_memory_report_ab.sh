#!/bin/bash
# interleaved cold `memory` and `report` (fresh cache each run), before (f17414d, /tmp/head) and after (working tree)
cd /work/main
for round in 1 2 3; do
 for f in gpt mem; do
  F=/tmp/rep/$f.json
  for v in old new; do
   if [ $v = old ]; then PP=/tmp/head/src; else PP=/work/main/src; fi
   rm -rf /tmp/kc_ab; export KERNSCOPE_CACHE_DIR=/tmp/kc_ab
   /usr/bin/time -o /tmp/tm -f "%e %M" env PYTHONPATH=$PP .venv/bin/python -m kernscope memory $F --format json -o /tmp/ab_m_$v.json >/dev/null 2>/dev/null
   rm -rf /tmp/kc_ab
   /usr/bin/time -o /tmp/tr -f "%e %M" env PYTHONPATH=$PP .venv/bin/python -m kernscope report $F -o /tmp/ab_r_$v.html >/dev/null 2>/dev/null
   echo "round $round $f $v memory $(cat /tmp/tm) report $(cat /tmp/tr) sha $(sha1sum < /tmp/ab_m_$v.json | cut -c1-10)"
  done
 done
done
