"""Launch script for bfs.cu, demo ``bfs``: Rodinia's breadth-first search, one level per launch pair.

    tuiprof report demo_traces/bfs.cu --launch demo_traces/bfs_launch.py --kernel bfs_expand --launch-index 5

A random directed graph of 65536 nodes with 4-12 out-edges each (mean 8) to uniformly random
nodes, searched from node 0: each level launches bfs_expand then bfs_update (512 threads per CTA,
as Rodinia) until a level reaches no new node (9 levels, 18 launches). The first bfs_expand has a
single node in its frontier; ``--launch-index 5`` picks level 5, whose 12501 frontier nodes are
scattered over the warps. The reference is a NumPy BFS.
"""

import numpy as np

ARCH = "gtx480"  # the GPU model this demo is profiled for (--arch overrides it)
N, BLOCK, SOURCE = 65536, 512, 0
MAX_LEVELS = 64  # a guard against a runaway search


def inputs() -> dict[str, np.ndarray]:
    """The graph (CSR) and the search state before the first level, in allocation order."""
    rng = np.random.default_rng(65536)
    row_ptr = np.zeros(N + 1, dtype=np.int32)
    np.cumsum(rng.integers(4, 13, N), out=row_ptr[1:])
    frontier = np.zeros(N, dtype=np.uint8)
    frontier[SOURCE] = 1
    cost = np.full(N, -1, dtype=np.int32)
    cost[SOURCE] = 0
    return {"row_ptr": row_ptr, "edges": rng.integers(0, N, row_ptr[-1], dtype=np.int32),
            "mask": frontier, "updating": np.zeros(N, dtype=np.uint8), "visited": frontier.copy(),
            "cost": cost}


def reference(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each node's BFS level from SOURCE (-1: unreachable), a frontier at a time."""
    row_ptr, edges = inp["row_ptr"].astype(np.int64), inp["edges"]
    cost = np.full(N, -1, dtype=np.int32)
    cost[SOURCE] = 0
    frontier, level = np.array([SOURCE]), 0
    while frontier.size:
        first, count = row_ptr[frontier], row_ptr[frontier + 1] - row_ptr[frontier]
        at = np.repeat(first - np.cumsum(count) + count, count) + np.arange(count.sum())
        reached = edges[at]
        frontier = np.unique(reached[cost[reached] < 0])
        level += 1
        cost[frontier] = level
    return {"cost": cost, "visited": (cost >= 0).astype(np.uint8)}


def setup(dev) -> dict[str, np.ndarray]:
    """Allocate, run every level, and return the outputs read back from the device."""
    buf = {name: dev.to_device(a) for name, a in inputs().items()}
    over = dev.zeros(1, np.uint8)
    grid = -(-N // BLOCK)
    for _level in range(MAX_LEVELS):
        dev.launch("bfs_expand", grid, BLOCK, (buf["row_ptr"], buf["edges"], buf["mask"], buf["updating"],
                                               buf["visited"], buf["cost"], over, np.int32(N)))
        dev.launch("bfs_update", grid, BLOCK, (buf["mask"], buf["updating"], buf["visited"], over, np.int32(N)))
        if not dev.from_device(over)[0]:
            break
    else:
        raise RuntimeError(f"the search did not end within {MAX_LEVELS} levels (this graph has 9)")
    return {"cost": dev.from_device(buf["cost"]), "visited": dev.from_device(buf["visited"])}


def check(out: dict[str, np.ndarray]) -> None:
    """Raise AssertionError unless `out` (from `setup`) is the reference's result."""
    want = reference(inputs())
    np.testing.assert_array_equal(out["cost"], want["cost"])
    np.testing.assert_array_equal(out["visited"], want["visited"])
