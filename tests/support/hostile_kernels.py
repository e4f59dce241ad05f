"""Hostile kernels for the emulator's path (tests/hostile/test_emu_hostile.py, benchmarks/bench_hostile.py):
the kernel file (`KERNELS`), launch-script bodies (`SPIN`, `TOUCH`), a launch script around a
setup body (`script_text`), and a prelude that fills the disk under Numba's cache (`FULL_DISK`)."""

from __future__ import annotations

KERNELS = r"""
__global__ void spin(volatile int *flag, int *out)
{
    while (flag[0] == 0) {   // SPIN
    }
    out[threadIdx.x] = 1;
}

__global__ void runaway(const int *a, int *out)
{
    int s = 0;
    for (unsigned i = 0; a[32] == 0; i++) {   // RUNAWAY: a[32] is 0
        s += a[i & 31];
        out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    }
}

__global__ void many(const int *a, int *out, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += a[(i + threadIdx.x) & 31];
    out[threadIdx.x] = s;
}

__global__ void touch(int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

__global__ void breakpoint(int *out)
{
    out[threadIdx.x] = 1;
    if (threadIdx.x == 3)
        asm volatile("brkpt;");   // BRKPT
    out[threadIdx.x] = 2;
}
"""
SPIN = "flag = dev.zeros(1, np.int32)\nout = dev.zeros(32, np.int32)\ndev.launch('spin', 1, 32, (flag, out))"
TOUCH = "out = dev.zeros(1024, np.int32)\ndev.launch('touch', {grid}, 32, (out, np.int32(1024)))"


def script_text(setup_body: str, top: str = "") -> str:
    body = "\n".join("    " + ln for ln in setup_body.splitlines())
    return f"import sys\nimport numpy as np\n{top}\n\ndef setup(dev):\n{body}\n"


FULL_DISK = """
import builtins as _b, errno as _e, os as _os
_open, _root = _b.open, _os.environ["NUMBA_CACHE_DIR"]
def _full(file, mode="r", *args, **kwargs):
    if isinstance(file, str) and file.startswith(_root) and any(c in mode for c in "wax+"):
        raise OSError(_e.ENOSPC, "No space left on device", file)
    return _open(file, mode, *args, **kwargs)
_b.open = _full
"""
"""Every file Numba opens for writing in the kernel folder fails as on a full disk."""
