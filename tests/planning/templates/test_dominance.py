from hypothesis import given, settings
from hypothesis import strategies as st

from planning.domain import Phase, Stage, Template
from planning.templates.build import template_id
from planning.templates.dominance import dominates, prune, prune_group


def _t(stages: list[tuple[str, int]], tokens_per_s: float, model: str = "m") -> Template:
    st_ = tuple(Stage(g, tp, 10) for g, tp in stages)
    return Template(
        template_id(model, Phase.PREFILL, "chat", st_) + f"{tokens_per_s:.3f}",
        model, Phase.PREFILL, "chat", st_, tokens_per_s, None, 0.5, 4, "synthetic", "1",
    )  # fmt: skip


def test_fewer_gpus_and_faster_dominates() -> None:
    a = _t([("H100", 2)], 100.0)
    b = _t([("H100", 4)], 90.0)
    c = _t([("H100", 2), ("L4", 1)], 150.0)
    assert dominates(a, b) and not dominates(b, a)
    assert not dominates(a, c)  # c is faster, with more GPUs
    assert prune_group([b, a, c]) == [a, c]


def test_different_gpu_types_are_incomparable() -> None:
    a = _t([("H100", 1)], 100.0)
    b = _t([("L4", 1)], 10.0)
    assert prune_group([a, b]) == [a, b] or prune_group([a, b]) == [b, a]


def test_exact_ties_keep_one() -> None:
    a = _t([("H100", 2)], 100.0)
    b = _t([("H100", 1), ("H100", 1)], 100.0)
    assert prune_group([b, a]) == [a]  # fewer stages wins the tie
    assert prune_group([a, b]) == [a]


def test_groups_are_pruned_separately() -> None:
    a = _t([("H100", 1)], 100.0, model="m1")
    b = _t([("H100", 2)], 50.0, model="m2")
    assert len(prune([a, b])) == 2


templates = st.lists(
    st.builds(
        _t,
        st.lists(
            st.tuples(st.sampled_from(["A", "B", "C"]), st.sampled_from([1, 2, 4])),
            min_size=1,
            max_size=3,
        ),
        st.integers(1, 20).map(float),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(templates)
def test_kept_are_exactly_the_non_dominated(group: list[Template]) -> None:
    kept = prune_group(group)
    ids = {t.template_id for t in kept}
    for t in group:
        dominated_by_kept = any(dominates(k, t) for k in kept if k.template_id != t.template_id)
        if t.template_id in ids:
            assert not dominated_by_kept  # kept ones are mutually non-dominated
        else:
            assert dominated_by_kept  # each dropped one has a kept dominator
