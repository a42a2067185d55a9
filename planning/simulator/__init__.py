"""Discrete-event simulator of P/D-disaggregated and colocated LLM serving."""
