"""Test configuration: async tests (the Textual pilot tests) run in a fresh event loop each."""

from __future__ import annotations

import asyncio
import inspect
import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Under .ci/run (TUIPROF_TESTS_REQUIRE_COMPILERS=1) the tests that compile CUDA must run:
    a machine without nvcc or without NVRTC stops the session with one message instead of
    skipping them silently."""
    from tests.support.ptx_support import REQUIRE_COMPILERS, find_nvcc, nvrtc_available

    if not os.environ.get(REQUIRE_COMPILERS):
        return
    missing = [name for name, ok in (("nvcc", find_nvcc() is not None), ("NVRTC", nvrtc_available())) if not ok]
    if missing:
        raise pytest.UsageError(f"{REQUIRE_COMPILERS} is set but {' and '.join(missing)} cannot be found: the "
                                "tests that compile CUDA would be skipped (install the CUDA toolkit, and the package's "
                                "dependencies for NVRTC)")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run `async def` tests with asyncio.run (no asyncio plugin needed)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` run only where a GPU is usable (tuiprof.collect.gpu.driver.gpu_problem)."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from tuiprof.collect.gpu.driver import gpu_problem

    problem = gpu_problem()
    if problem is not None:
        skip = pytest.mark.skip(reason=f"needs a GPU: {problem}")
        for item in gpu_items:
            item.add_marker(skip)
