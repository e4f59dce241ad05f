"""CUDA source -> PTX with line info (`Program`), by nvcc or, without a toolkit, NVRTC.

`build_program(path, compute_capability=(8, 0), flags=("-DN=4",))` is the entry point; the
launch-script generator of ``tuiprof init`` is `tuiprof.toolchain.init_script`. Importing this
package loads no CUDA library: NVRTC is imported on the first compile that needs it.
"""

from tuiprof.errors import BuildError
from tuiprof.toolchain.compile import build_program
from tuiprof.toolchain.locate import choose_target, find_compiler
from tuiprof.toolchain.program import InputFile, KernelInfo, KernelResources, Program

__all__ = ["BuildError", "KernelInfo", "KernelResources", "Program", "InputFile", "build_program",
           "choose_target", "find_compiler"]
