#!/usr/bin/env bash
# One `device` call's GPU checks (issue 22), in priority order, each under its own timeout so
# that a hang or a slow compilation costs only its own step; every step writes its JSON as it
# goes, so what finished comes back. About 7 minutes at most (timeout_s 450):
#
#   device run (timeout_s 450): bash bench/gpu_lease.sh
#
# 1. exactness of every method on `engine: graphs` (CUDA graphs of the eager kernels), both
#    tiny families, fp32 (bench/gpu_exact.py)
# 2. bench/gpu.py on the graphs engine, both pairs: our autoregressive decoding (and its graph
#    replayed alone), the forward-cost curves (the profile), every method's host time per
#    iteration, HF assisted, the predictions. (The first lease of 2026-11-27 ran the models'
#    section on fast and graphs, HF greedy and the Triton kernel: docs/gpu.md.)
# 3. exactness on `engine: compiled` (torch.compile, CUDA-graph trees) of the methods that
#    the 2026-11-26 and first 2026-11-27 leases did not reach, llama family
# Files under $OUT: exact_graphs.json, gpu.json, gpu_profile.json, exact_compiled.json and a
# log per step.
set -u
OUT=${OUT:-/tmp/gpu_lease}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers, triton; print(torch.__version__, transformers.__version__, triton.__version__)"

timeout 100 python3 bench/gpu_exact.py --engines graphs --time-limit-s 75 \
    --out "$OUT/exact_graphs.json" >"$OUT/exact_graphs.log" 2>&1
echo "exact graphs: exit $?"; grep -v Warning "$OUT/exact_graphs.log" | tail -3

timeout 230 python3 bench/gpu.py --engines graphs --pair-engine graphs --models '' \
    --pairs qwen2.5-1.5b/qwen2.5-0.5b,qwen2.5-7b/qwen2.5-0.5b --no-kernel \
    --time-limit-s 190 --out "$OUT/gpu.json" >"$OUT/gpu.log" 2>&1
echo "gpu.py: exit $?"; grep -E "ms/token|ms/iteration|errors|error:" "$OUT/gpu.log" | tail -24

timeout 90 python3 bench/gpu_exact.py --engines compiled --families llama \
    --compiled-methods dynatree,ddtree --time-limit-s 50 \
    --out "$OUT/exact_compiled.json" >"$OUT/exact_compiled.log" 2>&1
echo "exact compiled: exit $?"; grep -v Warning "$OUT/exact_compiled.log" | tail -4
