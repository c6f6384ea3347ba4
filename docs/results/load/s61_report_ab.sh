#!/bin/bash
# cold report (fresh cache each run): session 60's end (f17414d, /tmp/head) vs this session's (working tree)
cd /work/main
for round in 1 2 3; do
 for f in gpt mem; do
  F=/tmp/rep/$f.json
  for v in old new; do
   if [ $v = old ]; then PP=/tmp/head/src; else PP=/work/main/src; fi
   rm -rf /tmp/kc_ab; export KERNSCOPE_CACHE_DIR=/tmp/kc_ab
   /usr/bin/time -o /tmp/tr -f "%e %M" env PYTHONPATH=$PP .venv/bin/python -m kernscope report $F -o /tmp/ab_r_$v.html >/dev/null 2>/dev/null
   echo "round $round $f $v report $(cat /tmp/tr) sha $(sha1sum < /tmp/ab_r_$v.html | cut -c1-10)"
  done
 done
done
