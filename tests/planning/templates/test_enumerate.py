import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from planning.templates.enumerate import count_multisets, minimal_multisets


def _brute_force(caps: list[int], total: int, max_stages: int) -> set[tuple[int, ...]]:
    found = set()
    for k in range(1, max_stages + 1):
        for combo in itertools.combinations_with_replacement(range(len(caps)), k):
            held = sum(caps[i] for i in combo)
            needed = all(held - caps[i] < total for i in combo)
            if held >= total and needed and min(caps[i] for i in combo) > 0:
                found.add(tuple(sorted(combo)))
    return found


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=7),
    st.integers(1, 80),
    st.integers(1, 4),
)
def test_minimal_multisets_equal_brute_force(caps: list[int], total: int, depth: int) -> None:
    found = minimal_multisets(caps, total, depth)
    assert len(found) == len(set(map(lambda c: tuple(sorted(c)), found)))  # each once
    assert {tuple(sorted(c)) for c in found} == _brute_force(caps, total, depth)


def test_count_multisets() -> None:
    assert count_multisets(3, 2) == 9  # 3 singles + 6 pairs
    brute = sum(len(list(itertools.combinations_with_replacement(range(6), k))) for k in (1, 2, 3))
    assert count_multisets(6, 3) == brute
