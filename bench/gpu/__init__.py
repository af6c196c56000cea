"""The GPU benchmarks (issue 22): random-weight models with the published shapes, run on the
device at hand; needs only torch, transformers and triton (no Ray, no database, no hub).

Programs (run from the repository root; bench/gpu_lease.sh runs them in one `device` call):

    python -m bench.gpu          decoding against the bandwidth floor, verification cost per
                                 tree size, host time per iteration, HF assisted, predicted
                                 speedups, the Triton kernel; writes the device's profile
    python -m bench.gpu.exact    greedy exactness of every method on every engine path
    python -m bench.gpu.trace    device kernels per token of one model's decoding step
    python -m bench.gpu.gaps     where the GPU idles in a method's iterations

Modules, each importing only those after it: sections.py (one function per measurement of
`python -m bench.gpu`, whose entry is __main__.py), predict.py (the method comparison by
prediction from a CPU acceptance record), profiling.py (trace's and gaps' shared options and
profiled generation), models.py (the random-weight models, the bandwidth floor, the pairs and
prompts our engine runs on them), report.py (the Markdown tables, one-line errors), device.py
(synchronisation, the device's name, torch.compile's graph limits).
"""
