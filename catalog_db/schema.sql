-- Coral catalog: the only DDL in the project.
--
-- The file is a sequence of forward migrations. Each starts with a marker line
--     -- migration: <version> <description>
-- and runs once, in its own transaction, when the catalog's schema_version is below
-- <version> (catalog_db.migrations applies them). Never edit a released migration: append a
-- new one. Units live in column names (_gib, _gbps, _tflops, _usd_per_hr, _s, _ms, _tokens).
-- Column meanings for users are in catalog_db/README.md.

-- migration: 1 initial catalog: reference data, profiles, templates, inventory, plans, deploy, reports
CREATE TABLE IF NOT EXISTS schema_version (
    version      INTEGER PRIMARY KEY,
    description  VARCHAR NOT NULL,
    applied_at   TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- Reference data (catalog_db/data/*.csv, each row with its source) ---------------------------

CREATE TABLE IF NOT EXISTS gpu_types (
    gpu_type              VARCHAR PRIMARY KEY,      -- e.g. H100-SXM
    vendor                VARCHAR NOT NULL,
    memory_gib            DOUBLE NOT NULL CHECK (memory_gib > 0),
    hbm_bandwidth_gbps    DOUBLE NOT NULL CHECK (hbm_bandwidth_gbps > 0),
    bf16_dense_tflops     DOUBLE CHECK (bf16_dense_tflops > 0),   -- NULL: no BF16 tensor cores
    fp8_dense_tflops      DOUBLE CHECK (fp8_dense_tflops > 0),    -- NULL: no FP8 support
    fp16_dense_tflops     DOUBLE CHECK (fp16_dense_tflops > 0),
    intra_node_link       VARCHAR NOT NULL,
    intra_node_bw_gbps    DOUBLE NOT NULL CHECK (intra_node_bw_gbps > 0),  -- one direction
    tdp_w                 DOUBLE CHECK (tdp_w > 0),
    gpus_per_machine      INTEGER NOT NULL CHECK (gpus_per_machine > 0),
    verified              BOOLEAN NOT NULL,
    source                VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS models (
    model                    VARCHAR PRIMARY KEY,   -- Hugging Face repo id
    num_layers               INTEGER NOT NULL CHECK (num_layers > 0),
    hidden_size              INTEGER NOT NULL CHECK (hidden_size > 0),
    num_heads                INTEGER NOT NULL CHECK (num_heads > 0),
    num_kv_heads             INTEGER NOT NULL CHECK (num_kv_heads > 0),
    head_dim                 INTEGER NOT NULL CHECK (head_dim > 0),
    intermediate_size        INTEGER NOT NULL CHECK (intermediate_size > 0),
    moe_intermediate_size    INTEGER,
    vocab_size               INTEGER NOT NULL CHECK (vocab_size > 0),
    num_experts              INTEGER,               -- NULL for dense models
    num_experts_per_tok      INTEGER,               -- active experts per token
    num_shared_experts       INTEGER,
    first_k_dense_layers     INTEGER,
    attention                VARCHAR NOT NULL CHECK (attention IN ('gqa', 'mla')),
    kv_lora_rank             INTEGER,
    qk_rope_head_dim         INTEGER,
    max_position_embeddings  INTEGER NOT NULL CHECK (max_position_embeddings > 0),
    total_params_b           DOUBLE NOT NULL CHECK (total_params_b > 0),
    active_params_b          DOUBLE NOT NULL CHECK (active_params_b > 0),
    default_dtype            VARCHAR NOT NULL CHECK (default_dtype IN ('bf16', 'fp16', 'fp8')),
    verified                 BOOLEAN NOT NULL,
    source                   VARCHAR NOT NULL
);

-- One row per rentable instance type, region and zone ('' when the cloud has no zones).
-- Prices are for the whole machine; GCP VM and accelerator parts are already summed.
CREATE TABLE IF NOT EXISTS instance_types (
    cloud                 VARCHAR NOT NULL,
    instance_type         VARCHAR NOT NULL,
    region                VARCHAR NOT NULL,
    zone                  VARCHAR NOT NULL DEFAULT '',
    gpu_type              VARCHAR NOT NULL REFERENCES gpu_types (gpu_type),
    gpu_count             INTEGER NOT NULL CHECK (gpu_count > 0),
    vcpus                 DOUBLE,
    memory_gib            DOUBLE,
    ondemand_usd_per_hr   DOUBLE CHECK (ondemand_usd_per_hr > 0),  -- NULL: not sold on demand
    spot_usd_per_hr       DOUBLE CHECK (spot_usd_per_hr > 0),      -- NULL: no spot price
    source                VARCHAR NOT NULL,
    as_of                 DATE,                                    -- NULL: date unknown
    PRIMARY KEY (cloud, instance_type, region, zone)
);

-- Workload classes: the (input, output) length buckets and SLOs templates are evaluated for.
CREATE TABLE IF NOT EXISTS workload_classes (
    workload_class     VARCHAR PRIMARY KEY,   -- e.g. 'in1024_out256'
    input_tokens       INTEGER NOT NULL CHECK (input_tokens > 0),
    output_tokens      INTEGER NOT NULL CHECK (output_tokens > 0),
    ttft_slo_s         DOUBLE NOT NULL CHECK (ttft_slo_s > 0),
    tpot_slo_s         DOUBLE NOT NULL CHECK (tpot_slo_s > 0),
    description        VARCHAR
);

-- Offline profiling ----------------------------------------------------------------------------

-- One measured or predicted latency point. Prefill: seq_len_tokens = prompt length per request.
-- Decode: seq_len_tokens = mean context length, latency = one decode step for the whole batch.
CREATE TABLE IF NOT EXISTS profiles (
    model              VARCHAR NOT NULL,
    gpu_type           VARCHAR NOT NULL,
    tp                 INTEGER NOT NULL CHECK (tp > 0),
    num_layers         INTEGER NOT NULL CHECK (num_layers > 0),   -- layers held by the stage
    phase              VARCHAR NOT NULL CHECK (phase IN ('prefill', 'decode')),
    dtype              VARCHAR NOT NULL CHECK (dtype IN ('bf16', 'fp16', 'fp8')),
    batch_size         INTEGER NOT NULL CHECK (batch_size > 0),
    seq_len_tokens     INTEGER NOT NULL CHECK (seq_len_tokens > 0),
    backend            VARCHAR NOT NULL,                          -- aic | analytic | vllm
    backend_version    VARCHAR NOT NULL,
    latency_ms         DOUBLE NOT NULL CHECK (latency_ms > 0),
    weights_gib        DOUBLE,         -- per GPU, for this stage
    kv_gib_per_token   DOUBLE,         -- per GPU, KV cache bytes of one token in this stage
    max_kv_tokens      BIGINT,         -- KV-cache capacity per GPU at the configured utilisation
    measured_on        VARCHAR,        -- GPU name reported by the host (vllm backend)
    created_at         TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (model, gpu_type, tp, num_layers, phase, dtype, batch_size, seq_len_tokens,
                 backend, backend_version)
);

-- Serving templates ----------------------------------------------------------------------------

-- A template set is one atomic rebuild; exactly one set is current.
CREATE TABLE IF NOT EXISTS template_sets (
    template_set_id    VARCHAR PRIMARY KEY,
    generated_at       TIMESTAMP NOT NULL DEFAULT current_timestamp,
    is_current         BOOLEAN NOT NULL DEFAULT false,
    enumerated         INTEGER,
    evaluated          INTEGER,
    kept               INTEGER,
    params             JSON
);

CREATE TABLE IF NOT EXISTS templates (
    template_id              VARCHAR PRIMARY KEY,  -- stable hash of model/phase/class/stages
    template_set_id          VARCHAR NOT NULL,
    model                    VARCHAR NOT NULL,
    phase                    VARCHAR NOT NULL CHECK (phase IN ('prefill', 'decode', 'colocated')),
    workload_class           VARCHAR NOT NULL,
    num_stages               INTEGER NOT NULL CHECK (num_stages > 0),
    stages                   JSON NOT NULL,        -- [{"gpu_type":..,"tp":..,"num_layers":..}, ...]
    total_gpus               INTEGER NOT NULL CHECK (total_gpus > 0),
    throughput_tokens_per_s  DOUBLE,               -- prefill or decode tokens/s under the SLO
    throughput_req_per_s     DOUBLE,               -- colocated: requests/s of the class
    latency_s                DOUBLE,               -- TTFT (prefill) or TPOT (decode) at that load
    max_batch                INTEGER,
    ref_cost_usd_per_hr      DOUBLE,               -- at reference on-demand $/GPU-hour
    pp_layer_partition       VARCHAR,              -- VLLM_PP_LAYER_PARTITION, e.g. '22,20,20,18'
    profile_backend          VARCHAR NOT NULL,
    profile_backend_version  VARCHAR NOT NULL,
    generated_at             TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS template_gpus (
    template_id  VARCHAR NOT NULL,
    gpu_type     VARCHAR NOT NULL,
    gpu_count    INTEGER NOT NULL CHECK (gpu_count > 0),
    PRIMARY KEY (template_id, gpu_type)
);

-- Cloud inventory --------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS inventory_snapshots (
    snapshot_id   VARCHAR PRIMARY KEY,
    source        VARCHAR NOT NULL,             -- aws | file | catalog
    taken_at      TIMESTAMP NOT NULL,
    regions       VARCHAR[],
    status        VARCHAR NOT NULL CHECK (status IN ('ok', 'partial', 'failed')),
    error         VARCHAR,                      -- plain statement of what failed; never secrets
    params        JSON
);

CREATE TABLE IF NOT EXISTS inventory_items (
    snapshot_id          VARCHAR NOT NULL,
    cloud                VARCHAR NOT NULL,
    region               VARCHAR NOT NULL,
    zone                 VARCHAR NOT NULL DEFAULT '',
    instance_type        VARCHAR NOT NULL,
    pricing              VARCHAR NOT NULL CHECK (pricing IN ('on_demand', 'spot')),
    gpu_type             VARCHAR,               -- NULL when unknown to the catalog (flagged)
    gpu_count            INTEGER NOT NULL CHECK (gpu_count > 0),
    price_usd_per_hr     DOUBLE CHECK (price_usd_per_hr > 0),
    available_count      INTEGER NOT NULL CHECK (available_count >= 0),
    known_gpu            BOOLEAN NOT NULL DEFAULT true,
    provenance           VARCHAR NOT NULL,      -- API call or file:line the row came from
    PRIMARY KEY (snapshot_id, cloud, region, zone, instance_type, pricing)
);

-- Workloads (demand per model per window) ----------------------------------------------------------

CREATE TABLE IF NOT EXISTS workloads (
    workload_id          VARCHAR NOT NULL,
    model                VARCHAR NOT NULL,
    window_start         TIMESTAMP,
    window_end           TIMESTAMP,
    rate_req_per_s       DOUBLE NOT NULL CHECK (rate_req_per_s >= 0),
    mean_input_tokens    DOUBLE NOT NULL CHECK (mean_input_tokens > 0),
    mean_output_tokens   DOUBLE NOT NULL CHECK (mean_output_tokens > 0),
    p90_input_tokens     DOUBLE,
    p90_output_tokens    DOUBLE,
    ttft_slo_s           DOUBLE NOT NULL CHECK (ttft_slo_s > 0),
    tpot_slo_s           DOUBLE NOT NULL CHECK (tpot_slo_s > 0),
    priority             DOUBLE NOT NULL DEFAULT 1.0,
    source               VARCHAR NOT NULL,      -- trace | forecast | manual | scenario:<name>
    created_at           TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (workload_id, model)
);

-- Placement plans --------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS plans (
    plan_id             VARCHAR PRIMARY KEY,
    created_at          TIMESTAMP NOT NULL DEFAULT current_timestamp,
    kind                VARCHAR NOT NULL,       -- coral | homogeneous | melange | homogeneous_pd
    parent_plan_id      VARCHAR,                -- baselines point at the Coral plan they compare to
    mode                VARCHAR NOT NULL CHECK (mode IN ('cost', 'goodput')),
    solver              VARCHAR NOT NULL,
    status              VARCHAR NOT NULL CHECK (status IN ('optimal', 'feasible', 'infeasible')),
    objective           DOUBLE,
    cost_usd_per_hr     DOUBLE,
    lp_bound            DOUBLE,
    gap                 DOUBLE,                 -- (objective - bound) / |objective|
    solve_s             DOUBLE,
    served_fraction     DOUBLE,                 -- demand-weighted, 1.0 in cost mode
    snapshot_id         VARCHAR,
    workload_id         VARCHAR,
    template_set_id     VARCHAR,
    stale               BOOLEAN NOT NULL DEFAULT false,
    snapshot_age_s      DOUBLE,
    explanation         VARCHAR,                -- what binds when infeasible
    params              JSON
);

CREATE TABLE IF NOT EXISTS plan_assignments (
    plan_id        VARCHAR NOT NULL,
    template_id    VARCHAR NOT NULL,
    model          VARCHAR NOT NULL,
    phase          VARCHAR NOT NULL,
    cloud          VARCHAR NOT NULL,
    region         VARCHAR NOT NULL,
    pricing        VARCHAR NOT NULL CHECK (pricing IN ('on_demand', 'spot')),
    count          INTEGER NOT NULL CHECK (count > 0),
    PRIMARY KEY (plan_id, template_id, cloud, region, pricing)
);

CREATE TABLE IF NOT EXISTS plan_rentals (
    plan_id            VARCHAR NOT NULL,
    cloud              VARCHAR NOT NULL,
    region             VARCHAR NOT NULL,
    instance_type      VARCHAR NOT NULL,
    pricing            VARCHAR NOT NULL CHECK (pricing IN ('on_demand', 'spot')),
    gpu_type           VARCHAR NOT NULL,
    gpu_count          INTEGER NOT NULL,       -- GPUs per machine
    count              INTEGER NOT NULL CHECK (count > 0),
    price_usd_per_hr   DOUBLE NOT NULL,        -- per machine
    PRIMARY KEY (plan_id, cloud, region, instance_type, pricing)
);

CREATE TABLE IF NOT EXISTS plan_demand (
    plan_id                 VARCHAR NOT NULL,
    model                   VARCHAR NOT NULL,
    region                  VARCHAR NOT NULL,
    pd_rate_req_per_s       DOUBLE NOT NULL,    -- served P/D-disaggregated
    coloc_rate_req_per_s    DOUBLE NOT NULL,    -- served by colocated templates
    served_fraction         DOUBLE NOT NULL,
    PRIMARY KEY (plan_id, model, region)
);

-- Deployments and rollouts ------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS deployments (
    deployment_id   VARCHAR PRIMARY KEY,
    plan_id         VARCHAR NOT NULL,
    target          VARCHAR NOT NULL,           -- kubernetes | ec2 | local | dry-run
    status          VARCHAR NOT NULL,           -- pending | applying | active | failed | rolled_back | superseded
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    render_dir      VARCHAR,
    spec            JSON
);

CREATE TABLE IF NOT EXISTS deployment_units (
    deployment_id   VARCHAR NOT NULL,
    unit_id         VARCHAR NOT NULL,           -- stable: model/region/template/ordinal
    kind            VARCHAR NOT NULL,           -- engine | router
    model           VARCHAR NOT NULL,
    region          VARCHAR NOT NULL,
    role            VARCHAR,                    -- prefill | decode | colocated (engines)
    template_id     VARCHAR,
    instance_type   VARCHAR,
    spec            JSON NOT NULL,              -- rendered args, env, resources
    external_id     VARCHAR,                    -- cloud instance id / k8s name once applied
    status          VARCHAR NOT NULL,
    PRIMARY KEY (deployment_id, unit_id)
);

CREATE TABLE IF NOT EXISTS rollout_events (
    deployment_id   VARCHAR NOT NULL,
    action_id       VARCHAR NOT NULL,           -- stable id of a diff action; makes reruns idempotent
    seq             INTEGER NOT NULL,
    action          VARCHAR NOT NULL,           -- create | update_router | flip_role | drain | delete | rollback
    unit_id         VARCHAR,
    status          VARCHAR NOT NULL,           -- started | done | failed | skipped
    message         VARCHAR,
    event_at        TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (deployment_id, action_id, status)
);

-- Simulation and reports --------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS sim_runs (
    sim_run_id           VARCHAR PRIMARY KEY,
    plan_id              VARCHAR,
    trace                VARCHAR NOT NULL,
    policy               VARCHAR NOT NULL,      -- static | fluidtoken | fluidrole | fluidpd | colocated
    seed                 INTEGER NOT NULL,
    created_at           TIMESTAMP NOT NULL DEFAULT current_timestamp,
    wall_s               DOUBLE,
    simulated_s          DOUBLE,
    requests             INTEGER NOT NULL,
    completed            INTEGER NOT NULL,
    dropped              INTEGER NOT NULL,
    slo_attainment       DOUBLE,                -- fraction meeting both TTFT and TPOT SLOs
    goodput_req_per_s    DOUBLE,
    ttft_p50_s           DOUBLE,
    ttft_p99_s           DOUBLE,
    tpot_p50_s           DOUBLE,
    tpot_p99_s           DOUBLE,
    gpu_hours            DOUBLE,
    cost_usd             DOUBLE,
    params               JSON
);

CREATE TABLE IF NOT EXISTS cost_reports (
    report_id                VARCHAR PRIMARY KEY,
    plan_id                  VARCHAR,
    created_at               TIMESTAMP NOT NULL DEFAULT current_timestamp,
    period_start             TIMESTAMP,
    period_end               TIMESTAMP,
    total_usd_per_hr         DOUBLE,
    usd_per_million_tokens   DOUBLE,
    slo_attainment           DOUBLE,
    goodput_req_per_s        DOUBLE,
    snapshot_age_s           DOUBLE,
    html_path                VARCHAR,
    summary                  JSON
);

-- One line of a report: a cost or ratio broken down by one dimension.
CREATE TABLE IF NOT EXISTS cost_report_items (
    report_id    VARCHAR NOT NULL,
    dimension    VARCHAR NOT NULL,   -- model | gpu_type | region | pricing | baseline
    key          VARCHAR NOT NULL,
    usd_per_hr   DOUBLE,
    ratio        DOUBLE,             -- baseline rows: baseline cost / Coral cost
    PRIMARY KEY (report_id, dimension, key)
);

-- Views for users (documented in catalog_db/README.md) --------------------------------------------

-- Cheapest reference price of one GPU-hour per GPU type, on demand and spot, across all clouds.
CREATE OR REPLACE VIEW gpu_prices AS
SELECT gpu_type,
       min(ondemand_usd_per_hr / gpu_count) AS ondemand_usd_per_gpu_hr,
       min(spot_usd_per_hr / gpu_count)     AS spot_usd_per_gpu_hr,
       count(*)                              AS offers
FROM instance_types
GROUP BY gpu_type;

-- Every current template with its cost at reference on-demand prices and $ per million tokens.
CREATE OR REPLACE VIEW template_costs AS
WITH cost AS (
    SELECT tg.template_id, sum(tg.gpu_count * p.ondemand_usd_per_gpu_hr) AS usd_per_hr
    FROM template_gpus tg JOIN gpu_prices p USING (gpu_type)
    GROUP BY tg.template_id
)
SELECT t.template_id, t.model, t.phase, t.workload_class, t.num_stages, t.total_gpus,
       t.stages, t.throughput_tokens_per_s, t.throughput_req_per_s, cost.usd_per_hr,
       cost.usd_per_hr / nullif(t.throughput_tokens_per_s * 3600, 0) * 1e6
           AS usd_per_million_tokens
FROM templates t
JOIN template_sets s ON s.template_set_id = t.template_set_id AND s.is_current
JOIN cost USING (template_id);

-- Per model, phase and workload class: the template with the lowest $ per million tokens.
CREATE OR REPLACE VIEW cheapest_templates AS
SELECT * FROM template_costs
QUALIFY row_number() OVER (PARTITION BY model, phase, workload_class
                           ORDER BY usd_per_million_tokens NULLS LAST, total_gpus) = 1;

-- Plan cost by GPU type, region and pricing class.
CREATE OR REPLACE VIEW plan_cost_by_gpu_region AS
SELECT plan_id, gpu_type, cloud, region, pricing,
       sum(count * gpu_count)        AS gpus,
       sum(count * price_usd_per_hr) AS usd_per_hr
FROM plan_rentals
GROUP BY ALL;

-- The latest inventory snapshot that was read successfully.
CREATE OR REPLACE VIEW latest_inventory AS
SELECT i.*, s.source, s.taken_at
FROM inventory_items i
JOIN (SELECT snapshot_id, source, taken_at FROM inventory_snapshots
      WHERE status IN ('ok', 'partial') ORDER BY taken_at DESC LIMIT 1) s USING (snapshot_id);

-- migration: 2 report views: report lines, Coral plans against their baselines
-- Every line of every cost report with its report's context (see catalog_db/README.md for
-- what `ratio` means per dimension).
CREATE OR REPLACE VIEW cost_report_lines AS
SELECT r.report_id, r.plan_id, r.created_at, r.period_start, r.period_end,
       i.dimension, i.key, i.usd_per_hr, i.ratio,
       r.total_usd_per_hr, r.slo_attainment, r.html_path
FROM cost_reports r JOIN cost_report_items i USING (report_id);

-- Each Coral plan beside the baselines solved on the same inputs: baseline $/h over Coral's.
CREATE OR REPLACE VIEW plan_vs_baselines AS
SELECT c.plan_id, c.created_at, c.mode, c.status, c.cost_usd_per_hr AS coral_usd_per_hr,
       b.kind AS baseline, b.status AS baseline_status, b.cost_usd_per_hr AS baseline_usd_per_hr,
       b.cost_usd_per_hr / nullif(c.cost_usd_per_hr, 0) AS baseline_over_coral,
       c.served_fraction AS coral_served_fraction, b.served_fraction AS baseline_served_fraction
FROM plans c JOIN plans b ON b.parent_plan_id = c.plan_id
WHERE c.kind = 'coral';
