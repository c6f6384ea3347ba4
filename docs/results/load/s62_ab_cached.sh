# A: $A_SRC (default the session's start, /tmp/head), B: the working tree; cold analyze with an empty parse cache each
# run (as a user's first run: the entry is written), interleaved; wall s, user s, sys s, peak KiB
for r in $(seq 1 ${ROUNDS:-6}); do
  for v in A B; do
    if [ $v = A ]; then PP=${A_SRC:-/tmp/head/src}; else PP=/work/main/src; fi
    rm -rf /tmp/ab/cache_$v
    KERNSCOPE_CACHE_DIR=/tmp/ab/cache_$v PYTHONPATH=$PP /usr/bin/time -f "$v %e %U %S %M" /work/main/.venv/bin/python -m kernscope analyze $TRACE --format json -o /tmp/ab/out_$v.json 2>>$OUTF
  done
done
cmp /tmp/ab/out_A.json /tmp/ab/out_B.json && echo "outputs identical" >> $OUTF
awk '{t[$1]=t[$1]" "$2; m[$1]=m[$1]" "$5}END{for(k in t) print k, "wall:" t[k], " rss KB:" m[k]}' $OUTF | sort
