"""Serving templates: enumerate, evaluate and prune the serving instances worth running.

Offline stage between profiling and placement. For every model, phase (prefill, decode,
colocated) and workload class, `build.build_templates` turns profile tables into the
non-dominated set of `planning.domain.Template` values:

1. `stage_model`: one stage shape (GPU type, TP) of one model and phase as a function of the
   number of layers it holds: latency by linear interpolation between profiled layer counts,
   per-GPU memory and KV-cache capacity.
2. `enumerate`: stage shapes and the memory-feasible multisets of them (pipelines): one TP
   degree per pipeline (vLLM's TP x PP grid), at most 2 GPU types, and by default only
   *minimal* pipelines (every stage needed to hold the model) — a search-space choice made
   for build time, measured in `benchmarks/results/templates.md`; `PipelineSpace.ALL` lifts it.
3. `layer_split`: the integer layer split minimising the pipeline's bottleneck stage time.
4. `evaluate`: throughput under the class's SLOs (prefill tokens/s under TTFT, decode tokens/s
   under TPOT and KV memory, colocated requests/s under both).
5. `dominance`: keep exactly the templates no other template dominates.

Pure: frozen values in, frozen values out; no IO. `catalog_db.templates_io` stores the result.
"""
