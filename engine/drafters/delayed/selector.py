"""NDE, the neural delay-and-branch selector (delayed-tree paper, Sec. 6 and Appendix E).

At each decoding step, before drafting, a small MLP picks the delayed tree's action
a = (K, L1, L2) (engine/drafters/delayed/build.py, Def. 5.2) from features available at the root:

    A = {1..K_max} x {0..L1_max} x {0..L2_max}                          Eq. 8 (4 x 9 x 9 = 324)
    z(x) = MLP([LN(phi1(h^p_prev)); LN(phi2(h^q_prev)); LN(phi3(h^q_cur)); s(x)])   Eq. 10
    a* = argmax_a pi(a | x),  pi = softmax(z)                                        Sec. 6

Features (Appendix E): the target's and the draft's final hidden states at the preceding token
(h^p_prev, h^q_prev) and the draft's at the root (h^q_cur); scalars H(p_prev), H(q_prev),
H(q_root), KL(p_prev || q_prev), KL(q_prev || p_prev), ||p_prev - q_prev||_1, the context length
|x|, temperature T, nucleus threshold top-p, and latency estimates t_q(|x|), t_p(|x|) of one
draft / target forward. p_prev is the target's next-token distribution after the preceding
token (the one the root was drawn from), q_prev the draft's, q_root the draft's after the root.
The paper does not say at which temperature the distributions enter the scalars; we use the
models' plain softmax (temperature 1): at temperature 0 the warped rows are one-hot and every
entropy would be 0. Standardization s(x) uses the training set's mean and std.

Objective (Eq. 4, 5, 12), per root x_i with block efficiencies E_i(a) = E[tau + 1 | x_i, a]
(Eq. 1-3, engine/verify/formulas.py) and the latency model T_i(a) (Eq. 11):

    TPS_pi(x_i)  = sum_a pi(a|x_i) E_i(a) / sum_a pi(a|x_i) T_i(a)                    Eq. 4
    r_i          = TPS_pi(x_i) / TPS_base(x_i),  TPS_base = E_i(a_base) / T_i(a_base)
    L            = mean_i(-log r_i) + lambda mean_{i in I_alpha} max(1 - r_i, 0)^2    Eq. 12

I_alpha: the largest alpha fraction (at least one) of the penalty terms in the minibatch. The
paper gives no values for lambda and alpha; the trainer's defaults are stated there
(engine/train/nde.py).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import nn

from engine import checkpoint
from engine.cost_model import ForwardCurve
from engine.transfer import to_device

K_MAX, L1_MAX, L2_MAX = 4, 8, 8  # the paper's action space (Sec. 6)
SCALARS = (
    "entropy_p_prev",
    "entropy_q_prev",
    "entropy_q_root",
    "kl_p_q_prev",
    "kl_q_p_prev",
    "l1_p_q_prev",
    "context_length",
    "temperature",
    "top_p",
    "latency_draft",
    "latency_target",
)
PROJECTION = 128  # d, the shared dimension of the hidden-state projections (Appendix E)
HIDDEN = (512, 32)  # the MLP's two hidden layers (Appendix E)


# ---- action space (Eq. 8) --------------------------------------------------------------------


def actions(k_max: int = K_MAX, l1_max: int = L1_MAX, l2_max: int = L2_MAX) -> list[tuple]:
    """A = {1..k_max} x {0..l1_max} x {0..l2_max} as (K, L1, L2), K slowest (Eq. 8)."""
    return [
        (k, l1, l2)
        for k in range(1, k_max + 1)
        for l1 in range(l1_max + 1)
        for l2 in range(l2_max + 1)
    ]


def canonical(action: tuple[int, int, int]) -> tuple[int, int, int]:
    """The action that drafts the same tree: with L2 = 0 the branching factor does nothing."""
    k, l1, l2 = action
    return (1, l1, 0) if l2 == 0 else (k, l1, l2)


# ---- scalar uncertainty features (Appendix E) ------------------------------------------------

EPS = 1e-12  # floor of q in KL(p || q), so a token the other model gives 0 costs log(1/EPS)


def entropy(p: torch.Tensor) -> torch.Tensor:
    """H(p) = -sum p log p in nats over the last axis (0 log 0 = 0); p [..., V]."""
    p = p.double()
    return -torch.xlogy(p, p).sum(-1)


def kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = sum p (log p - log q) in nats over the last axis, q floored at EPS."""
    p, q = p.double(), q.double()
    return (torch.xlogy(p, p) - p * q.clamp_min(EPS).log()).sum(-1)


