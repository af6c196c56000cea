"""DDTree's block-diffusion drafter (engine/drafters/ddtree/block.py, at decoding time
block_context.py): one forward gives the L marginals of Sec. 3 from the target's context
features; training and decoding see the same (context before the bonus token, bidirectional
block), on every engine path; `orch train block-drafter` writes a
checkpoint that round-trips and resumes exactly; greedy DDTree with it is the target's greedy
decoding (it changes speed, never output)."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from engine import checkpoint
from engine.config import ConfigError
from engine.decode import generate
from engine.draft import DecodeState
from engine.drafters.ddtree.block import (
    KIND,
    BlockDrafter,
    BlockDrafterConfig,
    block_loss,
    load_drafter,
    target_parts,
)
from engine.drafters.ddtree.block_context import BlockContext
from engine.methods import resolve_method
from engine.sampling import Warp
from engine.train.block_drafter_train import TrainConfig, train
from orchestrator.cli import main

TOY = ["--data", "humaneval", "--holdout", "4", "--sequences", "2", "--seq-len", "24"]
TOY += ["--batch", "2", "--anchors", "3", "--block-size", "4", "--heads", "2"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("orch_home")
        mp.setenv("ORCH_HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def trained(home):
    """A toy checkpoint per tiny family, trained through the CLI."""
    out = {}
    for family in ("llama", "neox"):
        name = f"bd-{family}"
        r = CliRunner().invoke(
            main,
            ["train", "block-drafter", "--name", name, "--target", f"tiny-{family}", "--steps", "3"]
            + TOY,
        )
        assert r.exit_code == 0, r.output
        assert f"sha256 {checkpoint.find(name).sha256}" in r.output
        out[family] = name
    return out


def random_drafter(model, block_size=4) -> BlockDrafter:
    mc = model.config
    cfg = BlockDrafterConfig(mc.hidden_size, mc.vocab_size, (1, 2), block_size, heads=2)
    torch.manual_seed(0)
    return BlockDrafter(cfg).eval()


def test_one_forward_gives_l_marginals_matching_training(llama_pair):
    """Shapes; one drafter forward per round; each q_i sums to 1; and the decoding marginals
    at bonus position a, seeing the features of positions < a, are the ones the batched
    training forward scores for anchor a (same masks and positions)."""
    model = llama_pair.target.model
    drafter = random_drafter(model)
    gen = torch.Generator().manual_seed(1)
    t, f = 20, drafter.cfg.features
    feats = torch.randn(1, t, f, generator=gen)  # [B, T, F]
    tokens = torch.randint(0, 256, (1, t), generator=gen)
    labels = torch.randint(0, 256, (1, t), generator=gen)
    embed, head = target_parts(model)
    calls = []
    drafter.register_forward_hook(lambda *a: calls.append(1))
    for a in (1, 7, 16):
        with torch.no_grad():
            loss, acc = block_loss(drafter, embed, head, feats, tokens, labels, torch.tensor([[a]]))
        assert acc.shape == (4,)
        ctx = BlockContext(drafter, model)
        ctx.extend(feats[0, :a])
        state = DecodeState(prefix_len=a, root_token=int(tokens[0, a]), warp=Warp(0.0), remaining=9)
        calls.clear()
        q = ctx.block_marginals(state, 4)  # [L, V]
        assert len(calls) == 1 and q.shape == (4, model.config.vocab_size)
        assert torch.allclose(q.sum(-1), torch.ones(4), atol=1e-5) and bool((q >= 0).all())
        nll = -torch.log(q[torch.arange(4), labels[0, a : a + 4]]).mean()
        assert torch.allclose(nll, loss, atol=1e-4), (a, nll, loss)
        # a shorter block near the end of a generation: the first rows of the same forward
        assert torch.allclose(ctx.block_marginals(state, 3), q[:3])
    with pytest.raises(ConfigError, match="drafts 4 positions"):
        ctx.block_marginals(state, 5)


def test_train_writes_a_checkpoint_that_round_trips(trained, llama_pair):
    ckpt, state = checkpoint.load(trained["llama"], KIND)
    assert ckpt.done and ckpt.step == 3 and ckpt.config["target"] == "tiny-llama"
    assert ckpt.config["drafter"]["block_size"] == 4
    drafter = load_drafter(trained["llama"], llama_pair.target.model)
    for k, v in drafter.state_dict().items():
        assert torch.equal(v, state["model"][k]), k
    assert checkpoint.describe(trained["llama"])["sha256"] == ckpt.sha256
    with pytest.raises(ConfigError, match="trained for target 'tiny-llama'"):
        load_drafter(trained["llama"], _neox())


def _neox():
    from engine.models import load_model

    return load_model("tiny-neox").model


def test_resume_continues_exactly(home):
    """Interrupted after its step-2 save, resumed to step 4: the same weights as one run."""
    args = dict(
        target="tiny-llama", holdout=4, sequences=2, seq_len=24, batch=2, anchors=3,
        block_size=4, heads=2, steps=4, save_every=2,
    )  # fmt: skip

    def stop_at_3(phase, done, total):
        if phase.startswith("training") and done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train("bd-resume", TrainConfig(**args), False, stop_at_3)
    assert checkpoint.resumable("bd-resume", KIND)[0].step == 2
    flags = ["train", "block-drafter", "--name", "bd-resume", "--target", "tiny-llama"]
    flags += TOY + ["--steps", "4", "--save-every", "2"]
    r = CliRunner().invoke(main, flags)
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert r.output.startswith("error: ") and "--resume" in r.output
    r = CliRunner().invoke(main, flags + ["--resume"])
    assert r.exit_code == 0, r.output
    train("bd-straight", TrainConfig(**args), False, lambda *a: None)
    resumed, straight = checkpoint.load("bd-resume")[1], checkpoint.load("bd-straight")[1]
    for k, v in straight["model"].items():
        assert torch.allclose(resumed["model"][k], v, atol=1e-6), k


def test_bad_flags_are_one_line(home):
    for extra, message in [
        (["--steps", "0"], "--steps must be >= 1"),
        (["--name", "../x"], "checkpoint name"),
        (["--target", "no-such-model"], "no-such-model"),
        # nan passed `lr <= 0` (AdamW's traceback), a negative MLP width a traceback from
        # nn.Linear, both after the target's features were computed
        (["--lr", "nan"], "--lr > 0"),
        (["--intermediate", "-1"], "--intermediate >= 0"),
    ]:
        r = CliRunner().invoke(main, ["train", "block-drafter", "--target", "tiny-llama", *extra])
        assert r.exit_code == 2 and r.output.startswith("error: "), r.output
        assert message in r.output and r.output.count("\n") == 1


@pytest.mark.parametrize("traced", [False, True])
def test_engine_paths_give_the_eager_marginals_across_buffer_growth(llama_pair, traced, request):
    """The fast path's context (the same slots, unpadded) gives the eager marginals exactly;
    the padded one (extends padded to size buckets, the block attending to every slot with
    those past the length masked, both replayed) equal up to rounding, while its buffer grows
    from 4 slots (its graphs captured again) over extends of 1..5 rows. traced: the graphs
    replayed from make_fx records, which keep the host values read at capture."""
    if traced:
        request.getfixturevalue("traced_graphs")
    model = llama_pair.target.model
    drafter = random_drafter(model)
    gen = torch.Generator().manual_seed(2)
    feats = torch.randn(30, drafter.cfg.features, generator=gen)  # [T, F]
    ctxs = {e: BlockContext(drafter, model, e, capacity=4) for e in ("eager", "fast", "graphs")}
    at = 0
    for n in (3, 1, 5, 2, 4, 1, 5, 5):
        qs = {}
        for e, ctx in ctxs.items():
            ctx.extend(feats[at : at + n])
            state = DecodeState(prefix_len=at + n, root_token=7 * n, warp=Warp(0.0), remaining=9)
            qs[e] = ctx.block_marginals(state, 4)  # [L, V]
        at += n
        assert torch.equal(qs["fast"], qs["eager"]), at
        assert torch.allclose(qs["graphs"], qs["eager"], atol=1e-5), at
    graphed = ctxs["graphs"]
    # grown 4 -> 16 -> 32 at the extends to 9 and 21 slots (4 buckets: 1, 2, 3, 5 rows)
    assert graphed.kv.shape[3] == 32 and graphed._extend_call.captures == 6
    f = drafter.cfg.features  # since the last growth, only 5-row extends (4 and 5 rows)
    want = (("feats", (5, f), torch.float32), ("slots", (5,), torch.int64))
    assert list(graphed._extend_call.graphs) == [want]
    assert list(graphed._block_call.graphs) == [(("root_length", (2,), torch.int64), ("width", 32))]


@pytest.mark.parametrize("engine", ["eager", "fast", "graphs"])
def test_greedy_ddtree_with_block_drafter_is_autoregressive(tiny_pair, trained, engine):
    family = "llama" if "llama" in tiny_pair.target.name else "neox"
    ids = tiny_pair.target.tokenizer.encode("def add(a, b):\n    return")
    ar = generate(tiny_pair, ids, "autoregressive", 24)
    params = {"drafter": "block", "checkpoint": trained[family], "B": 12, "L": 4}
    g = generate(tiny_pair, ids, "ddtree", 24, params=params, engine=engine)
    assert g.tokens == ar.tokens
    assert all(it.draft_forwards == 0 for it in g.stats.iterations)  # the draft LM never runs
    assert max(it.tree_size for it in g.stats.iterations) > 5  # real trees were verified


def test_graphs_run_the_block_drafter_as_replays_only(llama_pair, trained):
    """On `engine: graphs` no matrix product runs outside a replay in a DDTree generation with
    the trained drafter (bench/host_time.py EagerOps): its extends and block forwards are
    graphs as the target's forwards are (20 uncaptured products per iteration before)."""
    from bench.host_time import EagerOps

    ids = llama_pair.target.tokenizer.encode("def add(a, b):\n    return")
    params = {"drafter": "block", "checkpoint": trained["llama"], "B": 12, "L": 4}
    generate(llama_pair, ids, "ddtree", 8, params=params, engine="graphs")  # captures
    with EagerOps() as ops:
        g = generate(llama_pair, ids, "ddtree", 24, params=params, engine="graphs")
    its = len(g.stats.iterations)
    assert ops.matmuls() == 0, ops.counts.most_common(8)
    # per iteration: the target's verification, the drafter's extend and block forward
    assert ops.counts["replays"] >= 3 * its


def test_config_needs_checkpoint_with_block():
    with pytest.raises(ConfigError, match="needs checkpoint"):
        resolve_method("ddtree", {"drafter": "block"})
    with pytest.raises(ConfigError, match="only for drafter: block"):
        resolve_method("ddtree", {"checkpoint": "x"})
    # the parameter added later leaves the stored ddtree trials' resolved params as they were
    from engine.methods import method_params

    assert "checkpoint" not in method_params(resolve_method("ddtree", {}))


def test_one_open_context_per_engine_and_only_the_current_drafters(llama_pair):
    """block_context reuses a drafter's context per engine path (reset for each generation)
    and lets an earlier drafter's contexts go when another drafter comes."""
    import gc
    import weakref

    from engine.drafters.ddtree.block_context import block_context

    model = llama_pair.target.model
    first = random_drafter(model)
    ctx = block_context(first, model, "fast")
    ctx.extend(torch.zeros(3, first.cfg.features))
    assert block_context(first, model, "fast") is ctx and ctx.length == 0
    assert block_context(first, model, "graphs") is not ctx
    gone = weakref.ref(first)
    del first, ctx
    block_context(random_drafter(model), model, "fast")
    gc.collect()
    assert gone() is None
