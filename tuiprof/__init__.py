"""tuiprof: a terminal profiler for CUDA memory behaviour.

Snapshot memory traces are replayed through a stochastic model of the GPU memory hierarchy
(Baghsorkhi et al., PPoPP'12) to give per-load L1/L2 hit ratios and expected latencies with
confidence intervals.
"""

__version__ = "0.1.0"