def l1(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """||p - q||_1 over the last axis."""
    return (p.double() - q.double()).abs().sum(-1)


# ---- latency model (Eq. 11) ------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """t_q(l), t_p(l) of Eq. 11 from the pair's forward-cost curves, measured by a warm-up
    microbenchmark (engine/curves.py measure_curve; Sec. 6 "warm-up run").

    width=False is Eq. 11 as printed: t(l) is one forward at context length l, whatever the
    number of tokens it feeds (right on a GPU for small trees, where a forward's cost is flat
    in its width). width=True, a named variant for devices where it is not (this project's
    CPU): each term is costed at the tokens its forward feeds, t_q(K tokens at l + L1 + jK)
    for a branch level and t_p(1 + L1 + K L2 tokens after l) for the target pass."""

    draft: ForwardCurve
    target: ForwardCurve
    width: bool = False

    def t_q(self, length: float, n: int = 1) -> float:
        return self.draft.cost(n if self.width else 1, length)

    def t_p(self, length: float, n: int = 1) -> float:
        return self.target.cost(n if self.width else 1, length)

    def total(self, length: int, action: tuple[int, int, int]) -> float:
        """T-hat(x, a) of Eq. 11 in seconds at context length l = |x|."""
        K, L1, L2 = action
        trunk = sum(self.t_q(length + j) for j in range(L1))
        branch = sum(self.t_q(length + L1 + j * K, K) for j in range(L2))
        if self.width:
            return trunk + branch + self.t_p(length, 1 + L1 + K * L2)
        return trunk + branch + self.t_p(length + L1 + K * L2)

    def to_dict(self) -> dict:
        return {"draft": self.draft.to_dict(), "target": self.target.to_dict(), "width": self.width}

    @staticmethod
    def from_dict(d: dict) -> Latency:
        return Latency(
            ForwardCurve.from_dict(d["draft"]), ForwardCurve.from_dict(d["target"]), d["width"]
        )


def time_table(latency: Latency, lengths: torch.Tensor, acts: list[tuple]) -> torch.Tensor:
    """[R, A] T-hat(x_i, a) (Eq. 11) for roots at context lengths `lengths` [R]."""
    return torch.tensor(
        [[latency.total(int(n), a) for a in acts] for n in lengths.tolist()], dtype=torch.float64
    )


# ---- features at the root --------------------------------------------------------------------


@dataclass(frozen=True)
class RootFeatures:
    """One root's selector input (Appendix E); batched [B, ...] in a dataset."""

    h_prev_p: torch.Tensor  # [Hp] target hidden state at the preceding token
    h_prev_q: torch.Tensor  # [Hq] draft hidden state at the preceding token
    h_cur_q: torch.Tensor  # [Hq] draft hidden state at the root
    scalars: torch.Tensor  # [len(SCALARS)] float64, unstandardized


def root_features(
    p_prev_logits: torch.Tensor,  # [V] target logits after the preceding token
    h_prev_p: torch.Tensor,  # [Hp]
    q_prev_logits: torch.Tensor,  # [V] draft logits after the preceding token
    h_prev_q: torch.Tensor,  # [Hq]
    q_root_logits: torch.Tensor,  # [V] draft logits after the root
    h_cur_q: torch.Tensor,  # [Hq]
    context_length: int,
    temperature: float,
    top_p: float,
    latency: Latency,
) -> RootFeatures:
    """The features of Appendix E at one root (distributions: softmax at temperature 1), on
    the logits' device: no host read (the scalars the host knows are copied there)."""
    p_prev = torch.softmax(p_prev_logits.double(), -1)  # [V]
    q_prev = torch.softmax(q_prev_logits.double(), -1)  # [V]
    q_root = torch.softmax(q_root_logits.double(), -1)  # [V]
    n = min(p_prev.shape[-1], q_prev.shape[-1])  # target and draft vocabularies may differ in
    p_prev, q_prev = p_prev[:n], q_prev[:n]  # padding rows only (Qwen2.5 0.5B vs 1.5B)
    measured = torch.stack(
        [
            entropy(p_prev),
            entropy(q_prev),
            entropy(q_root),
            kl(p_prev, q_prev),
            kl(q_prev, p_prev),
            l1(p_prev, q_prev),
        ]
    )  # [6] float64
    given = [float(context_length), temperature, top_p]
    given += [latency.t_q(context_length), latency.t_p(context_length)]
    scalars = torch.cat([measured, to_device(given, measured.device, torch.float64)])  # [11]
    return RootFeatures(h_prev_p.float(), h_prev_q.float(), h_cur_q.float(), scalars)


# ---- the policy (Eq. 10) ---------------------------------------------------------------------


class Selector(nn.Module):
    """Eq. 10: a projection + LayerNorm per hidden-state block, standardized scalars, and an
    MLP with hidden layers 512 and 32 (GELU, dropout) to |A| logits."""

    def __init__(self, h_target: int, h_draft: int, n_actions: int, dropout: float = 0.1) -> None:
        super().__init__()
        d, s = PROJECTION, len(SCALARS)
        self.phi1, self.phi2, self.phi3 = (
            nn.Linear(h_target, d),
            nn.Linear(h_draft, d),
            nn.Linear(h_draft, d),
        )
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.register_buffer("scalar_mean", torch.zeros(s))
        self.register_buffer("scalar_std", torch.ones(s))
        self.mlp = nn.Sequential(
            nn.Linear(3 * d + s, HIDDEN[0]),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(HIDDEN[0], HIDDEN[1]),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(HIDDEN[1], n_actions),
        )

    def forward(
        self,
        h_prev_p: torch.Tensor,  # [B, Hp]
        h_prev_q: torch.Tensor,  # [B, Hq]
        h_cur_q: torch.Tensor,  # [B, Hq]
        scalars: torch.Tensor,  # [B, S] unstandardized
    ) -> torch.Tensor:  # [B, A] logits z(x)
        s = ((scalars.float() - self.scalar_mean) / self.scalar_std).float()  # s(x)
        x = torch.cat(
            [
                self.ln1(self.phi1(h_prev_p)),
                self.ln2(self.phi2(h_prev_q)),
                self.ln3(self.phi3(h_cur_q)),
                s,
            ],
            dim=-1,
        )  # [B, 3d + S]
        return self.mlp(x)


# ---- objective (Eq. 4, 5, 12) ----------------------------------------------------------------


def policy_tps(pi: torch.Tensor, E: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """Eq. 4: [B] sum_a pi E / sum_a pi T for pi, E, T [B, A]."""
    return (pi * E).sum(-1) / (pi * T).sum(-1)


def nde_loss(
    logits: torch.Tensor,  # [B, A]
    E: torch.Tensor,  # [B, A] block efficiency E[tau + 1 | x_i, a]
    T: torch.Tensor,  # [B, A] T-hat(x_i, a), seconds
    base: torch.Tensor,  # [B] long: index of the baseline action of each example
    lam: float,
    alpha: float,
) -> torch.Tensor:
    """Eq. 12: mean(-log r) + lambda * mean over the top-alpha penalties max(1 - r, 0)^2,
    r = TPS_pi / TPS_base (Eq. 4, 5)."""
    pi = torch.softmax(logits.double(), -1)  # [B, A]
    E, T = E.double(), T.double()
    rows = torch.arange(E.shape[0])
    r = policy_tps(pi, E, T) / (E[rows, base] / T[rows, base])  # [B]
    penalty = (1 - r).clamp_min(0) ** 2  # [B]
    k = max(1, math.ceil(alpha * E.shape[0]))
    return (-r.log()).mean() + lam * penalty.topk(k).values.mean()


def best_fixed_action(E: torch.Tensor, T: torch.Tensor) -> int:
    """The paper's static baseline: the action a maximizing Eq. 9 for the policy that always
    plays a, mean_i E_i(a) / T_i(a) over the collected roots; E, T [R, A]. Ties: first."""
    return int((E.double() / T.double()).mean(0).argmax())


# ---- loading a trained selector --------------------------------------------------------------


@dataclass(frozen=True)
class Trained:
    """A selector ready to choose: the network (eval mode), its action list and latency."""

    net: Selector
    actions: tuple[tuple[int, int, int], ...]
    latency: Latency


def build_net(state: dict) -> Selector:
    net = Selector(state["h_target"], state["h_draft"], len(state["actions"]), state["dropout"])
    net.load_state_dict(state["weights"])
    return net.eval()


def load(name: str) -> Trained:
    """The finished NDE checkpoint `name` (engine/checkpoint.py), cached per sha256."""
    return _load(name, checkpoint.find(name, "nde").sha256)


@functools.lru_cache(maxsize=8)
def _load(name: str, sha256: str) -> Trained:
    _, state = checkpoint.load(name, "nde")
    acts = tuple(tuple(int(v) for v in a) for a in state["actions"])
    return Trained(build_net(state), acts, Latency.from_dict(state["latency"]))


def best_action(net: Selector, h_prev_p, h_prev_q, h_cur_q, scalars) -> torch.Tensor:
    """argmax_a pi(a | x) (Sec. 6, inference) of one root's features: the action's index, a
    0-d tensor on the features' device (engine/drafters/delayed/taps.py reads it once per
    iteration)."""
    return net(h_prev_p[None], h_prev_q[None], h_cur_q[None], scalars[None])[0].argmax()


@torch.no_grad()
def choose(trained: Trained, f: RootFeatures) -> tuple[int, int, int]:
    """The action argmax_a pi(a | x) of features f (any device: moved to the network's)."""
    dev = next(trained.net.parameters()).device
    fs = (f.h_prev_p, f.h_prev_q, f.h_cur_q, f.scalars)
    return trained.actions[int(best_action(trained.net, *(x.to(dev) for x in fs)))]
