# A: HEAD (/tmp/head), B: working tree; cold analyze (no cache), interleaved
for r in $(seq 1 ${ROUNDS:-6}); do
  for v in A B; do
    if [ $v = A ]; then PP=/tmp/head/src; else PP=/work/main/src; fi
    PYTHONPATH=$PP /usr/bin/time -f "$v %e %U %S %M" /work/main/.venv/bin/python -m kernscope analyze $TRACE --no-cache --format json -o /tmp/ab/out_$v.json 2>>$OUTF
  done
done
cmp /tmp/ab/out_A.json /tmp/ab/out_B.json && echo "outputs identical" >> $OUTF
awk '{t[$1]=t[$1]" "$2; m[$1]=m[$1]" "$5}END{for(k in t) print k, "wall:" t[k], " rss KB:" m[k]}' $OUTF | sort
