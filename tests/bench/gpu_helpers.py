"""What the tests of the bench.gpu programs share."""

import math


def finite_positive(x, where: str) -> None:
    assert isinstance(x, (int, float)) and math.isfinite(x) and x > 0, (where, x)
