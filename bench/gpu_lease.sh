#!/usr/bin/env bash
# One `device` call's GPU checks (issues 22 and 48), in priority order, each under its own
# timeout so that a hang or a slow compilation costs only its own step; every step writes its
# JSON as it goes, so what finished comes back. About 9.5 minutes at most (timeout_s 590):
#
#   device run (timeout_s 590): bash bench/gpu_lease.sh
#
# 1. measured speculative speedups on aligned synthetic pairs (engine/synthetic.py; random
#    weights at the published shapes whose greedy tokens agree to a chosen degree, built on the
#    GPU from their names): Qwen2.5-7B / 0.5B at align 0.75 (linear k=4 about 3 tokens per
#    iteration) and 0.9, every method on `graphs` in bf16 against our autoregressive decoding
#    and HF assisted generation, each beside the cost model's prediction from its own
#    iterations and this GPU's curves (bench/cost_model.py; outputs checked against
#    autoregressive decoding). 2. the same for 1.5B / 0.5B at 0.75.
# 3. autoregressive decoding on graphs and graphs+lean for the Qwen2.5 7B, 1.5B, 0.5B and
#    Llama-2-7B shapes against the bandwidth floor (goal 1.25x; HF's forward 1.81x at 7B)
# 4. every method's greedy output on our own forward's kernels (fast+lean, graphs+lean)
# 5. DySpec's and SALF's host share, each idle gap of the device charged to the engine code
#    that launched the work on either side (bench.gpu.gaps; goal <= 10%)
# 6. bench.gpu on graphs, both pairs: host time per iteration of linear, DySpec, SALF and DDTree
#    (grown on the device: engine/drafters/ddtree/plan.py)
# Files under $OUT: synthetic_7b.json, synthetic_1.5b.json, gpu_lean.json, exact_lean.json,
# gaps.json, gpu.json, their *_profile.json and a log per step.
# TINY=1 runs every step at toy sizes (the CPU test, tests/bench/test_gpu_lease.py).
set -u
cd "$(dirname "$0")/.."  # the repository root: python3 -m bench.gpu...
OUT=${OUT:-/tmp/gpu_lease}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
if [ "${TINY:-0}" = 1 ]; then
  T7=synthetic:toy-target D7=synthetic:toy-draft T15=synthetic:toy-draft D15=synthetic:toy-draft@seed=0
  SYN="--n-prompts 1 --max-new-tokens 8 --prompt-tokens 16 --sizes 1,2,4 --contexts 0 --repeats 1"
  SYN="$SYN --methods autoregressive linear:k=4 dynatree"
  GPU="--tiny --device cpu" EXACT="--device cpu --engines fast --new-tokens 8" LIMIT=0.25
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  T7=synthetic:qwen2.5-7b D7=synthetic:qwen2.5-0.5b T15=synthetic:qwen2.5-1.5b D15=$D7
  SYN="--n-prompts 4 --max-new-tokens 64 --prompt-tokens 128 --sizes 1,2,4,8,16,32,64,128"
  SYN="$SYN --contexts 128,512 --repeats 3 --dtype auto --engine graphs"
  GPU="" EXACT="--engines fast+lean,graphs+lean --families llama" LIMIT=1
fi
$PY -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
lim() { awk -v s="$1" -v f="$LIMIT" 'BEGIN { printf "%d", s * f + 1 }'; }

timeout "$(lim 190)" $PY bench/cost_model.py --target "$T7" --draft "$D7" --aligns 0.75,0.9 \
    $SYN --hf-assisted --time-limit-s "$(lim 165)" --out "$OUT/synthetic_7b.json" \
    >"$OUT/synthetic_7b.log" 2>&1
echo "synthetic 7b: exit $?"; grep "^|" "$OUT/synthetic_7b.log"

timeout "$(lim 100)" $PY bench/cost_model.py --target "$T15" --draft "$D15" --aligns 0.75 \
    $SYN --hf-assisted --time-limit-s "$(lim 80)" --out "$OUT/synthetic_1.5b.json" \
    >"$OUT/synthetic_1.5b.log" 2>&1
echo "synthetic 1.5b: exit $?"; grep "^|" "$OUT/synthetic_1.5b.log"

timeout "$(lim 110)" $PY -m bench.gpu $GPU --engines graphs,graphs+lean \
    --models qwen2.5-7b,qwen2.5-1.5b,qwen2.5-0.5b,llama-2-7b \
    --pairs '' --no-kernel --no-hf --sizes 1,4,16,64 --contexts 512 --time-limit-s "$(lim 95)" \
    --out "$OUT/gpu_lean.json" >"$OUT/gpu_lean.log" 2>&1
echo "gpu.py lean: exit $?"; grep -A8 "on our forward" "$OUT/gpu_lean.log"

timeout "$(lim 60)" $PY -m bench.gpu.exact $EXACT --time-limit-s "$(lim 45)" \
    --out "$OUT/exact_lean.json" >"$OUT/exact_lean.log" 2>&1
echo "exact lean: exit $?"; grep -v Warning "$OUT/exact_lean.log" | tail -3

timeout "$(lim 70)" $PY -m bench.gpu.gaps $GPU --pair qwen2.5-1.5b/qwen2.5-0.5b \
    --methods dyspec,salf,linear:k=4 --tokens 24 --out "$OUT/gaps.json" >"$OUT/gaps.log" 2>&1
echo "gaps: exit $?"; grep -v "Warn\|warn\|USDT\|forward_call" "$OUT/gaps.log" | tail -45

timeout "$(lim 50)" $PY -m bench.gpu $GPU --engines graphs --pair-engine graphs --models '' \
    --pairs qwen2.5-7b/qwen2.5-0.5b,qwen2.5-1.5b/qwen2.5-0.5b --no-kernel --no-hf \
    --methods linear:k=4,dyspec,salf,ddtree --time-limit-s "$(lim 40)" --out "$OUT/gpu.json" \
    >"$OUT/gpu.log" 2>&1
echo "gpu.py: exit $?"; grep -E "ms/token|ms/iteration|errors|error:" "$OUT/gpu.log" | tail -12
