"""Bad inputs in a sweep file's or a command's values (tests/reliability/cases.py): sampling,
prompt ids, devices and seeds, the vocabulary, names, and the caps."""

from __future__ import annotations

import json

from tests.reliability.harness import BOTH, GEN, SUBMIT, Case, Ctx, sweep

U64 = 2**64


def _long_model_folder(ctx: Ctx) -> None:
    d = ctx.work / ("m" * 120) / ("n" * 120)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 260}))
    (d / "tokenizer.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"\0" * 8)
    ctx.spec.write_text(sweep(target=str(d)))


CASES: list[Case] = [
    # -- sampling values
    Case(
        "temperature-nan",
        SUBMIT,
        "sampling.temperature: must be a finite number, got nan",
        spec=sweep(extra="sampling: {temperature: .nan}\n"),
        backends=BOTH,
    ),
    Case(
        "temperature-inf",
        SUBMIT,
        "sampling.temperature: must be a finite number, got inf",
        spec=sweep(extra="sampling: {temperature: .inf}\n"),
    ),
    Case(
        "temperature-negative",
        SUBMIT,
        "sampling.temperature[1]: must be >= 0.0, got -0.5",
        spec=sweep(extra="sampling: {temperature: [0.0, -0.5]}\n"),
        backends=BOTH,
    ),
    Case(
        "top-p-zero",
        SUBMIT,
        "sampling.top_p: must be > 0.0, got 0",
        spec=sweep(extra="sampling: {top_p: 0}\n"),
    ),
    Case(
        "top-p-above-one",
        SUBMIT,
        "sampling.top_p: must be <= 1.0, got 1.5",
        spec=sweep(extra="sampling: {top_p: 1.5}\n"),
        backends=BOTH,
    ),
    Case(
        "sampling-point-top-p-above-one",
        SUBMIT,
        "sampling.points[1].top_p: must be <= 1.0, got 1.5",
        spec=sweep(
            extra="sampling: {points: [{temperature: 1.0, top_p: 0.9}, "
            "{temperature: 1.0, top_p: 1.5}]}\n"
        ),
        backends=BOTH,
    ),
    Case(
        "sampling-point-twice",
        SUBMIT,
        "sampling.points[0]: temperature 0, top_p 1 is given twice",
        spec=sweep(extra="sampling: {temperature: 0.0, points: [{temperature: 0.0}]}\n"),
    ),
    Case(
        "top-p-nan",
        SUBMIT,
        "sampling.top_p: must be a finite number, got nan",
        spec=sweep(extra="sampling: {top_p: .nan}\n"),
    ),
    Case(
        "generate-temperature-nan",
        (*GEN, "--temperature", "nan"),
        "'--temperature': nan is not a finite number",
    ),
    Case(
        "generate-temperature-negative",
        (*GEN, "--temperature", "-1"),
        "--temperature': -1.0 is not in the range x>=0",
    ),
    Case("generate-top-p-nan", (*GEN, "--top-p", "nan"), "'--top-p': nan is not a finite number"),
    Case("generate-top-p-zero", (*GEN, "--top-p", "0"), "--top-p': 0.0 is not in the range"),
    Case(
        "method-param-nan",
        (*GEN, "--method", "dynatree", "--param", "adjust_step=nan"),
        "parameter 'adjust_step': expected a finite number, got 'nan'",
    ),
    Case(
        "sequoia-profile-wrong-shape",
        SUBMIT,
        "methods[0].params.profile: [[0.5, 0.2]] is none of: expected a number",
        spec=sweep(methods="  - name: sequoia\n    params: {profile: [[0.5, 0.2]]}\n"),
    ),
    Case(
        "sequoia-profile-not-probabilities",
        (*GEN, "--method", "sequoia", "--param", "profile=0.9,0.3"),
        "profile must be measured, fixed, or a non-empty list of probabilities",
    ),
    Case(
        "sequoia-measured-profile-alone",
        (*GEN, "--method", "sequoia"),
        "profile 'measured' is measured by a sweep's acceptance trial",
    ),
    # -- prompt ids, devices, seeds
    Case(
        "prompt-ids-out-of-range",
        ("generate", "--prompt-ids", "1,99999", "--max-new-tokens", "2"),
        "--prompt-ids: 99999 is not a token id of tiny-llama (vocabulary 0..259)",
    ),
    Case(
        "prompt-ids-negative",
        ("generate", "--prompt-ids", "5,-3", "--max-new-tokens", "2"),
        "--prompt-ids: -3 is not a token id of tiny-llama (vocabulary 0..259)",
    ),
    Case(
        "prompt-ids-not-integers",
        ("generate", "--prompt-ids", "1,x", "--max-new-tokens", "2"),
        "--prompt-ids expects comma-separated integers",
    ),
    Case(
        "generate-device-bogus",
        (*GEN, "--device", "bogus"),
        "device 'bogus' is not one of auto, cpu, cuda, cuda:N, mps",
    ),
    Case(
        "generate-device-cuda-without-cuda",
        (*GEN, "--device", "cuda"),
        "device 'cuda': CUDA is not available on this machine",
        needs="no-cuda",
    ),
    Case(
        "sweep-device-cuda-without-cuda",
        SUBMIT,
        "device 'cuda': CUDA is not available on this machine",
        spec=sweep(extra="device: cuda\n"),
        needs="no-cuda",
        backends=BOTH,
    ),
    Case(
        "sweep-device-bogus",
        SUBMIT,
        "device: 'bogus' is not one of auto, cpu, cuda, cuda:N, mps",
        spec=sweep(extra="device: bogus\n"),
    ),
    # -- hardware types (a sweep's hardware:)
    Case(
        "sweep-hardware-twice",
        SUBMIT,
        "hardware[1]: H100 is listed twice (types compare without case)",
        spec=sweep(extra="hardware: [H100, h100]\n"),
    ),
    Case(
        "sweep-hardware-not-a-type",
        SUBMIT,
        "hardware: 'gpu' is not a hardware type: name cpu, or a GPU type",
        spec=sweep(extra="hardware: gpu\n"),
    ),
    Case(
        "sweep-hardware-empty",
        SUBMIT,
        "hardware: empty list (give at least one entry)",
        spec=sweep(extra="hardware: []\n"),
    ),
    Case(
        "sweep-hardware-gpu-on-device-cpu",
        SUBMIT,
        "device: 'cpu' cannot run hardware H100; a sweep with `hardware: H100` runs on cuda",
        spec=sweep(extra="device: cpu\nhardware: [cpu, H100]\n"),
        backends=BOTH,
    ),
    Case(
        "seed-above-64-bit",
        SUBMIT,
        f"seed: must be <= {U64 - 1}, got {U64}",
        spec=sweep(extra=f"seed: {U64}\n"),
        backends=BOTH,
    ),
    Case(
        "seed-plus-repeats-above-64-bit",
        SUBMIT,
        f"seed + repeats - 1 must be <= {U64 - 1}",
        spec=sweep(extra=f"seed: {U64 - 1}\nrepeats: 2\n"),
    ),
    Case("seed-negative", SUBMIT, "seed: must be >= 0, got -1", spec=sweep(extra="seed: -1\n")),
    Case(
        "generate-seed-above-64-bit",
        (*GEN, "--seed", str(U64)),
        f"--seed': {U64} is not in the range 0<=x<={U64 - 1}",
    ),
    # -- the vocabulary
    Case(
        "branch-above-vocabulary",
        SUBMIT,
        "branch=300 gives a node 300 children but the vocabulary of tiny-llama has 260 tokens",
        spec=sweep(methods="  - name: fixed_tree\n    grid: {branch: [2, 300], budget: [400]}\n"),
        backends=BOTH,
    ),
    Case(
        "top-k-above-vocabulary",
        SUBMIT,
        "top_k=1000 gives a node 1000 children but the vocabulary of tiny-llama has 260 tokens",
        spec=sweep(methods="  - name: beam\n    params: {top_k: 1000}\n"),
    ),
    Case(
        "generate-branch-above-vocabulary",
        (*GEN, "--method", "fixed_tree", "--param", "branch=261", "--param", "budget=300"),
        "branch=261 gives a node 261 children but the vocabulary of tiny-llama has 260 tokens",
    ),
    # -- names
    Case(
        "sweep-name-too-long",
        SUBMIT,
        "name: longer than 200 characters (250)",
        spec=sweep(name="n" * 250),
        backends=BOTH,
    ),
    Case(
        "model-path-too-long",
        SUBMIT,
        "pairs[0].target: longer than 200 characters",
        spec=sweep(),
        prepare=_long_model_folder,
        backends=BOTH,
    ),
    Case(
        "sweep-name-escape-sequence",
        SUBMIT,
        "name: control character '\\x1b' at position 2",
        spec=sweep(name='"ok\\e[2Jgone"'),
        backends=BOTH,
    ),
    Case(
        "sweep-name-newline",
        SUBMIT,
        "name: control character '\\n' at position 1",
        spec=sweep(name='"a\\nb"'),
    ),
    Case(
        "sweep-name-bidi-override",
        SUBMIT,
        "name: control character '\\u202e' at position 3",
        spec=sweep(name='"abc\\u202Efdp.exe"'),
    ),
    Case("sweep-name-blank", SUBMIT, "name: must not be empty", spec=sweep(name='"  "')),
    Case(
        "profile-context-past-positions",
        SUBMIT,
        "profile: contexts plus sizes need 100000002 positions; tiny-llama has 4096",
        spec=sweep(extra="profile: {contexts: [99999999], sizes: [1, 2]}\n"),
    ),
    # -- options of the other executor
    Case(
        "local-executor-with-ray-options",
        (*SUBMIT, "--actors", "2", "--address", "auto"),
        "--address, --actors set up the Ray executor; --executor local runs the trials one at "
        "a time in this process (leave them out, or use --executor ray)",
        spec=sweep(),
    ),
    # -- caps (defaults: sweep `limits:` block, README "Sweeps")
    Case(
        "grid-of-ten-million",
        ("submit", "{spec}", "--db", "{db}", "--executor", "local"),
        "the sweep expands to 10000000 trials before de-duplication, "
        "more than limits.max_trials (100000)",
        spec=sweep(
            extra="repeats: 1000\n",
            methods="  - name: fixed_tree\n    grid:\n"
            f"      depth: {list(range(1, 101))}\n      budget: {list(range(1, 101))}\n",
        ),
        runner="proc",
        timeout=120,
    ),
    Case(
        "dyspec-budget-1e8",
        SUBMIT,
        "draft trees of up to 100000000 nodes, more than limits.max_tree_nodes (4096)",
        spec=sweep(methods="  - name: dyspec\n    params: {budget: 100000000}\n"),
        runner="proc",
        timeout=120,
        backends=BOTH,
    ),
    Case(
        "linear-k-huge",
        SUBMIT,
        "draft trees of up to 100000000000000000000 nodes",
        spec=sweep(methods="  - name: linear\n    grid: {k: [100000000000000000000]}\n"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "max-new-tokens-huge",
        SUBMIT,
        "max_new_tokens: must be <= 8192 (limits.max_new_tokens), got 1000000000",
        spec=sweep(mnt="1000000000"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "method-max-new-tokens-huge",
        SUBMIT,
        "grid.max_new_tokens[1]: must be <= 8192 (limits.max_new_tokens), got 100000",
        spec=sweep(methods="  - name: linear\n    grid: {max_new_tokens: [8, 100000]}\n"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "generate-max-new-tokens-huge",
        ("generate", "--prompt", "Hi", "--max-new-tokens", "100000000"),
        "--max-new-tokens: 100000000 is more than the cap of 8192 new tokens",
        runner="proc",
        timeout=120,
    ),
    Case(
        "generate-node-budget-huge",
        (*GEN, "--method", "dyspec", "--param", "budget=100000000"),
        "draft trees of up to 100000000 nodes, more than the cap of 4096",
        runner="proc",
        timeout=120,
    ),
    Case(
        "max-new-tokens-negative",
        SUBMIT,
        "max_new_tokens: must be >= 1, got -5",
        spec=sweep(mnt="-5"),
    ),
    Case(
        "prompts-above-cap",
        SUBMIT,
        "dataset.prompts: must be <= 3 (limits.max_prompts), got 5",
        spec=sweep(
            extra="limits: {max_prompts: 3}\n",
            dataset="{name: spec_bench, prompts: 5, prompt_tokens: 8}",
        ),
    ),
    Case(
        "prompts-above-default-cap",
        SUBMIT,
        "dataset.prompts: must be <= 2000 (limits.max_prompts), got 1000000",
        spec=sweep(dataset="{name: spec_bench, prompts: 1000000}"),
    ),
    Case(
        "warmup-huge",
        SUBMIT,
        "warmup: must be <= 100 (limits.max_warmup), got 1000000000000",
        spec=sweep(extra="warmup: 1000000000000\n"),
        runner="proc",
        timeout=120,
    ),
    Case(
        "limits-unknown-key",
        SUBMIT,
        "limits.max_gpus: unknown key",
        spec=sweep(extra="limits: {max_gpus: 2}\n"),
    ),
    Case(
        "limits-not-a-number",
        SUBMIT,
        "limits.max_trials: expected an integer, got 'lots'",
        spec=sweep(extra="limits: {max_trials: lots}\n"),
    ),
]
