#!/usr/bin/env bash
# The GPU checks of issue 12, for a session that is lent a GPU (first run on an H100, 2026-11-26: docs/gpu.md).
# About 8 minutes; results under $OUT (8 files). How to run it, from the repository root:
#
#   here:     bash benchmarks/gpu_wheels.sh          # fills the git-ignored .whl/ (textual, pycuda's sdist...)
#   device:   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=540), then give_back
#
# With 15 minutes of device time, a first run with GC_BUDGET=420 (about 6.5 minutes with the machine's
# start) leaves enough for a focused second run after fixing what the first found: GC_BUDGET (seconds),
# GC_SKIP (step names, 'validate:vecadd' for one demo), GC_TESTS (pytest arguments), GC_DEMOS (demos validated).
#
# What it runs, most needed first; each step is capped by its own limit and by the time left, and a
# step that finds less than 15 s left is skipped (summary.txt says so):
#   1. the tests marked `gpu` (tests/gpu/test_gpu_run.py) and the other GPU-path tests    -> pytest.log
#   2. benchmarks/bench_gpu.py: instrumentation slowdown per demo launch (device events) -> bench_gpu.json
#   3. tuiprof validate on the demos vecadd and spmv-u (ncu, caches flushed)           -> validate.log
#   4. tuiprof calibrate --quick, then a report with --arch calibrated                 -> calibrate.log
#   5. while time is left: a whole program built and validated (options after the binary, arguments
#      after --), `tuiprof app.cu --once -- ARGS` end to end, `--cuda pycuda` (its sdist built in the
#      background from the start), more demos validated; a dump of every trace saved  -> validate.log, pycuda.log
#   6. ncu's values per validated demo -> measured.json (copy it to demo_traces/measured.json, with a
#      "mae_bound" per GPU, so that CI checks the prediction against them: tests/demos/test_demo_measured.py)
# summary.txt: GPU, driver, toolkit and package versions, then each step's exit status and seconds;
# rest.tgz: junit XML, install and build logs, bench stderr, the saved traces, the calibrated arch.
set -u
END=$((SECONDS + ${GC_BUDGET:-470})); W=${GC_WORK:-/tmp/gc}; O=${OUT:-$W/out}; S=$O/summary.txt
mkdir -p "$W/cfg" "$W/cache" "$O"
export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=/usr/local/cuda CUDA_ROOT=/usr/local/cuda \
  XDG_CACHE_HOME=$W/cache XDG_CONFIG_HOME=$W/cfg PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
  CUDA_MODULE_LOADING=EAGER PYTHONPATH=$PWD:$W/site GC_W=$W GC_O=$O
T="python3 -m tuiprof"
left() { echo $((END - SECONDS)); }
skipped() { case " ${GC_SKIP:-} " in *" $1 "*) return 0;; esac; return 1; }
step() {  # step NAME CAP LOG CMD...: CMD under min(CAP, time left); its status and seconds in summary.txt
  local n=$1 c=$2 l=$3 t s r; shift 3; t=$(left)
  if skipped "${n%% *}" || skipped "${n// /:}"; then echo "$n SKIPPED (GC_SKIP)" >>"$S"; return 1; fi
  if [ "$t" -lt 15 ]; then echo "$n SKIPPED (out of time)" >>"$S"; return 1; fi
  [ "$c" -gt "$t" ] && c=$t; s=$SECONDS; echo "### $n: $*" >>"$l"
  timeout -k 5 "$c" "$@" >>"$l" 2>&1; r=$?
  echo "$n rc=$r $((SECONDS - s))s (cap ${c}s)" >>"$S"; return $r; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -2
  python3 -c 'import sys, numpy, numba; print(sys.version.split()[0], numpy.__version__, numba.__version__)'
  python3 -m pip list 2>/dev/null | grep -Ei '^(cuda-|numba |pytest-x|pytest-t)'; command -v ncu && ncu --version | tail -1; } >"$S" 2>&1
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.'); CC=${CC:-90}

step install 60 "$W/install.log" python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" \
  .whl/*.whl
