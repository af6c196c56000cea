"""`orch plot` on every example sweep (synthetic results, no model runs) and on grids over
max_new_tokens and temperature: every figure written, integer axes with integer ticks, units
on the axes, values on the bars."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.acceptance import is_acceptance
from orchestrator.cli import main
from orchestrator.results.frame import BASELINE, load_frame
from orchestrator.results.plots import figures
from orchestrator.spec import load_sweep
from orchestrator.spec.expand import place
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import REPO, fake_result, stub_eagle_heads

EXAMPLES = REPO / "examples"
PNG = b"\x89PNG\r\n\x1a\n"


def _synthetic(cfg):
    """Metrics that vary with the config (a speedup between 0.5x and 1.5x and so on)."""
    u = int(cfg.config_hash[:4], 16) / 0xFFFF
    if cfg.method == BASELINE:
        return fake_result(cfg, throughput=100.0, acceptance_rate=0.0, tokens_per_iteration=1.0)
    return fake_result(
        cfg,
        throughput=50.0 + 100.0 * u,
        acceptance_rate=u,
        tokens_per_iteration=1.0 + 3.0 * u,
    )


def _fill(url, name, trials):
    store = Store(url)
    sid = store.submit(name, {"name": name}, trials, "v").sweep_id
    for tid, cfg, _ in store.runnable(sid):
        store.record_result(tid, _synthetic(cfg))
    store.finish_run(sid)
    return store


def _expected(trials) -> set[str]:
    """The figures a sweep's trials call for, derived from the configs themselves."""
    names = set()
    trials = [t for t in trials if not is_acceptance(t)]  # a measurement: no result row
    for method in dict.fromkeys(t.method for t in trials):
        if method == BASELINE:
            continue
        mine = [t for t in trials if t.method == method]
        cols = {  # axis -> its value in each trial, in the frame's column order
            k: [t.params[k] for t in mine]
            for k in sorted(mine[0].params)  # as stored (TrialConfig.to_dict)
            if all(
                isinstance(t.params[k], (int, float)) and not isinstance(t.params[k], bool)
                for t in mine
            )
        }
        cols["max_new_tokens"] = [t.max_new_tokens for t in mine]
        cols["temperature"] = [t.temperature for t in mine]
        kept: list[str] = []
        for k, v in cols.items():  # an axis in lockstep with an earlier one is the same
            n = len(set(v))
            if n > 1 and not any(len(set(zip(v, cols[j]))) == n == len(set(cols[j])) for j in kept):
                kept.append(k)
        names |= {f"speedup_{method}_{k}.png" for k in kept}
        if any(t.params.get("depth") is not None for t in mine):
            names |= {f"acceptance_{method}_depth.png", f"tokens_per_iteration_{method}_depth.png"}
    return names | {"speedup_by_method.png"}


def _check_figures(figs, integer_axes: dict[str, list]) -> None:
    """Titles, units, integer ticks on integer axes, value labels on the bars."""
    for name, fig in figs:
        assert fig._suptitle is not None or fig.axes[0].get_title(), name
        for ax in fig.axes:
            assert ax.get_xlabel(), name
        ylabel = fig.axes[0].get_ylabel()
        assert "(" in ylabel and ")" in ylabel, (name, ylabel)  # a unit
        if name == "speedup_by_method.png":
            labels = [t.get_text() for t in fig.axes[0].texts]
            assert labels and all(t.endswith("×") for t in labels if t), labels
            continue
        axis = name.removesuffix(".png").rsplit("_", 1)[-1]
        axis = "max_new_tokens" if name.endswith("max_new_tokens.png") else axis
        if axis in integer_axes:
            for ax in fig.axes:
                ticks = list(ax.get_xticks())
                assert ticks and all(float(t).is_integer() for t in ticks), (name, ticks)
                shown = [t.get_text() for t in ax.get_xticklabels()]
                assert all("." not in s for s in shown), (name, shown)
                if len(integer_axes[axis]) <= 12:  # the values of this axis (any method's)
                    assert set(ticks) <= set(integer_axes[axis]), (name, ticks)
    import matplotlib.pyplot as plt

    plt.close("all")


