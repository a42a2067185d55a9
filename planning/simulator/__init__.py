"""Discrete-event simulator of P/D-disaggregated and colocated LLM serving.

`run(workload, instances, router, config) -> SimResult` is the pure entry point; instance
performance comes as data (`planning.routing.instance_perf.InstancePerf`).
"""

from planning.simulator.engine import SimConfig, SimInstance, run
from planning.simulator.results import RequestResult, SimResult

__all__ = ["RequestResult", "SimConfig", "SimInstance", "SimResult", "run"]
