"""The NDE selector (delayed-tree paper Sec. 6, Appendix E): its features on hand-made
distributions, the action space (Eq. 8), the latency model (Eq. 11), the objective (Eq. 4, 12)
on a hand-computed example, the data collection's sub-trees (Def. 5.2), and decoding with
`selector: nde` (greedy output = autoregressive; the selector's action is the tree drafted)."""

import math

import pytest
import torch

from engine import checkpoint
from engine.config import ConfigError
from engine.cost_model import CurvePoint, ForwardCurve
from engine.decode import generate
from engine.drafters.delayed import selector as nde
from engine.methods import method_params, resolve_method
from engine.train.nde import TrainConfig, train
from engine.train.nde_data import CollectConfig, collect, sub_tree


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def curve(base: float, per_context: float, per_token: float) -> ForwardCurve:
    """A hand-made forward-cost curve, linear in n and in C: base + C per_context + n per_token."""
    points = tuple(
        CurvePoint(c, n, base + c * per_context + n * per_token) for c in (0, 1000) for n in (1, 64)
    )
    return ForwardCurve("m", "cpu", "float32", "eager", points)


LATENCY = nde.Latency(curve(0.01, 1e-5, 1e-3), curve(0.1, 1e-4, 1e-2))


# ---- features ----------------------------------------------------------------------------


def test_entropy_kl_l1_on_hand_made_distributions():
    u = torch.full((4,), 0.25)
    p = torch.tensor([0.5, 0.5, 0.0, 0.0])
    assert float(nde.entropy(u)) == pytest.approx(math.log(4))
    assert float(nde.entropy(p)) == pytest.approx(math.log(2))  # 0 log 0 = 0
    assert float(nde.entropy(torch.tensor([1.0, 0.0]))) == 0.0
    # KL(p || u) = sum p log(p / u) = log 2; KL(u || p) is infinite: q floored at EPS
    assert float(nde.kl(p, u)) == pytest.approx(math.log(2))
    want = sum(0.25 * math.log(0.25 / max(x, nde.EPS)) for x in (0.5, 0.5, 0.0, 0.0))
    assert float(nde.kl(u, p)) == pytest.approx(want)
    assert float(nde.kl(p, p)) == 0.0
    assert float(nde.l1(p, u)) == pytest.approx(1.0)  # |.25| * 2 + |.25| * 2
    # batched over the last axis
    assert nde.entropy(torch.stack([u, p])).shape == (2,)


def test_root_features_are_the_papers_list():
    p_logits = torch.log(torch.tensor([0.5, 0.5, 1e-30, 1e-30]))  # softmax -> [.5, .5, 0, 0]
    q_logits = torch.zeros(4)  # uniform
    f = nde.root_features(
        p_logits,
        torch.ones(6),
        q_logits,
        torch.ones(3),
        torch.tensor([0.0, 0.0, 0.0, 50.0]),
        torch.zeros(3),
        context_length=100,
        temperature=0.7,
        top_p=0.9,
        latency=LATENCY,
    )
    assert f.h_prev_p.shape == (6,) and f.h_prev_q.shape == (3,) and f.h_cur_q.shape == (3,)
    assert f.scalars.shape == (len(nde.SCALARS),) == (11,)
    s = dict(zip(nde.SCALARS, f.scalars.tolist()))
    assert s["entropy_p_prev"] == pytest.approx(math.log(2))
    assert s["entropy_q_prev"] == pytest.approx(math.log(4))
    assert s["entropy_q_root"] == pytest.approx(0.0, abs=1e-12)
    assert s["kl_p_q_prev"] == pytest.approx(math.log(2))
    assert s["l1_p_q_prev"] == pytest.approx(1.0)
    assert s["kl_q_p_prev"] > 10  # the uniform draft puts mass where the target has none
    assert (s["context_length"], s["temperature"], s["top_p"]) == (100, 0.7, 0.9)
    assert s["latency_draft"] == pytest.approx(0.01 + 100 * 1e-5 + 1e-3)  # t_q(100)
    assert s["latency_target"] == pytest.approx(0.1 + 100 * 1e-4 + 1e-2)  # t_p(100)


def test_action_space_eq8():
    acts = nde.actions()
    assert len(acts) == 4 * 9 * 9 and acts[0] == (1, 0, 0) and acts[-1] == (4, 8, 8)
    assert len(set(acts)) == len(acts)
    assert nde.canonical((3, 5, 0)) == (1, 5, 0) and nde.canonical((3, 5, 1)) == (3, 5, 1)