def _integer_axes(trials) -> dict[str, list]:
    out = {"max_new_tokens": sorted({t.max_new_tokens for t in trials})}
    for t in trials:
        for k, v in t.params.items():
            if isinstance(v, int) and not isinstance(v, bool):
                out.setdefault(k, set()).add(v)
    return {k: sorted(v) for k, v in out.items()}


# every sweep file of examples/ (claims.yaml is the claims table's data, not a sweep)
SWEEPS = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name != "claims.yaml")


@pytest.mark.parametrize("example", SWEEPS, ids=lambda p: p.stem)
def test_every_example_sweep_plots(example, tmp_path, monkeypatch):
    stub_eagle_heads(example.read_text(), monkeypatch, tmp_path / "home")  # eagle:NAME drafts
    sweep, trials = load_sweep(example)
    trials = place(trials, "cpu")
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    store = _fill(url, sweep.name, trials)
    out = tmp_path / "plots"
    r = CliRunner().invoke(main, ["plot", "-o", str(out), "--sweep", sweep.name, "--db", url])
    assert r.exit_code == 0, r.output
    written = [Path(p) for p in r.stdout.split()]
    assert {p.name for p in written} == _expected(trials)
    for p in written:
        assert p.read_bytes()[:8] == PNG
    _check_figures(figures(load_frame(store, sweep.name)), _integer_axes(trials))
    store.close()


def test_dynatree_grid_has_every_axis(tmp_path):
    """The 450-config DynaTree grid varies max_new_tokens as a grid axis (it crashed before)."""
    _, trials = load_sweep(EXAMPLES / "dynatree_450.yaml")
    # the paper variant resolves depth, branch, threshold to D0, B_mid, tau; D_max = D0 + 3
    # and B_max = B_mid + 1 move in lockstep with them: the same questions, plotted once
    assert _expected(trials) == {
        "speedup_dynatree_max_new_tokens.png",
        "speedup_dynatree_D0.png",
        "speedup_dynatree_B_max.png",
        "speedup_dynatree_tau.png",
        "speedup_by_method.png",
        # the baselines at every grid length (linear k=5, fixed tree depth 5)
        "speedup_linear_max_new_tokens.png",
        "speedup_fixed_tree_max_new_tokens.png",
        "acceptance_fixed_tree_depth.png",
        "tokens_per_iteration_fixed_tree_depth.png",
    }


def test_temperature_and_length_grids(tmp_path):
    """Temperature and max_new_tokens both varying, each a figure of its own."""
    p = tmp_path / "t.yaml"
    p.write_text(
        "name: t\npairs: [{target: tiny-llama, draft: tiny-llama-draft},"
        " {target: tiny-neox, draft: tiny-neox-draft}]\n"
        "dataset: {name: spec_bench, prompts: 1}\n"
        "sampling: {temperature: [0.0, 0.7, 1.0]}\nmax_new_tokens: [8, 16]\n"
        "methods: [{name: autoregressive}, {name: linear, grid: {k: [2, 3, 4]}}]\n"
    )
    _, trials = load_sweep(p)
    trials = place(trials, "cpu")
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    store = _fill(url, "t", trials)
    figs = dict(figures(load_frame(store, "t")))
    assert (
        set(figs)
        == _expected(trials)
        == {
            "speedup_linear_k.png",
            "speedup_linear_max_new_tokens.png",
            "speedup_linear_temperature.png",
            "speedup_by_method.png",
        }
    )
    # one panel per pair, not overlapping lines of both pairs
    assert [ax.get_title() for ax in figs["speedup_linear_k.png"].axes] == [
        "tiny-llama/tiny-llama-draft",
        "tiny-neox/tiny-neox-draft",
    ]
    _check_figures(list(figs.items()), _integer_axes(trials))
    temps = figs["speedup_linear_temperature.png"].axes[0]
    assert temps.get_xlabel() == "temperature"
    k = figs["speedup_linear_k.png"].axes[0]
    assert k.get_xlabel() == "k (draft tokens)" and list(k.get_xticks()) == [2, 3, 4]
    store.close()
