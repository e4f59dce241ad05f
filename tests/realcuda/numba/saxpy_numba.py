"""A Numba CUDA kernel (item 10 of issue 22): its PTX, from numba.cuda.compile_ptx (no GPU needed),
is profiled directly, `tuiprof report saxpy_numba.ptx --launch saxpy_numba_launch.py`, its ops on
this file's lines. `python saxpy_numba.py` writes saxpy_numba.ptx again."""
from numba import cuda


def saxpy(out, x, y, a, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


SIGNATURE = "void(float32[::1], float32[::1], float32[::1], float32, int32)"


def compile_ptx(cc: tuple[int, int] = (8, 0)) -> str:
    return cuda.compile_ptx(saxpy, SIGNATURE, lineinfo=True, cc=cc)[0]


if __name__ == "__main__":
    import pathlib

    pathlib.Path(__file__).with_suffix(".ptx").write_text(compile_ptx())
