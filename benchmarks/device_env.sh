# On the device machine, from the repo root, at the start of every call: `source benchmarks/device_env.sh`.
# Installs what benchmarks/device_carry.sh put in .carry/ into /tmp/site (the image's own packages stay as they are),
# builds kernscope's C library for the device's Python in place (src/kernscope/load/_xspace*.so: the scanners and the
# sweep; the one built here is for another Python), and exports PYTHONPATH (the tree's src/ first, then /tmp/site),
# KERNSCOPE_CACHE_DIR and OUT. Writes $OUT/env.txt (GPU, driver, versions, whether the compiled scanner loads). Returns
# non-zero, saying why, where a part is missing: the callers stop there.
# (Sessions 76-84 each wrote these lines again: device_jax_1g.sh, gpu_session.sh, docs/results/h100/s84/dev84.sh.)
_kernscope_device_env() {
  local t0=$SECONDS suffix inc
  export OUT=${OUT:-/tmp/kernscope-out}
  mkdir -p "$OUT" /tmp/site
  [ -f .carry/rt.tar.xz ] && compgen -G ".carry/wheels/*.whl" > /dev/null \
    || { echo "device_env: .carry/ is missing: run benchmarks/device_carry.sh here and name .carry in the call's carry"; return 1; }
  tar -C /tmp/site -xJf .carry/rt.tar.xz || { echo "device_env: cannot unpack .carry/rt.tar.xz"; return 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .carry/wheels/*.whl > "$OUT/pip.log" 2>&1 || { echo "device_env: pip failed:"; tail -5 "$OUT/pip.log"; return 1; }
  export PYTHONPATH=$PWD/src:/tmp/site KERNSCOPE_CACHE_DIR=${KERNSCOPE_CACHE_DIR:-/tmp/kcache}
  suffix=$(python3 -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')
  inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  # (the flags pyproject.toml's build gives it: -O3)
  gcc -O3 -shared -fPIC -I"$inc" src/kernscope/load/_xspace.c src/kernscope/load/_kineto.c src/kernscope/load/_sweep.c \
    -o "src/kernscope/load/_xspace$suffix" || { echo "device_env: the C library did not build"; return 1; }
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU (nvidia-smi)"
    echo "cores $(nproc); $(lscpu | grep -m1 'Model name' | sed 's/  */ /g')"
    python3 -c 'import sys, polars, msgspec; print("python", sys.version.split()[0], "polars", polars.__version__, "msgspec", msgspec.__version__)'
    python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' 2>&1 | tail -1
    python3 -c 'from kernscope.load.native import scanner; print("compiled scanner:", scanner() is not None)'
  } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
  grep -q "compiled scanner: True" "$OUT/env.txt" || { echo "device_env: kernscope does not load its C library"; return 1; }
  echo "device_env: ready in $((SECONDS - t0)) s"
}
_kernscope_device_env
