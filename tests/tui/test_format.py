"""The monitor's cell text: unavailable (n/a) and idle (-) told apart, sizes in kubectl's binary units."""

from __future__ import annotations

import pytest

from mmsctl.tui.format import fmt_bytes, fmt_count, fmt_ms, fmt_rate, fmt_workers


@pytest.mark.parametrize("value, text", [
    (None, "n/a"), (0, "0B"), (1023, "1023B"), (1024, "1.0Ki"), (1536, "1.5Ki"), (10 * 1024, "10Ki"),
    (180 << 20, "180Mi"), (3 << 30, "3.0Gi"), (5 << 40, "5120Gi"),
])
def test_bytes_in_binary_units(value: object, text: str) -> None:
    assert fmt_bytes(value) == text  # type: ignore[arg-type]


def test_unavailable_and_idle_differ() -> None:
    assert (fmt_rate(None, known=False), fmt_rate(None), fmt_rate(0.0)) == ("n/a", "-", "0")
    assert (fmt_ms(None, known=False), fmt_ms(None), fmt_ms(8.25), fmt_ms(1500)) == ("n/a", "-", "8.25ms", "1.5s")
    assert (fmt_count(3.0), fmt_workers(1, 2), fmt_workers(None, None)) == ("3", "1/2", "n/a")
