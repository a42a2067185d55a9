"""Pruning by dominance: keep exactly the templates no other template dominates.

Within one (model, phase, workload class), template A dominates B when A's GPU vector is <= B's
in every GPU type and A's throughput (tokens/s; colocated: requests/s) is >= B's.

Why it is lossless. In the placement MILP a template enters only through its GPU vector (GPU
and inventory constraints, cost linear in GPUs) and its throughput (capacity constraints of
its model, phase and class). Replacing every instance of B by an instance of A keeps every
capacity constraint satisfied and uses no more GPUs of any type, so for every price vector and
every inventory the optimum over the kept templates equals the optimum over all of them.

Exact ties (same vector, same throughput) are interchangeable; we keep one: the one with fewer
stages, then the smaller template_id, so the result does not depend on input order.

Algorithm. Sort by (total GPUs, throughput descending, stages, id): any template that
dominates B comes before B in this order. Scan once and test B only against the templates
kept so far: if a dropped template D dominates B, the kept template that dominated D also
dominates B (dominance is transitive), so nothing is missed. Cost O(n x kept) per group.
"""

from __future__ import annotations

from collections.abc import Iterable

from planning.domain import Phase, Template


def rating(t: Template) -> float:
    """The throughput dominance compares: requests/s for colocated, tokens/s otherwise."""
    value = t.throughput_req_per_s if t.phase is Phase.COLOCATED else t.throughput_tokens_per_s
    if value is None:
        raise ValueError(f"template {t.template_id} has no throughput to compare")
    return value


def dominates(a: Template, b: Template) -> bool:
    """A's GPU vector <= B's component-wise and A's throughput >= B's (same group assumed)."""
    va, vb = a.gpu_vector, b.gpu_vector
    return all(n <= vb.get(g, 0) for g, n in va.items()) and rating(a) >= rating(b)


def _order(t: Template) -> tuple[int, float, int, str]:
    return t.total_gpus, -rating(t), len(t.stages), t.template_id


def prune_group(templates: Iterable[Template]) -> list[Template]:
    """Non-dominated templates of one (model, phase, class) group, one per exact tie."""
    kept: list[Template] = []
    for candidate in sorted(templates, key=_order):
        if not any(dominates(k, candidate) for k in kept):
            kept.append(candidate)
    return kept


def prune(templates: Iterable[Template]) -> list[Template]:
    """Non-dominated templates of every (model, phase, class) group."""
    groups: dict[tuple[str, Phase, str], list[Template]] = {}
    for t in templates:
        groups.setdefault((t.model, t.phase, t.workload_class), []).append(t)
    kept: list[Template] = []
    for key in sorted(groups):
        kept.extend(prune_group(groups[key]))
    return kept
