"""bench/host_time.py: its host-read counter, and an end-to-end run on the tiny pair."""

import json

import torch

from bench import host_time


def test_host_reads_counts_python_reads_of_tensor_values():
    t = torch.arange(6)
    with host_time.HostReads() as counter:
        int(t[2]), bool(t.all()), t.tolist(), t[1].item(), float(t[3]), [0, 1, 2][t[1]]
        t + 1, t.sum(), t[1:3], t[t[:2]]  # device work only: no reads
        t[t > 2], t.nonzero(), t.unique()  # sized by the values: the host waits for them
    assert sum(counter.counts.values()) == 9


def test_on_a_gpu_reads_of_host_tensors_are_free():
    """On a GPU run a read of a tensor kept on the host (prompt lookup's n-gram match) is no
    synchronisation; on a CPU run every tensor is a host tensor, so each read counts."""
    x = torch.arange(6)
    for device, want in ((None, 3), (torch.device("cpu"), 3), (torch.device("cuda"), 0)):
        with host_time.HostReads(device=device) as reads:
            x.tolist()
            (x > 2).nonzero()
            x[x > 2]
        assert sum(reads.counts.values()) == want, (device, reads.counts)


def test_device_copies_count_only_towards_the_host():
    """A dtype cast of a device tensor is no read (on the H100 the old rule counted every
    RMSNorm's `.to(float32)` inside the model); a copy to the CPU is. The meta device stands
    in for a GPU: its copies to the CPU fail after they are counted."""
    x = torch.zeros(3, device="meta")
    with host_time.HostReads() as counter:
        x.to(torch.float16), x.to(dtype=torch.float16), x.to("meta"), x.to(x)
        for copy in (lambda: x.to("cpu"), lambda: x.cpu(), lambda: x.to(torch.zeros(1))):
            try:
                copy()
            except (NotImplementedError, RuntimeError):
                pass
    assert counter.counts == {"to": 2, "cpu": 1}


def test_a_pair_read_counts_once_as_on_a_gpu():
    """engine/transfer.py read_pair reads CPU tensors in two plain calls; a GPU reads the pair
    in one synchronisation, which is what the counter stands for."""
    from engine.transfer import read_pair

    values, tokens = torch.rand(2, 3), torch.arange(6).view(2, 3)
    with host_time.HostReads() as counter:
        got = read_pair(values, tokens)
        values.tolist()  # a plain read still counts
    assert counter.counts == {"read_pair": 1, "tolist": 1}
    assert got == (values.tolist(), tokens.tolist())
    assert read_pair(values, tokens) == got  # the counter is gone after the block


def test_vocab_ops_are_timed_outside_model_forwards_only(llama_pair):
    from engine.runtime import cached_model

    vocab = llama_pair.target.model.get_output_embeddings().weight.shape[0]
    lm = cached_model(llama_pair.target.model, "fast", 64)
    with host_time.vocab_time(vocab) as mode:
        logits = lm.extend(list(range(5, 20)))  # the LM head's [1, V] inside the forward
        assert mode.vocab_s == 0.0
        torch.randn(3, 7).softmax(-1)  # not vocabulary-sized
        assert mode.vocab_s == 0.0
        top = lm.step(torch.tensor([7]), torch.tensor([15]), top=4)  # its top-k, inside
        assert mode.vocab_s == 0.0 and top[0].shape == (1, 4)
        logits.softmax(-1).topk(4)
    assert mode.vocab_s > 0.0


def test_host_time_smoke(tmp_path, capsys):
    out = tmp_path / "h.json"
    host_time.main(
        ["--n-prompts", "1", "--max-new-tokens", "8", "--methods", "linear:k=2", "dynatree"]
        + ["--out", str(out)]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["linear:k=2", "dynatree"]
    for r in rows:
        assert r["outputs_differing"] == 0
        assert r["host_ms_eager"] > 0 and r["host_ms_fast"] > 0
        assert r["host_reads_fast"] >= 1  # at least the accept decision
        assert 0 <= r["vocab_ops_ms_fast"] < r["host_ms_fast"]
        assert r["other_host_ms_fast"] == r["host_ms_fast"] - r["vocab_ops_ms_fast"]
    assert "| linear:k=2 |" in capsys.readouterr().out
