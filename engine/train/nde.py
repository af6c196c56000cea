"""Training the NDE selector (delayed-tree paper, Sec. 6 and Appendix E, Eq. 4, 5, 11, 12) on
data from engine/train/nde_data.py, into a named checkpoint (engine/checkpoint.py).

Per step: a minibatch of B roots drawn with an explicit generator, the policy's logits
(Eq. 10), and the loss of Eq. 12 against each root's static baseline action: the best fixed
action (Eq. 9 with a constant policy, `engine.drafters.delayed.selector.best_fixed_action`) over the
roots that share its sampling parameters (temperature, top-p), "a static baseline configuration
associated with its sampling parameters". T-hat (Eq. 11) comes from the latency curves stored with
the data.

lambda and alpha of Eq. 12 are not given in the paper; our defaults are lambda = 1 (the tail
term weighs as much as the mean term) and alpha = 0.1 (the worst 10% of each minibatch).
Optimizer: AdamW (the paper does not name one). Every step draws its minibatch and dropout
masks from generators seeded by (seed, step), so a resumed run continues exactly where the
interrupted one would have gone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from engine import checkpoint
from engine.config import ConfigError
from engine.drafters.delayed.selector import (
    SCALARS,
    Latency,
    Selector,
    best_fixed_action,
    nde_loss,
    time_table,
)

KIND = "nde"


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    batch_size: int = 64  # B of Eq. 12
    lr: float = 1e-3
    weight_decay: float = 1e-4
    dropout: float = 0.1
    lam: float = 1.0  # lambda of Eq. 12
    alpha: float = 0.1  # alpha of Eq. 12
    latency: str = "eq11"  # "eq11": Eq. 11 as printed; "eq11_width": costed per forward width
    save_every: int = 100
    seed: int = 0
    # the policy at step 0: "uniform" (PyTorch's default initialization; the paper says
    # nothing) or "baseline", the output bias starting at the baseline action with
    # pi(a_base) ~ 0.9 (r = 1, loss ~ 0: training moves away from it only where that helps;
    # a named variant for small data, where a softmax policy can settle on a worse action)
    init: str = "uniform"

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.save_every < 1:
            raise ValueError("steps, batch_size and save_every must be >= 1")
        if not (self.lr > 0 and self.lam >= 0 and 0 < self.alpha <= 1 and 0 <= self.dropout < 1):
            raise ValueError("need lr > 0, lambda >= 0, 0 < alpha <= 1, 0 <= dropout < 1")
        if self.init not in ("uniform", "baseline"):
            raise ValueError(f"init must be uniform or baseline, got {self.init!r}")
        if self.latency not in ("eq11", "eq11_width"):
            raise ValueError(f"latency must be eq11 or eq11_width, got {self.latency!r}")


def baselines(data: dict, E: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """[R] the baseline action of every root: the best fixed action among the roots with the
    same (temperature, top-p)."""
    temp_top = data["scalars"][:, [SCALARS.index("temperature"), SCALARS.index("top_p")]]
    base = torch.empty(E.shape[0], dtype=torch.long)
    for key in torch.unique(temp_top, dim=0):
        rows = (temp_top == key).all(-1)
        base[rows] = best_fixed_action(E[rows], T[rows])
    return base


def tables(data: dict, latency_variant: str) -> tuple[torch.Tensor, torch.Tensor, Latency]:
    """E [R, A], T-hat [R, A] (Eq. 11 with the data's curves) and the latency model."""
    d = dict(data["latency"], width=latency_variant == "eq11_width")
    latency = Latency.from_dict(d)
    return data["E"].double(), time_table(latency, data["context_length"], data["actions"]), latency


def new_net(data: dict, cfg: TrainConfig) -> Selector:
    torch.manual_seed(cfg.seed)  # the initial weights (nn.Linear draws from the global RNG)
    net = Selector(
        data["h_prev_p"].shape[1], data["h_prev_q"].shape[1], len(data["actions"]), cfg.dropout
    )
    s = data["scalars"].float()  # [R, S] standardization statistics of s(x)
    net.scalar_mean.copy_(s.mean(0))
    net.scalar_std.copy_(s.std(0, unbiased=False).clamp_min(1e-6))
    return net


def state_of(net, opt, data, cfg, latency, base_action, step) -> dict:
    return {
        "weights": net.state_dict(),
        "optimizer": opt.state_dict(),
        "step": step,
        "h_target": data["h_prev_p"].shape[1],
        "h_draft": data["h_prev_q"].shape[1],
        "actions": [list(a) for a in data["actions"]],
        "dropout": cfg.dropout,
        "latency": latency.to_dict(),
        "base_action": list(base_action),
    }


def train(
    name: str,
    data: dict,
    cfg: TrainConfig,
    meta: dict,
    resume: bool = False,
    stop_after: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> checkpoint.Checkpoint:
    """Train (or resume) checkpoint `name` up to cfg.steps; stop_after: stop after that step
    with the checkpoint left unfinished (resumable). meta: what else the checkpoint's training
    config records (models, data). progress(n): called with the steps just done."""
    E, T, latency = tables(data, cfg.latency)
    base = baselines(data, E, T)  # [R]
    net = new_net(data, cfg)
    if cfg.init == "baseline":
        with torch.no_grad():  # softmax mass ~0.9 on the most common baseline action
            bias = net.mlp[-1].bias
            bias.zero_()
            bias[int(torch.mode(base).values)] = math.log(9 * (len(data["actions"]) - 1))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step = 0
    config = {"train": asdict(cfg), **meta}
    if resume:
        found = checkpoint.resumable(name, KIND)
        if found is None:
            raise ConfigError(f"no unfinished nde checkpoint {name!r} to resume")
        _, state = found
        net.load_state_dict(state["weights"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    best = data["actions"][int(torch.mode(base).values)]
    last = min(cfg.steps, stop_after) if stop_after is not None else cfg.steps
    R = E.shape[0]
    net.train()
    while step < last:
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        idx = torch.randint(R, (min(cfg.batch_size, R),), generator=gen)  # [B]
        torch.manual_seed(cfg.seed * 1_000_003 + step)  # this step's dropout masks
        logits = net(
            data["h_prev_p"][idx], data["h_prev_q"][idx], data["h_cur_q"][idx], data["scalars"][idx]
        )
        loss = nde_loss(logits, E[idx], T[idx], base[idx], cfg.lam, cfg.alpha)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if progress:
            progress(1)
        if step % cfg.save_every == 0 and step < cfg.steps:
            checkpoint.save(
                name, KIND, state_of(net, opt, data, cfg, latency, best, step), config, step, False
            )
    done = step >= cfg.steps
    state = state_of(net, opt, data, cfg, latency, best, step)
    return checkpoint.save(name, KIND, state, config, step, done)


@torch.no_grad()
def evaluate(net: Selector, data: dict, latency: Latency) -> dict:
    """Offline throughput estimates on `data` (Eq. 9 with T-hat of Eq. 11): the trained
    policy's argmax action vs the best fixed action (both chosen per root, mean over roots of
    E / T-hat). Held-out data measures generalization; the training data, fit."""
    E = data["E"].double()
    T = time_table(latency, data["context_length"], data["actions"])
    net.eval()
    pick = net(data["h_prev_p"], data["h_prev_q"], data["h_cur_q"], data["scalars"]).argmax(-1)
    rows = torch.arange(E.shape[0])
    fixed = best_fixed_action(E, T)
    return {
        "roots": E.shape[0],
        "nde_tps": float((E[rows, pick] / T[rows, pick]).mean()),
        "fixed_tps": float((E[:, fixed] / T[:, fixed]).mean()),
        "fixed_action": list(data["actions"][fixed]),
        "oracle_tps": float((E / T).max(-1).values.mean()),
    }
