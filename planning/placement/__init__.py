"""Online placement: how many of each serving template to run where, jointly for all models.

`solve.solve(problem) -> Plan` is the entry point; `baselines.solve_baseline(kind, problem)`
solves the same MILP over a restricted template set so plans compare like for like.
"""
