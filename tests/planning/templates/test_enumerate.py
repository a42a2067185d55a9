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


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=6),
    st.integers(1, 80),
    st.integers(1, 4),
)
def test_all_space_is_every_feasible_multiset(caps: list[int], total: int, depth: int) -> None:
    found = minimal_multisets(caps, total, depth, minimal=False)
    brute = {
        combo
        for k in range(1, depth + 1)
        for combo in itertools.combinations_with_replacement(range(len(caps)), k)
        if sum(caps[i] for i in combo) >= total and min(caps[i] for i in combo) > 0
    }
    assert len(found) == len(brute)
    assert {tuple(sorted(c)) for c in found} == brute
    assert set(map(lambda c: tuple(sorted(c)), minimal_multisets(caps, total, depth))) <= brute


def test_count_multisets_equals_brute_force() -> None:
    assert count_multisets([1, 1, 1], 2) == 9  # 3 singles + 6 pairs
    kinds = ["a", "a", "b", "c", "c", "c"]  # 6 shapes of 3 GPU types
    for depth in (1, 2, 3, 4):
        for max_kinds in (1, 2, 3):
            brute = sum(
                1
                for k in range(1, depth + 1)
                for combo in itertools.combinations_with_replacement(range(6), k)
                if len({kinds[i] for i in combo}) <= max_kinds
            )
            assert count_multisets([2, 1, 3], depth, max_kinds) == brute


def test_gpu_type_limit_in_enumeration() -> None:
    caps, kinds = [5, 5, 5], ["a", "b", "c"]
    assert len(minimal_multisets(caps, 15, 3, kinds, 3)) == 10  # every multiset of size 3
    assert len(minimal_multisets(caps, 15, 3, kinds, 2)) == 9  # all but (a, b, c)
    assert all(len({kinds[i] for i in c}) <= 2 for c in minimal_multisets(caps, 15, 3, kinds, 2))
    assert len(minimal_multisets(caps, 15, 3, kinds, 1)) == 3
