#!/bin/bash
# A = session start (22e8168, /tmp/head), B = this session's code (/work/main); interleaved; fresh cache dir per run
# unless a warm step is named. Prints: side, wall s, peak RSS KB, and whether the outputs match.
PY=/work/main/.venv/bin/python
run() { # side cachedir outfile args...
  local side=$1 d=$2 out=$3; shift 3
  if [ $side = A ]; then pp=/tmp/head/src; else pp=/work/main/src; fi
  local args=(); for a in "$@"; do args+=("${a//@SIDE@/$side}"); done
  PYTHONPATH=$pp KERNSCOPE_CACHE_DIR=$d COLUMNS=120 /usr/bin/time -o /tmp/s59_time -f "$side %e s %M KB" $PY -m kernscope "${args[@]}" > $out 2>/tmp/s59_err_$side
  local rc=$?; cat /tmp/s59_time | tail -1; [ $rc = 0 ] || { echo "  exit $rc:"; head -3 /tmp/s59_err_$side; }
}
cold() { # title rounds args...
  local title=$1 R=$2; shift 2
  echo "## $title (cold: an empty cache each run)"
  for i in $(seq $R); do for side in A B; do d=$(mktemp -d); run $side $d /tmp/s59_$side.out "$@"; rm -rf $d; done; done
  cmp -s /tmp/s59_A.out /tmp/s59_B.out && echo "outputs identical" || echo "outputs differ"
}
fromentry() { # title rounds warmcmd... -- args...   (each side's cache warmed once by warmcmd; then runs with --top N varying)
  local title=$1 R=$2; shift 2
  echo "## $title (from the parse cache's entry, warmed once by: $WARM; analyze with --top N, N changing, so no stored output answers)"
  dA=$(mktemp -d); dB=$(mktemp -d)
  run A $dA /dev/null $WARM > /dev/null; run B $dB /dev/null $WARM > /dev/null
  for i in $(seq $R); do for side in A B; do if [ $side = A ]; then d=$dA; else d=$dB; fi; if [ "$TOP" = 1 ]; then run $side $d /tmp/s59_$side.out "$@" --top $((i + 5)); else run $side $d /tmp/s59_$side.out "$@"; fi; done; done
  cmp -s /tmp/s59_A.out /tmp/s59_B.out && echo "outputs identical" || echo "outputs differ"
  rm -rf $dA $dB
}
date -u; nproc; uname -r
J=/tmp/jax/long.xplane.pb; G=/tmp/rep/gpt.json
ls -l $J $G
Q="SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC, name"
cold "first sql of a new file, real JAX 207 MB, kernels by name" 4 sql "$Q" $J --format json
cold "first sql of a new file, GPT with stacks 206 MB, kernels by name" 4 sql "$Q" $G --format json
cold "first sql of a new file, GPT with stacks 206 MB, count of events (a whole load either way)" 3 sql "SELECT count(*) AS n FROM events" $G --format json
WARM="analyze $J --quiet"; TOP=1
fromentry "analyze --top N, real JAX 207 MB" 4 analyze $J --format json
WARM="report $J -o /tmp/s59_warm.html --quiet"; TOP=0
fromentry "report -o HTML (--top N), real JAX 207 MB" 3 report $J -o /tmp/s59_r_@SIDE@.html --quiet
cmp -s /tmp/s59_r_A.html /tmp/s59_r_B.html && echo "HTML pages identical" || echo "HTML pages differ"
cold "memory, real JAX 207 MB, terminal table" 3 memory $J
cold "perf, GPT with stacks 206 MB, JSON" 3 perf $G --format json
cold "report -o HTML, GPT with stacks 206 MB" 2 report $G -o /tmp/s59_g_@SIDE@.html --quiet
cmp -s /tmp/s59_g_A.html /tmp/s59_g_B.html && echo "HTML pages identical" || echo "HTML pages differ"
