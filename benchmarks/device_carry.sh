#!/usr/bin/env bash
# Here (the development machine, which reaches PyPI), before a device session: fill .carry/ (gitignored) with what
# kernscope needs on the device machine and its image lacks, for its Python (3.12, x86_64 manylinux). The image has
# numpy, pandas, pyarrow, rich, click and xxhash, torch, triton and JAX, and no internet; polars, msgspec, zlib-ng
# and xlsxwriter travel:
#   .carry/wheels/*.whl   polars (its Python part), msgspec, zlib-ng, xlsxwriter
#   .carry/rt.tar.xz      polars-runtime-32's wheel extracted, then tar | xz (the wheel itself, 54 MB, is over most of
#                         the travelling tree's 64 MiB; xz makes it ~33 MB)
# The versions are this venv's (the ones the suite passed with), unless named: POLARS=2.1.0 MSGSPEC=... bash ...
# Then every device call names .carry in `carry` and begins with `source benchmarks/device_env.sh` (which installs them
# into /tmp/site and builds kernscope's C library there). Usage: bash benchmarks/device_carry.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PY:-.venv/bin/python}
ver() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
POLARS=${POLARS:-$(ver polars)}
RUNTIME=${RUNTIME:-$(ver polars-runtime-32)}
MSGSPEC=${MSGSPEC:-$(ver msgspec)}
ZLIBNG=${ZLIBNG:-$(ver zlib-ng)}
XLSX=${XLSX:-$(ver xlsxwriter)}
grep -qx '/.carry/' .gitignore || { echo "device_carry: .carry/ is not in .gitignore" >&2; exit 1; }
rm -rf .carry/wheels .carry/rt.tar.xz /tmp/kernscope-carry
mkdir -p .carry/wheels /tmp/kernscope-carry
# (pip matches a manylinux tag exactly: name the ones these projects publish)
plat=(--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
get() { "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$1" "$2"; }
get .carry/wheels "polars==$POLARS"
get .carry/wheels "msgspec==$MSGSPEC"
get .carry/wheels "zlib-ng==$ZLIBNG"
get .carry/wheels "xlsxwriter==$XLSX"
get /tmp/kernscope-carry "polars-runtime-32==$RUNTIME"
mkdir -p /tmp/kernscope-carry/rt
"$py" -m zipfile -e /tmp/kernscope-carry/polars_runtime_32-*.whl /tmp/kernscope-carry/rt
tar -C /tmp/kernscope-carry/rt -cf - . | xz -T0 -6 > .carry/rt.tar.xz
rm -rf /tmp/kernscope-carry
ls -l .carry/wheels .carry/rt.tar.xz
du -sh .carry
