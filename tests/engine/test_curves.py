"""Forward-cost curves: interpolation by hand, measurement on tiny models through both
engine paths, device information."""

from __future__ import annotations

import pytest

from engine.config import ConfigError
from engine.cost_model import CurvePoint, ForwardCurve, check_grid
from engine.curves import device_info, measure_curve


def _curve(points):
    return ForwardCurve("m", "dev", "float32", "eager", tuple(CurvePoint(*p) for p in points))


CURVE = _curve(
    [
        (100, 1, 1.0),
        (100, 3, 2.0),
        (100, 7, 6.0),
        (300, 1, 2.0),
        (300, 3, 4.0),
        (300, 7, 10.0),
    ]
)


@pytest.mark.parametrize(
    "n, context, expected",
    [
        (1, 100, 1.0),
        (2, 100, 1.5),  # linear in n between 1 and 3
        (5, 100, 4.0),
        (9, 100, 8.0),  # extrapolated from the last two sizes: slope 1
        (0.5, 100, 1.0),  # a forward has a floor: c(1)
        (0, 100, 0.0),
        (2, 200, 0.5 * 1.5 + 0.5 * 3.0),  # linear in C between 100 and 300
        (3, 50, 2.0),  # below the smallest context: clamped to it
        (3, 500, 6.0),  # above the largest: extrapolated, slope 1 / 100 per token of C
    ],
)
def test_cost_interpolates(n, context, expected):
    assert CURVE.cost(n, context) == pytest.approx(expected)


def test_round_trip_dict():
    assert ForwardCurve.from_dict(CURVE.to_dict()) == CURVE


def test_bad_grid_is_refused():
    with pytest.raises(ConfigError, match="sizes"):
        check_grid([0, 1], [128], 3)
    with pytest.raises(ConfigError, match="contexts"):
        check_grid([1], [-1], 3)
    with pytest.raises(ConfigError, match="repeats"):
        check_grid([1], [0], 0)


@pytest.mark.parametrize("engine", ["eager", "fast"])
def test_measure_tiny_curve(llama_pair, engine):
    model = llama_pair.target.model
    calls = []
    curve = measure_curve(
        model,
        "tiny-llama",
        sizes=[1, 4],
        contexts=[0, 16],
        engine=engine,
        repeats=2,
        log=calls.append,
    )
    assert curve.engine == engine and curve.dtype == "float32" and curve.model == "tiny-llama"
    assert {(p.context, p.n) for p in curve.points} == {(0, 1), (0, 4), (16, 1), (16, 4)}
    assert all(p.seconds > 0 for p in curve.points)
    assert len(calls) == 4
    assert curve.device_name == device_info("cpu")["device_name"]


def test_measure_leaves_the_model_usable(llama_pair):
    """The profile drops its appended slots: a cached model of the same factory still
    decodes greedily as autoregressive decoding does."""
    from engine.decode import generate

    before = generate(llama_pair, [1, 2, 3], "autoregressive", 5).tokens
    measure_curve(llama_pair.target.model, "t", sizes=[2], contexts=[4], repeats=1)
    assert generate(llama_pair, [1, 2, 3], "autoregressive", 5).tokens == before


def test_unknown_engine():
    with pytest.raises(ConfigError, match="engine"):
        measure_curve(None, "m", engine="warp")


def test_device_info_cpu():
    info = device_info("cpu")
    assert info["device_name"] and info["torch"] and info["cores"] >= 1
    assert info["driver"] == ""
