"""C++ symbol demangling for kernel names (Itanium ABI, as nvcc and NVRTC mangle them).

The C++ runtime's own ``__cxa_demangle`` is used through ctypes (libstdc++ is present wherever
NumPy and Numba run on Linux); ``c++filt`` is the fallback; a name neither can read is returned
as it is, so a kernel is never lost, only shown mangled.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import shutil
import subprocess
from typing import Callable


def demangle(name: str) -> str:
    """The demangled signature of `name`, or `name` itself when it is not a mangled C++ name."""
    if not name.startswith("_Z"):
        return name
    return _demangler()(name) or name


@functools.lru_cache(maxsize=1)
def _demangler() -> Callable[[str], str | None]:
    return _cxa_demangler() or _cxxfilt_demangler


def _cxa_demangler() -> Callable[[str], str | None] | None:
    """``abi::__cxa_demangle`` from libstdc++ (or libc++), None when neither can be loaded."""
    for lib in ("stdc++", "c++"):
        path = ctypes.util.find_library(lib)
        candidates = [path] if path else []
        candidates += {"stdc++": ["libstdc++.so.6"], "c++": ["libc++.so.1", "libc++.dylib"]}[lib]
        for candidate in candidates:
            try:
                dll = ctypes.CDLL(candidate)
                fn = dll.__cxa_demangle
            except (OSError, AttributeError):
                continue
            fn.restype = ctypes.c_void_p
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_int)]
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
            free = libc.free
            free.argtypes = [ctypes.c_void_p]

            def run(name: str, fn: ctypes._CFuncPtr = fn, free: ctypes._CFuncPtr = free) -> str | None:
                status = ctypes.c_int(0)
                ptr = fn(name.encode(), None, None, ctypes.byref(status))
                if not ptr or status.value != 0:
                    return None
                try:
                    return ctypes.string_at(ptr).decode("utf-8", "replace")
                finally:
                    free(ptr)

            if run("_Z1fi") == "f(int)":
                return run
    return None


def _cxxfilt_demangler(name: str) -> str | None:
    tool = shutil.which("c++filt")
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and text and text != name else None
