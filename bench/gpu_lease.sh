#!/usr/bin/env bash
# One `device` call's GPU checks (issue 22), in priority order, each under its own timeout so
# that a hang or a slow compilation costs only its own step; every step writes its JSON as it
# goes, so what finished comes back. About 9.5 minutes at most (timeout_s 590):
#
#   device run (timeout_s 590): bash bench/gpu_lease.sh
#
# 1. exactness of every method on `engine: graphs` (CUDA graphs of the eager kernels), both
#    tiny families, fp32 (bench/gpu_exact.py)
# 2. bench/gpu.py on the fast and graphs engines: autoregressive against the bandwidth floor,
#    forward-cost curves (the profile), the pairs' methods on graphs (host time per iteration),
#    HF greedy and assisted, the predictions, the Triton kernel against SDPA
# 3. exactness on `engine: compiled` (torch.compile, CUDA-graph trees), llama family
# Files under $OUT: exact_graphs.json, gpu.json, gpu_profile.json, exact_compiled.json and a
# log per step.
set -u
OUT=${OUT:-/tmp/gpu_lease}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers, triton; print(torch.__version__, transformers.__version__, triton.__version__)"

timeout 120 python3 bench/gpu_exact.py --engines graphs --time-limit-s 85 \
    --out "$OUT/exact_graphs.json" >"$OUT/exact_graphs.log" 2>&1
echo "exact graphs: exit $?"; tail -3 "$OUT/exact_graphs.log"

timeout 360 python3 bench/gpu.py --engines fast,graphs --pair-engine graphs \
    --models qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b \
    --pairs qwen2.5-1.5b/qwen2.5-0.5b,qwen2.5-7b/qwen2.5-0.5b \
    --time-limit-s 300 --out "$OUT/gpu.json" >"$OUT/gpu.log" 2>&1
echo "gpu.py: exit $?"; grep -E "ms/token|errors|error:" "$OUT/gpu.log" | tail -20

timeout 95 python3 bench/gpu_exact.py --engines compiled --families llama --time-limit-s 60 \
    --out "$OUT/exact_compiled.json" >"$OUT/exact_compiled.log" 2>&1
echo "exact compiled: exit $?"; tail -3 "$OUT/exact_compiled.log"
