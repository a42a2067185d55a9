"""Test doubles for the deploy edge (fake engines); never used in production."""
