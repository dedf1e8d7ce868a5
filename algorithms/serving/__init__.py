"""Serving several models on a model-parallel group with swapping (Computron, Zou et al., arXiv 2306.13835).

Modules: ``model`` (configuration, the swap-time law, defaults), ``arrivals``
(Gamma-process requests), ``engine`` (the discrete-event engine and its summary),
``exec_cost`` (per-batch time from the cost model), ``real`` (shared-memory pools
and copy workers: real swaps), ``gpu`` (CuPy pinned copies where a GPU is present),
``experiments`` (what the command line and the benchmark run).
"""

from .arrivals import Request, generate, skewed_rates
from .engine import Result, latency_cdf_plot, run, summary
from .model import LINK_GBPS, OPT13B_BYTES, ServeConfig, ServingError, swap_time_s, validate

__all__ = ["LINK_GBPS", "OPT13B_BYTES", "Request", "Result", "ServeConfig", "ServingError", "generate",
           "latency_cdf_plot", "run", "skewed_rates", "summary", "swap_time_s", "validate"]
