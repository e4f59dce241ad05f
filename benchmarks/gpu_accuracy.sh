#!/usr/bin/env bash
# The accuracy session of issue 24 for a lent GPU (about 10 minutes of one H100; results under $OUT).
# From the repository root:
#
#   here:     bash benchmarks/gpu_accuracy.sh --dry-run        # the plan: every step, its cap, its command
#   here:     bash benchmarks/gpu_wheels.sh                   # only for the last step (per-op: textual...)
#   device:   run(command="bash benchmarks/gpu_accuracy.sh", carry=[".whl"], timeout_s=600), then give_back
#   here:     python benchmarks/fold_measured.py OUT/results.json   # folds ncu's values into demo_traces/measured.json
#
# GA_BUDGET (seconds for the steps, default 540: with the machine's start that is about 11 minutes of the 15;
# GA_TOTAL, default 580, caps the whole script so that it ends inside run's 600 s: setup time comes off the steps),
# GA_SKIP (step names or prefixes, space-separated: "ncu-demo per-op"), GA_GPU (the GPU's name for the fold
# when the session could not read it), GA_ARGS (more arguments for the driver,
# e.g. --all-spmv). Steps, in priority order, each under its own cap and the time left (benchmarks/gpu_accuracy.py):
#   1. every metric name checked against `ncu --query-metrics` (a missing one is left out, never fatal)
#   2. cudaLimitMaxL2FetchGranularity: the default, then set to 32, 64 and 128 B and read back
#   3. ncu on the micro-kernels of benchmarks/micro/ at GPU size: a sector then its neighbour; a pointer chase
#      over 25 and 50 MiB (the two L2 partitions: ltcfabric counters); a read with and without __ldcs; stores
#      partly covering a sector; an L1 sweep at SpMV's launch shape (launch__shared_mem_config_size: the carve-out)
#   3b. the SM-to-L2-partition map (benchmarks/micro/partition_map.cu): SM 0 warms a buffer, each SM s reads it;
#      ncu's fabric lookups of each read (caches kept), folded into measured.json's sm_partition
#   4. the neighbour-sector kernel with the granularity at 32, 64, 128 B (dram__sectors_read per L2 read miss)
#   5. ncu's source page (SourceCounters, cuda,sass) of vecadd, spmv-u, matmul16: per-op data for
#      `tuiprof validate DEMO --source-csv FILE` here
#   6. the SpMV demos with the granularity at 32, 64, 128 B
#   7. ncu on every demo (caches flushed): the headline ratios and the research counters
#   8. `tuiprof validate vecadd --per-op` end to end
# Then fold_measured.py writes $OUT/measured.json (this session's values folded into the shipped file: diff it,
# then fold here for real). Files: summary.txt, results.json, steps.log, measured.json, csv.tgz (ncu/*.csv: untar it
# beside results.json to fold again), rest.tgz (reports, logs).
set -u
DRY=0; [ "${1:-}" = "--dry-run" ] && DRY=1
W=${GA_WORK:-/tmp/ga}; O=${OUT:-$W/out}; S=$O/summary.txt; BUDGET=${GA_BUDGET:-540}
export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=/usr/local/cuda XDG_CACHE_HOME=$W/cache XDG_CONFIG_HOME=$W/cfg \
  PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD:$W/site
SKIP=""; for s in ${GA_SKIP:-}; do SKIP="$SKIP --skip $s"; done
if [ $DRY = 1 ]; then
  echo "dry run: nothing runs on a GPU. On the device machine this script would:"
  echo "  mkdir -p $W/cfg $W/cache $O; write $S (nvidia-smi, nvcc, ncu --version, packages)"
  echo "  python3 -m pip install --no-index --no-deps --target $W/site .whl/*.whl   (when .whl/ is carried)"
  CC=9.0
  echo "  python3 benchmarks/gpu_accuracy.py --out $O --budget $BUDGET --cc $CC$SKIP ${GA_ARGS:-}"
  echo "  python3 benchmarks/fold_measured.py $O/results.json --into demo_traces/measured.json --out $O/measured.json"
  echo "  tar -czf $O/rest.tgz (the .ncu-rep reports, logs)"
  echo "the driver's plan:"
  python3 benchmarks/gpu_accuracy.py --out "$O" --budget "$BUDGET" --cc $CC $SKIP ${GA_ARGS:-} --dry-run
  exit $?
fi
mkdir -p "$W/cfg" "$W/cache" "$O"
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -2; command -v ncu && ncu --version | tail -1
  python3 -c 'import sys, numpy; print(sys.version.split()[0], numpy.__version__)'
  python3 -m pip list 2>/dev/null | grep -Ei '^(cuda-|numba )'; } >"$S" 2>&1
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' '); CC=${CC:-9.0}
ls .whl/*.whl >/dev/null 2>&1 && timeout 60 python3 -m pip install -q --no-index --no-deps --no-compile \
  --target "$W/site" .whl/*.whl >>"$S" 2>&1
LEFT=$(( ${GA_TOTAL:-580} - SECONDS - 20 )); [ "$LEFT" -lt "$BUDGET" ] && BUDGET=$LEFT  # setup time comes off it
echo "steps budget ${BUDGET}s after ${SECONDS}s of setup" >>"$S"
timeout -k 5 $((BUDGET + 20)) python3 benchmarks/gpu_accuracy.py --out "$O" --budget "$BUDGET" --cc "$CC" $SKIP \
  ${GA_ARGS:-} >>"$S" 2>&1
echo "driver rc=$? at ${SECONDS}s" >>"$S"
timeout 30 python3 benchmarks/fold_measured.py "$O/results.json" --into demo_traces/measured.json \
  --out "$O/measured.json" ${GA_GPU:+--gpu "$GA_GPU"} >>"$S" 2>&1
echo "fold rc=$? total ${SECONDS}s" >>"$S"
# The device tool brings back 8 files at most: ncu's CSVs (40 and more) travel in one archive, the
# reports in another that is dropped when too large (the CSVs were lost once, left loose in ncu/).
tar -czf "$O/csv.tgz" -C "$O" $(cd "$O" && ls -d ncu/*.csv 2>/dev/null) 2>>"$S"
tar -czf "$O/rest.tgz" -C "$O" --exclude=rest.tgz $(cd "$O" && ls -d ncu/*.ncu-rep *.tptrace *.log 2>/dev/null) 2>>"$S"
[ -f "$O/rest.tgz" ] && [ "$(stat -c %s "$O/rest.tgz")" -gt 15000000 ] && rm -f "$O/rest.tgz"
rm -rf "$O/ncu"
exit 0
