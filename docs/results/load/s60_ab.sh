# A: HEAD (/tmp/head), B: working tree; cold analyze of the real 207 MB JAX profile, interleaved
for r in $(seq 1 ${ROUNDS:-8}); do
  for v in A B; do
    if [ $v = A ]; then PP=/tmp/head/src; else PP=/work/main/src; fi
    PYTHONPATH=$PP /usr/bin/time -f "$v %e %U %S %M" /work/main/.venv/bin/python -m kernscope analyze ${TRACE:-/tmp/jax/long.xplane.pb} --no-cache --format json -o /tmp/ab_out_$v.json 2>>${OUTF:-/tmp/ab_jax.txt}
  done
done
