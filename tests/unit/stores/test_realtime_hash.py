"""The realtime hash's layout (stores.realtime_hash): what a read's cells name, decoded, is what
the fields hold, whatever cells a query asks for, and a cell not read or absent is the merge's
identity (0, or no sketch)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from stores import realtime_hash
from stores.realtime_views import EMPTY_DAY, Cell, Measure, RealtimeDay
from stores.rows import VISIT_FIELDS

cells = st.lists(
    st.tuples(st.sampled_from(list(Measure)), st.one_of(st.none(), st.integers(0, 23))), unique=True
).map(tuple)
field_values = st.dictionaries(
    st.sampled_from(
        [
            name if hour is None else realtime_hash.hour_field(name, hour)
            for name in (realtime_hash.PV, realtime_hash.SKETCH, *VISIT_FIELDS)
            for hour in (None, *range(24))
        ]
    ),
    st.integers(-(10**6), 10**6),
)


def _value(name: str, n: int) -> bytes:
    """A stored value as Redis hands it back: an integer's digits, or a sketch's bytes."""
    return f"sketch {n}".encode() if name.startswith(realtime_hash.SKETCH) else str(n).encode()


@given(cells, field_values)
def test_a_read_decodes_to_what_its_fields_hold(read: tuple[Cell, ...], stored: dict[str, int]) -> None:
    raw = {name: _value(name, n) for name, n in stored.items()}
    fields = realtime_hash.fields_of(read)
    day = realtime_hash.decode(read, [raw.get(f) for f in fields])

    def held(name: str, hour: int | None) -> bytes | None:
        return raw.get(name if hour is None else realtime_hash.hour_field(name, hour))

    def number(name: str, hour: int | None) -> int:
        value = held(name, hour)
        return 0 if value is None else int(value)

    expected = RealtimeDay()
    for measure, hour in read:
        if measure is Measure.PAGEVIEWS:
            if hour is None:
                expected = replace(expected, pv=number("pv", None))
            else:
                h_pv = list(expected.h_pv)
                h_pv[hour] = number("pv", hour)
                expected = replace(expected, h_pv=tuple(h_pv))
        elif measure is Measure.VISITORS:
            if hour is None:
                expected = replace(expected, sk=held("sk", None))
            else:
                h_sk = list(expected.h_sk)
                h_sk[hour] = held("sk", hour)
                expected = replace(expected, h_sk=tuple(h_sk))
        else:
            vi, bo, du, vv = (number(name, hour) for name in VISIT_FIELDS)
            sums = (vi, bo, du, vv)
            if hour is None:
                expected = replace(expected, visits=sums)
            else:
                h_visits = list(expected.h_visits)
                h_visits[hour] = sums
                expected = replace(expected, h_visits=tuple(h_visits))
    assert day == expected


def test_nothing_read_or_nothing_held_is_the_empty_day() -> None:
    every = tuple((m, h) for m in Measure for h in (None, *range(24)))
    assert realtime_hash.decode((), []) == EMPTY_DAY
    assert realtime_hash.decode(every, [None] * len(realtime_hash.fields_of(every))) == EMPTY_DAY
    assert len(realtime_hash.fields_of(every)) == 25 * (2 + len(VISIT_FIELDS))