def test_latency_eq11_by_hand():
    t_q = lambda n, c: 0.01 + c * 1e-5 + n * 1e-3  # noqa: E731 - the curves above
    t_p = lambda n, c: 0.1 + c * 1e-4 + n * 1e-2  # noqa: E731
    l, (K, L1, L2) = 10, (2, 1, 2)
    # Eq. 11 as printed: t(l) is one forward at context length l
    want = t_q(1, 10) + (t_q(1, 11) + t_q(1, 13)) + t_p(1, 15)
    assert LATENCY.total(l, (K, L1, L2)) == pytest.approx(want)
    # width variant: each forward costed at the tokens it feeds
    wide = nde.Latency(LATENCY.draft, LATENCY.target, width=True)
    want = t_q(1, 10) + (t_q(2, 11) + t_q(2, 13)) + t_p(1 + 1 + 4, 10)
    assert wide.total(l, (K, L1, L2)) == pytest.approx(want)
    assert LATENCY.total(l, (1, 0, 0)) == pytest.approx(t_p(1, 10))  # target pass only
    table = nde.time_table(LATENCY, torch.tensor([10, 20]), [(1, 0, 0), (2, 1, 2)])
    assert table.shape == (2, 2) and float(table[0, 1]) == pytest.approx(
        LATENCY.total(10, (2, 1, 2))
    )


# ---- objective and policy ------------------------------------------------------------------


def test_loss_is_eq12_on_a_hand_computed_example():
    E = torch.tensor([[2.0, 4.0], [3.0, 1.0]])
    T = torch.tensor([[1.0, 2.0], [1.0, 1.0]])
    logits = torch.zeros(2, 2)  # pi uniform
    base = torch.tensor([0, 0])
    # Eq. 4: TPS_pi = (1 + 2) / 1.5 = 2 and (1.5 + .5) / 1 = 2; TPS_base = 2 and 3
    r = torch.tensor([1.0, 2 / 3])
    main = float((-r.log()).mean())  # Eq. 5
    # alpha = 0.5 of B = 2: the single largest penalty max(1 - r, 0)^2 = 1/9
    want = main + 2.0 * (1 / 9)
    got = nde.nde_loss(logits, E, T, base, lam=2.0, alpha=0.5)
    assert float(got) == pytest.approx(want)
    # alpha = 1: the mean over both penalties (0 and 1/9)
    assert float(nde.nde_loss(logits, E, T, base, 2.0, 1.0)) == pytest.approx(main + 2.0 / 18)
    # a policy certain of the baseline scores r = 1: loss 0
    sure = torch.tensor([[50.0, 0.0], [50.0, 0.0]])
    assert float(nde.nde_loss(sure, E, T, base, 2.0, 0.5)) == pytest.approx(0.0, abs=1e-12)
    # best fixed action: mean E / T is 2.5 for action 0 and 1.5 for action 1
    assert nde.best_fixed_action(E, T) == 0


def test_selector_is_eq10():
    net = nde.Selector(h_target=6, h_draft=3, n_actions=10)
    out = net(torch.randn(5, 6), torch.randn(5, 3), torch.randn(5, 3), torch.randn(5, 11))
    assert out.shape == (5, 10)
    assert net.phi1.out_features == net.phi2.out_features == nde.PROJECTION == 128
    linears = [m for m in net.mlp if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linears] == [512, 32, 10]
    assert linears[0].in_features == 3 * 128 + 11
    assert sum(isinstance(m, torch.nn.GELU) for m in net.mlp) == 2
    assert sum(isinstance(m, torch.nn.Dropout) for m in net.mlp) == 2


# ---- data collection and decoding on the tiny pair ---------------------------------------

SMALL = CollectConfig(
    k_max=2, l1_max=2, l2_max=2, samples=2, stride=4, max_new_tokens=8, temperature=1.0
)


@pytest.fixture(scope="module")
def tiny_data(llama_pair):
    return collect(llama_pair, [[1, 2, 3, 4, 5], [7, 8, 9]], SMALL, LATENCY)


def test_collected_data(tiny_data):
    R, A = tiny_data["E"].shape
    assert A == 2 * 3 * 3 and R == 3 + 3  # roots at the prompts' last tokens, then every 4
    assert tiny_data["context_length"].tolist() == [5, 9, 13, 3, 7, 11]
    acts = tiny_data["actions"]
    E = tiny_data["E"]
    for j, (_, L1, L2) in enumerate(acts):
        assert (E[:, j] >= 1).all() and (E[:, j] <= 1 + L1 + L2 + 1e-9).all()
        if L2 == 0:  # K does nothing without branches: the same estimate
            assert torch.equal(E[:, j], E[:, acts.index((1, L1, 0))])
    assert (E[:, acts.index((1, 0, 0))] == 1).all()  # root only: the target's token alone


