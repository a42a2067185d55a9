"""Coral's pure core: domain types and the maths (templates, placement, simulation).

Nothing here imports duckdb, prefect, dask, boto3 or an HTTP client: frozen values in, frozen
values out. The edges (catalog_db, profiling, deploy, reports) convert to and from these types.
"""
