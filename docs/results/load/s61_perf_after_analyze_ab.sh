#!/bin/bash
# interleaved: cold analyze, then perf / analyze --roofline / sql on the same cache, old (HEAD) vs new (working tree)
cd /work/main
for round in 1 2 3; do
 for f in mi300x ns gpt a100; do
  F=/tmp/rep/$f.json
  for v in old new; do
   if [ $v = old ]; then PP=/tmp/head/src; else PP=/work/main/src; fi
   rm -rf /tmp/kc_ab; export KERNSCOPE_CACHE_DIR=/tmp/kc_ab
   /usr/bin/time -o /tmp/ta -f "%e" env PYTHONPATH=$PP .venv/bin/python -m kernscope analyze $F --format json -o /tmp/ab_a.json >/dev/null 2>/dev/null
   /usr/bin/time -o /tmp/tp -f "%e" env PYTHONPATH=$PP .venv/bin/python -m kernscope perf $F --format json -o /tmp/ab_p.json >/dev/null 2>/dev/null
   /usr/bin/time -o /tmp/tr -f "%e" env PYTHONPATH=$PP .venv/bin/python -m kernscope analyze $F --roofline --format json -o /tmp/ab_r.json >/dev/null 2>/dev/null
   a=$(cat /tmp/ta); p=$(cat /tmp/tp); r=$(cat /tmp/tr); echo "round $round $f $v analyze $a perf-after $p roofline-after $r entries $(ls /tmp/kc_ab/v*/ | wc -l) sha $(cat /tmp/ab_a.json /tmp/ab_p.json /tmp/ab_r.json | sha1sum | cut -c1-10)"
  done
 done
done