def test_collected_features(tiny_data, llama_pair):
    R = tiny_data["E"].shape[0]
    h_target = llama_pair.target.model.config.hidden_size
    h_draft = llama_pair.draft.model.config.hidden_size
    assert tiny_data["h_prev_p"].shape == (R, h_target)
    assert tiny_data["h_prev_q"].shape == tiny_data["h_cur_q"].shape == (R, h_draft)
    assert tiny_data["scalars"].shape == (R, len(nde.SCALARS))
    s = tiny_data["scalars"]
    assert s[:, nde.SCALARS.index("context_length")].tolist() == [5, 9, 13, 3, 7, 11]
    assert (s[:, nde.SCALARS.index("temperature")] == 1.0).all()


def test_sub_tree_is_a_delayed_tree(llama_pair):
    from engine.draft import DraftModel
    from engine.runtime.eager import CachedModel
    from engine.sampling import Warp
    from engine.train.nde_data import grow_superset

    cfg = CollectConfig(k_max=3, l1_max=2, l2_max=2)
    draft = DraftModel(llama_pair.draft.model, Warp(1.0), CachedModel(llama_pair.draft.model))
    builder = draft.start([1, 2, 3])
    s = grow_superset(builder, cfg, False, torch.Generator().manual_seed(0))
    full = builder.tree("iid")
    assert len(s.trunk) == 2 and len(s.branches) == 3  # branches below the root and each trunk node
    assert all(len(b) == 3 and all(len(path) == 2 for path in b) for b in s.branches)
    for K, L1, L2 in [(1, 0, 0), (3, 0, 2), (2, 2, 1), (3, 1, 2)]:
        tree, nodes = sub_tree(full, s, (K, L1, L2))
        assert nodes[: 1 + L1] == [0] + s.trunk[:L1]  # the trunk: a single path
        assert tree.depth[: 1 + L1].tolist() == list(range(L1 + 1))
        assert tree.size <= 1 + L1 + K * L2 and tree.height == (L1 + L2)
        point = L1  # the branching point's children: K i.i.d. draws in all
        kids = (tree.parents == point).nonzero().flatten()
        assert int(tree.multiplicity[kids].sum()) == (K if L2 else 0)


def test_greedy_delayed_nde_equals_autoregressive(tiny_pair, tiny_data, monkeypatch, tmp_path):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    train("nde-tiny", tiny_data, TrainConfig(steps=3, batch_size=4), {})
    params = {"selector": "nde", "selector_checkpoint": "nde-tiny"}
    for prompt in ([1, 2, 3, 4, 5], [9]):  # [9]: no token before the first root
        want = generate(tiny_pair, prompt, "autoregressive", 24).tokens
        for engine in ("eager", "fast", "graphs"):
            got = generate(tiny_pair, prompt, "delayed", 24, params=params, engine=engine)
            assert got.tokens == want


def test_root_features_are_the_same_on_every_engine(llama_pair, tiny_data, monkeypatch, tmp_path):
    """The taps read what the forwards return (engine/runtime/eager.py `tap`), also from the padded
    graph forwards of `engine: graphs`: every root's features match the eager reference's."""
    from engine.drafters.delayed.taps import RootTaps

    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    train("nde-tiny", tiny_data, TrainConfig(steps=3, batch_size=4), {})
    params = {"selector": "nde", "selector_checkpoint": "nde-tiny"}
    seen: list = []
    features = RootTaps.features
    monkeypatch.setattr(
        RootTaps, "features", lambda self, *a: seen.append(features(self, *a)) or seen[-1]
    )
    per_engine = {}
    for engine in ("eager", "fast", "graphs"):
        seen.clear()
        g = generate(llama_pair, [1, 2, 3, 4, 5], "delayed", 24, params=params, engine=engine)
        per_engine[engine] = (g.tokens, list(seen))
    tokens, want = per_engine["eager"]
    assert len(want) > 3
    for engine in ("fast", "graphs"):
        assert per_engine[engine][0] == tokens
        for got, ref in zip(per_engine[engine][1], want, strict=True):
            for name in ("h_prev_p", "h_prev_q", "h_cur_q", "scalars"):
                x, y = getattr(got, name), getattr(ref, name)
                torch.testing.assert_close(x, y, atol=1e-4, rtol=1e-4)


