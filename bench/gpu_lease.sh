#!/usr/bin/env bash
# One `device` call's GPU checks (issue 22), in priority order, each under its own timeout so
# that a hang or a slow compilation costs only its own step; every step writes its JSON as it
# goes, so what finished comes back. About 9.5 minutes at most (timeout_s 580):
#
#   device run (timeout_s 580): bash bench/gpu_lease.sh
#
# The leases of 2026-11-27 (docs/gpu.md) ran this script's earlier versions; this one runs what
# they left open:
# 1. exactness of every method on `engine: graphs`, both tiny families, fp32, with --learned
#    the NDE selector and the block drafter (toy checkpoints); per iteration the host reads,
#    the explicit waits for the device (one per generation since session 8: engine/clock.py)
#    and the device ops launched outside graph replays
# 2. bench/gpu.py on graphs, both pairs, without HF (measured in three leases): each method's
#    host time per iteration pooled over 3 runs, each beside a run timed the pre-session-8 way
#    (a synchronisation at every stamp); session 8 measured DySpec and SALF once per call, at
#    7-14% against the 10% goal
# 3. where the 7B model's `graphs` step spends its GPU time (1.9x the bandwidth floor), and
#    the same on `compiled` (bench/gpu_trace.py; the 0.5B model's trace is in docs/gpu.md)
# 4. exactness on `engine: compiled` of DynaTree and DDTree (ran out of 90 s twice)
# Files under $OUT: exact_graphs.json, gpu.json, gpu_profile.json, trace.json,
# exact_compiled.json and a log per step (8 files at most come back: the logs of steps 1 and 4
# go to one file).
set -u
OUT=${OUT:-/tmp/gpu_lease}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers, triton; print(torch.__version__, transformers.__version__, triton.__version__)"

timeout 100 python3 bench/gpu_exact.py --engines graphs --learned --time-limit-s 75 \
    --out "$OUT/exact_graphs.json" >>"$OUT/exact.log" 2>&1
echo "exact graphs: exit $?"; grep -v Warning "$OUT/exact.log" | tail -3

timeout 230 python3 bench/gpu.py --engines graphs --pair-engine graphs --models '' \
    --pairs qwen2.5-7b/qwen2.5-0.5b,qwen2.5-1.5b/qwen2.5-0.5b --no-kernel --no-hf \
    --time-limit-s 200 --out "$OUT/gpu.json" >"$OUT/gpu.log" 2>&1
echo "gpu.py: exit $?"; grep -E "ms/token|ms/iteration|errors|error:" "$OUT/gpu.log" | tail -16

timeout 150 python3 bench/gpu_trace.py --model qwen2.5-7b --engines graphs,compiled \
    --out "$OUT/trace.json" >"$OUT/trace.log" 2>&1
echo "trace: exit $?"; grep -v "USDT\|Warning" "$OUT/trace.log" | head -30

timeout 90 python3 bench/gpu_exact.py --engines compiled --families llama \
    --compiled-methods dynatree,ddtree --time-limit-s 60 \
    --out "$OUT/exact_compiled.json" >>"$OUT/exact.log" 2>&1
echo "exact compiled: exit $?"; grep -v Warning "$OUT/exact.log" | tail -4
