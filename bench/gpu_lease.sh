#!/usr/bin/env bash
# One `device` call's GPU checks (issue 22), in priority order, each under its own timeout so
# that a hang or a slow compilation costs only its own step; every step writes its JSON as it
# goes, so what finished comes back. About 9 minutes at most (timeout_s 580):
#
#   device run (timeout_s 580): bash bench/gpu_lease.sh
#
# The leases up to 2026-11-28 (docs/gpu.md) ran this script's earlier versions; this one runs
# what they left open:
# 0. our own forward (engine/runtime/lean.py, written after the last lease; its Triton kernels
#    have run only under the CPU interpreter): (a) every method's greedy output on it against
#    autoregressive decoding, tiny llama, fast and graphs; (b) autoregressive decoding on
#    graphs and graphs+lean for the Qwen2.5 7B, 1.5B and 0.5B shapes, then Llama-2-7B if the
#    step's limit leaves time, against the bandwidth floor (goal 1.25x; HF's forward was at
#    1.81x for the Qwen 7B); (c) the 7B step's kernels per token on both forwards
# 1. where the GPU waits in DySpec's and SALF's iterations (10-14% host time against the 10%
#    goal in the 2026-11-28 lease; linear beside them at 4%): bench.gpu.gaps charges each
#    idle gap of the device timeline to the engine code that launched the work on either side
# 2. exactness of every method on `engine: graphs`, both tiny families, fp32, with --learned
#    the NDE selector and the block drafter (toy checkpoints); reads and waits per iteration
# 3. bench.gpu on graphs, both pairs, without HF: host time per iteration of linear, DySpec,
#    SALF and DDTree (grown on the device since 2026-11-28: engine/drafters/ddtree/plan.py; 4.3 ms and
#    one more read per iteration before), pooled over 3 runs each, each beside a
#    synchronised-timing run
# Files under $OUT: exact_lean.json, gpu_lean.json, trace_lean.json, gaps.json, exact_graphs.json,
# gpu.json, their *_profile.json and a log per step. The later steps' limits were cut to fit
# step 0; whatever they leave, a second call runs with their earlier limits (190, 100, 200 s).
set -u
cd "$(dirname "$0")/.."  # the repository root: python3 -m bench.gpu...
OUT=${OUT:-/tmp/gpu_lease}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers, triton; print(torch.__version__, transformers.__version__, triton.__version__)"

timeout 60 python3 -m bench.gpu.exact --engines fast+lean,graphs+lean --families llama \
    --time-limit-s 45 --out "$OUT/exact_lean.json" >"$OUT/exact_lean.log" 2>&1
echo "exact lean: exit $?"; grep -v Warning "$OUT/exact_lean.log" | tail -3

timeout 150 python3 -m bench.gpu --engines graphs,graphs+lean \
    --models qwen2.5-7b,qwen2.5-1.5b,qwen2.5-0.5b,llama-2-7b \
    --pairs '' --no-kernel --no-hf --sizes 1,4,16,64 --contexts 512 --time-limit-s 130 \
    --out "$OUT/gpu_lean.json" >"$OUT/gpu_lean.log" 2>&1
echo "gpu.py lean: exit $?"; grep -A8 "on our forward" "$OUT/gpu_lean.log"

timeout 60 python3 -m bench.gpu.trace --model qwen2.5-7b --engines graphs,graphs+lean \
    --out "$OUT/trace_lean.json" >"$OUT/trace_lean.log" 2>&1
echo "trace lean: exit $?"; grep "per token" "$OUT/trace_lean.log"

timeout 120 python3 -m bench.gpu.gaps --pair qwen2.5-1.5b/qwen2.5-0.5b \
    --methods dyspec,salf,linear:k=4 --tokens 24 --out "$OUT/gaps.json" >"$OUT/gaps.log" 2>&1
echo "gaps: exit $?"; grep -v "Warn\|warn\|USDT\|forward_call" "$OUT/gaps.log" | tail -45

timeout 80 python3 -m bench.gpu.exact --engines graphs --learned --time-limit-s 60 \
    --out "$OUT/exact_graphs.json" >"$OUT/exact.log" 2>&1
echo "exact graphs: exit $?"; grep -v Warning "$OUT/exact.log" | tail -3

timeout 90 python3 -m bench.gpu --engines graphs --pair-engine graphs --models '' \
    --pairs qwen2.5-7b/qwen2.5-0.5b,qwen2.5-1.5b/qwen2.5-0.5b --no-kernel --no-hf \
    --methods linear:k=4,dyspec,salf,ddtree --time-limit-s 75 --out "$OUT/gpu.json" >"$OUT/gpu.log" 2>&1
echo "gpu.py: exit $?"; grep -E "ms/token|ms/iteration|errors|error:" "$OUT/gpu.log" | tail -12
