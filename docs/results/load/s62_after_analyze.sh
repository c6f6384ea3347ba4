# perf and analyze --roofline after analyze (a fresh cache each), against the cold ones (--no-cache); tree at $1
for f in $(find /work/main/tests/data /work/shared/traces -name "*.xplane.pb*") /tmp/jax/long.xplane.pb; do
  n=$(echo $f | md5sum | cut -c1-8)
  for cmd in perf roofline; do
    if [ $cmd = perf ]; then args="perf $f"; else args="analyze $f --roofline"; fi
    rm -rf /tmp/kca; mkdir -p /tmp/kca
    KERNSCOPE_CACHE_DIR=/tmp/kca PYTHONPATH=$1 /work/main/.venv/bin/python -m kernscope analyze $f --format json -o /dev/null 2>/dev/null
    KERNSCOPE_CACHE_DIR=/tmp/kca PYTHONPATH=$1 /work/main/.venv/bin/python -m kernscope $args --format json -o /tmp/after_$cmd.json 2>/tmp/after_$cmd.err; rc=$?
    PYTHONPATH=$1 /work/main/.venv/bin/python -m kernscope $args --no-cache --format json -o /tmp/cold_$cmd.json 2>/tmp/cold_$cmd.err; rc2=$?
    if cmp -s /tmp/after_$cmd.json /tmp/cold_$cmd.json && cmp -s /tmp/after_$cmd.err /tmp/cold_$cmd.err && [ $rc = $rc2 ]; then echo "same $cmd $f"; else echo "DIFF $cmd $f rc $rc $rc2"; fi
  done
done
