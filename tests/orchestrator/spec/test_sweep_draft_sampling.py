"""The sweep file's draft sampling settings (`sampling: draft_temperature / draft_top_p`, DySpec
Sec. 5.1), a method's own (`methods[i].sampling`, DDTree's vanilla-DFlash chain) and
`certify:`: parsing, expansion into trials, the verifier pairing, stored specs."""

from __future__ import annotations

import pytest

from orchestrator.spec import load_sweep
from orchestrator.spec.values import SpecError

BASE = """\
name: ds
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 2}
"""


def _load(tmp_path, body: str):
    p = tmp_path / "s.yaml"
    p.write_text(BASE + body)
    return load_sweep(p)


def test_dyspec_draft_at_0_6_for_targets_at_0_and_0_6(tmp_path):
    sweep, trials = _load(
        tmp_path,
        "sampling: {temperature: [0.0, 0.6], draft_temperature: 0.6}\n"
        "methods: [{name: dyspec, params: {budget: 8}}]\n",
    )
    got = [(t.temperature, t.draft_temperature, t.params["verifier"]) for t in trials]
    # at T = 0.6 the draft's 0.6 is the target's: the default, no setting of its own
    assert got == [(0.0, 0.6, "greedy"), (0.6, None, "specinfer")]
    assert all(t.draft_top_p is None and t.certify for t in trials)
    assert sweep.to_dict()["sampling"]["draft_temperature"] == [0.6]
    assert "draft_top_p" not in sweep.to_dict()["sampling"]
    # the same sweep without the draft key: the same T = 0.6 trial (one hash), and a plain
    # greedy trial in place of the drafted one
    _, plain = _load(
        tmp_path,
        "sampling: {temperature: [0.0, 0.6]}\nmethods: [{name: dyspec, params: {budget: 8}}]\n",
    )
    assert plain[1].config_hash == trials[1].config_hash
    assert plain[0].config_hash != trials[0].config_hash


def test_draft_axes_and_points(tmp_path):
    sweep, trials = _load(
        tmp_path,
        "sampling:\n  temperature: 1.0\n  draft_temperature: [null, 0.5]\n"
        "  draft_top_p: [null, 0.9]\n"
        "  points: [{temperature: 0.0, draft_temperature: 0.6, draft_top_p: 0.95}]\n"
        "methods: [{name: iid, params: {K: 2, L: 2}}]\n",
    )
    got = [(t.temperature, t.draft_temperature, t.draft_top_p) for t in trials]
    assert got == [
        (1.0, None, None),
        (1.0, None, 0.9),
        (1.0, 0.5, None),
        (1.0, 0.5, 0.9),
        (0.0, 0.6, 0.95),
    ]
    assert len({t.config_hash for t in trials}) == 5
    assert sweep.to_dict()["sampling"]["points"] == [[0.0, 1.0, 0.6, 0.95]]


def test_a_greedy_draft_under_a_sampling_target_pairs_with_nss(tmp_path):
    _, trials = _load(
        tmp_path,
        "sampling: {temperature: 0.6, draft_temperature: 0.0}\n"
        "methods: [{name: dyspec, params: {budget: 8}}]\n",
    )
    assert [t.params["verifier"] for t in trials] == ["nss"]
    with pytest.raises(
        SpecError, match="with a draft at temperature 0 .*compatible verifiers: nss"
    ):
        _load(
            tmp_path,
            "sampling: {temperature: 0.6, draft_temperature: 0.0}\n"
            "methods: [{name: dyspec, params: {budget: 8, verifier: specinfer}}]\n",
        )


def test_certify_false(tmp_path):
    sweep, trials = _load(tmp_path, "certify: false\nmethods: [{name: autoregressive}]\n")
    assert [t.certify for t in trials] == [False] and sweep.to_dict()["certify"] is False
    sweep, trials = _load(tmp_path, "methods: [{name: autoregressive}]\n")
    assert trials[0].certify and "certify" not in sweep.to_dict()


@pytest.mark.parametrize(
    "body, message",
    [
        ("sampling: {draft_temperature: -1}", "sampling.draft_temperature: must be >= 0.0"),
        ("sampling: {draft_temperature: hot}", "sampling.draft_temperature: expected a number"),
        ("sampling: {draft_top_p: 0}", "sampling.draft_top_p: must be > 0.0"),
        ("sampling: {draft_top_p: [0.9, 1.5]}", r"sampling.draft_top_p\[1\]: must be <= 1.0"),
        (
            "sampling: {points: [{temperature: 1, draft_top_p: 2}]}",
            r"sampling.points\[0\].draft_top_p: must be <= 1.0",
        ),
        (
            "sampling: {temperature: 0, draft_temperature: 0.6, "
            "points: [{temperature: 0, draft_temperature: 0.6}]}",
            r"points\[0\]: temperature 0, top_p 1, draft_temperature 0.6 is given twice",
        ),
        ("certify: 1", "certify: expected true or false"),
    ],
)
def test_bad_draft_settings(tmp_path, body, message):
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, body + "\nmethods: [{name: linear}]\n")


def test_a_methods_own_draft_sampling(tmp_path):
    """DDTree's vanilla-DFlash chain (Sec. 5): the block drafted by argmax, verified by the
    target's samples, beside a chain drafted and verified at the sweep's temperature."""
    sweep, trials = _load(
        tmp_path,
        "sampling: {temperature: [0.0, 1.0]}\n"
        "methods:\n"
        "  - {name: linear, params: {k: 4}}\n"
        "  - {name: linear, params: {k: 4}, sampling: {draft_temperature: 0.0}}\n",
    )
    got = [(t.temperature, t.draft_temperature, t.params["verifier"]) for t in trials]
    # at T = 0 the method's 0 is the target's: one trial, kept once
    assert got == [(0.0, None, "greedy"), (1.0, None, "naive"), (1.0, 0.0, "nss")]
    stored = sweep.to_dict()["methods"]
    assert "sampling" not in stored[0] and stored[1]["sampling"] == {"draft_temperature": 0.0}
    # the method's setting wins over the sweep's draft axis, for that method only
    _, trials = _load(
        tmp_path,
        "sampling: {temperature: 1.0, draft_temperature: [null, 0.6]}\n"
        "methods:\n"
        "  - {name: iid, params: {K: 2, L: 2}}\n"
        "  - {name: linear, sampling: {draft_temperature: 0.0, draft_top_p: 0.9}}\n",
    )
    got = [(t.method, t.draft_temperature, t.draft_top_p) for t in trials]
    assert got == [("iid", None, None), ("linear", 0.0, 0.9), ("iid", 0.6, None)]


@pytest.mark.parametrize(
    "own, message",
    [
        ("{draft_temperature: -1}", r"methods\[0\].sampling.draft_temperature: must be >= 0.0"),
        ("{draft_top_p: 1.5}", r"methods\[0\].sampling.draft_top_p: must be <= 1.0"),
        (
            "{temperature: 1.0}",
            r"methods\[0\].sampling.temperature: unknown key \(known: draft_temperature",
        ),
        (
            "{draft_temperature: 0.0}\n    params: {verifier: naive}",
            "with a draft at temperature 0 .*compatible verifiers: nss",
        ),
    ],
)
def test_bad_method_sampling(tmp_path, own, message):
    body = f"sampling: {{temperature: 1.0}}\nmethods:\n  - name: linear\n    sampling: {own}\n"
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, body)
