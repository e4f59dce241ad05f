"""Models over simulated results: latency equation, aggregation, and (later) MD, MWP/CWP,
bottleneck and SM utilisation. Pure functions over arrays, an Arch and a Trace."""