skipped pycuda || ( python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$W/site2" .whl/pycuda-*.tar.gz \
    >"$W/pycuda_build.log" 2>&1; echo "pycuda build rc=$?" >>"$W/pycuda_build.log" ) &
BUILD=$!

X=""; python3 -c 'import xdist' 2>/dev/null && X="-n 4"
python3 -c 'import pytest_timeout' 2>/dev/null && X="$X --timeout 100 --timeout-method thread"
step pytest_gpu 190 "$O/pytest.log" python3 -m pytest -p no:cacheprovider -q -rs $X --durations=25 \
  --junitxml "$W/junit.xml" ${GC_TESTS:-tests/gpu/test_gpu_run.py tests/gpu/test_gpu_cli.py tests/gpu/test_gpu_device.py tests/toolchain/test_wholeprog.py}
step bench_gpu 130 "$W/bench.err" python3 benchmarks/bench_gpu.py --gpu-only --repeat 2 --out "$O/bench_gpu.json"

V="--trials 16 --no-sweep"; L=$O/validate.log
val() { step "validate $1" "$2" "$L" $T validate "$1" --trace "$W/val_$1.tptrace" $V; }
val vecadd 75
step calibrate 80 "$O/calibrate.log" $T calibrate --quick &&
  step arch_calibrated 30 "$O/calibrate.log" $T report vecadd --arch calibrated --trials 8 --no-sweep
val spmv-u 60
step build_app 60 "$L" $T build tests/cuda/wholeprog_main.cu -o "$W/app" -arch=sm_$CC &&
  step validate_app 60 "$L" $T validate "$W/app" --kernel gather --trace "$W/val_app.tptrace" $V -- 1048576
step app_once 60 "$L" $T tests/cuda/wholeprog_main.cu --once --kernel gather $V -- 65536
while [ "$(left)" -gt 60 ] && ! skipped pycuda && kill -0 $BUILD 2>/dev/null; do sleep 5; done
cat "$W/pycuda_build.log" >>"$O/pycuda.log" 2>/dev/null
PYTHONPATH=$PYTHONPATH:$W/site2 step pycuda 60 "$O/pycuda.log" $T validate demo_traces/vecadd.cu --cuda pycuda \
  --trace "$W/val_pycuda.tptrace" $V
for d in ${GC_DEMOS:-transpose-naive matmul16 stencil7 bfs}; do [ "$(left)" -gt 30 ] && val $d 55; done
python3 - >>"$L" 2>&1 <<'EOF'
import glob, os
import numpy as np
from tuiprof.trace.io import load_trace
w = os.environ["GC_W"]
T = {p: load_trace(p) for p in sorted(glob.glob(w + "/val_*.tptrace"))}
for p, t in T.items():
    print(os.path.basename(p), t.provenance.backend, t.provenance.gpu, t.n_accesses, "measured timing:",
          t.ctas.measured_timing, "ncu:", t.provenance.measured, t.provenance.generator.get("record_ms"))
a, b = T.get(w + "/val_vecadd.tptrace"), T.get(w + "/val_pycuda.tptrace")
if a and b:
    print("pycuda vs cuda-bindings, same ops and masks:", np.array_equal(a.op, b.op) and np.array_equal(a.mask, b.mask))
# ncu's values per demo, for demo_traces/measured.json (tests/demos/test_demo_measured.py checks the prediction against them)
import json
measured = {}
for p, t in T.items():
    name = os.path.basename(p)[len("val_"):-len(".tptrace")]
    if name not in ("app", "pycuda") and t.provenance.measured:
        e = measured.setdefault(t.provenance.gpu, {"arch": t.provenance.arch, "date": t.provenance.date, "demos": {}})
        e["demos"][name] = t.provenance.measured
open(os.path.join(os.environ["GC_O"], "measured.json"), "w").write(json.dumps(measured, indent=1))
EOF
echo "total ${SECONDS}s" >>"$S"
EXCL="--exclude=cache --exclude=site --exclude=site2 --exclude=app --exclude=app.tuiprof --exclude=out"
tar -czf "$O/rest.tgz" -C "$W" $EXCL . 2>>"$S"
[ "$(stat -c %s "$O/rest.tgz")" -gt 15000000 ] && tar -czf "$O/rest.tgz" -C "$W" --exclude='*.tptrace' $EXCL .
exit 0
