"""Cost and SLO reports: pure computations over frozen values read from the catalog.

- `cost`: one plan — $/h by model, GPU type, region, pricing; $ per million tokens per model
  (attribution rule in its docstring); Coral vs baselines; simulation results; LP gap; staleness.
- `history`: over time — dollars and attainment per day and per replan, savings to date, churn.
- `tables`: both as named tables of plain values; `markdown`, `html` and `export` render them.

IO lives in `catalog_db.reports_io` (`build_plan_report`, `build_history_report`); Prefect
artifacts are created by the flows from `ReportResult.markdown` / `.table_rows`.
"""