def test_graphs_run_the_selector_as_a_replay(
    llama_pair, tiny_data, monkeypatch, tmp_path, traced_graphs
):
    """On `engine: graphs` the selector network runs on the decoding device as a graph replay
    (engine/drafters/delayed/taps.py): no matrix product outside replays (bench/host_time.py EagerOps;
    its 6 layers ran uncaptured on the host before), and the action equals the network's on
    the checkpoint's own CPU copy (engine/drafters/delayed/selector.py choose) at every root, with the graphs
    replayed from make_fx records (traced_graphs: nothing read on the host at capture)."""
    from bench.host_time import EagerOps
    from engine.drafters.delayed import selector as nde_mod
    from engine.drafters.delayed.taps import RootTaps

    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    train("nde-tiny", tiny_data, TrainConfig(steps=3, batch_size=4), {})
    params = {"selector": "nde", "selector_checkpoint": "nde-tiny"}
    picked: list = []
    choose = RootTaps.choose

    def check(self, state):
        action = choose(self, state)
        want = nde_mod.choose(self.trained, self.features(state, self.trained.latency))
        picked.append((action, want))
        return action

    with monkeypatch.context() as m:
        m.setattr(RootTaps, "choose", check)
        generate(llama_pair, [1, 2, 3, 4, 5], "delayed", 24, params=params, engine="graphs")
    with EagerOps() as ops:
        generate(llama_pair, [1, 2, 3, 4, 5], "delayed", 24, params=params, engine="graphs")
    assert ops.matmuls() == 0, ops.counts.most_common(8)
    assert len(picked) > 3 and all(a == w for a, w in picked)


def forced(tiny_data, action) -> None:
    """Checkpoint 'nde-forced': a selector whose last layer picks `action` at every root."""
    train("nde-forced", tiny_data, TrainConfig(steps=1, batch_size=2), {})
    _, state = checkpoint.load("nde-forced", "nde")
    last = [k for k in state["weights"] if k.startswith("mlp.") and k.endswith(".bias")][-1]
    state["weights"][last].zero_()
    state["weights"][last][tiny_data["actions"].index(action)] = 1e6
    checkpoint.save("nde-forced", "nde", state, {}, step=1, done=True)


def test_the_selectors_action_is_the_tree_drafted(llama_pair, tiny_data):
    for K, L1, L2 in [(1, 2, 1), (1, 0, 2), (2, 1, 0)]:
        forced(tiny_data, (K, L1, L2))
        params = {"selector": "nde", "selector_checkpoint": "nde-forced"}
        g = generate(llama_pair, [1, 2, 3, 4, 5], "delayed", 40, params=params)
        sizes = {it.tree_size for it in g.stats.iterations[:-2]}  # the last ones truncate
        assert sizes == {1 + L1 + L2}  # greedy draft: the K branches merge into one
        assert g.tokens == generate(llama_pair, [1, 2, 3, 4, 5], "autoregressive", 40).tokens


def test_selector_params():
    assert resolve_method("delayed").cfg.selector == "fixed"
    # added later: the default stays out of the resolved params (config hashes unchanged)
    assert "selector" not in method_params(resolve_method("delayed"))
    with pytest.raises(ConfigError, match="needs selector_checkpoint"):
        resolve_method("delayed", {"selector": "nde"})
    with pytest.raises(ConfigError, match="no checkpoint 'nope'"):
        resolve_method("delayed", {"selector": "nde", "selector_checkpoint": "nope"})
    with pytest.raises(ConfigError, match="only used with selector: nde"):
        resolve_method("delayed", {"selector_checkpoint": "x"})
    with pytest.raises(ConfigError, match="is not one of fixed, nde"):
        resolve_method("delayed", {"selector": "learned"})


def test_baseline_init_starts_at_the_best_fixed_action(tiny_data):
    from engine.train.nde import tables

    train("nde-b", tiny_data, TrainConfig(steps=1, batch_size=2, lr=1e-9, init="baseline"), {})
    trained = nde.load("nde-b")
    E, T, _ = tables(tiny_data, "eq11")
    best = tiny_data["actions"][nde.best_fixed_action(E, T)]
    _, state = checkpoint.load("nde-b", "nde")
    assert tuple(state["base_action"]) == best
    x = (tiny_data[k] for k in ("h_prev_p", "h_prev_q", "h_cur_q", "scalars"))
    pi = torch.softmax(trained.net(*x), -1)[:, tiny_data["actions"].index(best)]
    assert (pi > 0.8).all()
