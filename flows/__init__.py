"""Wiring: Prefect flows, the `coral` CLI and the settings object. Nothing imports flows/."""
