"""`tuiprof.jit.plain_args` (what `plain_kernel` and `emu_kernel` apply): a helper that kernels call with different constants compiles once
per argument type, not once per literal value (each literal specialisation was a compile of its
own on a first run)."""

from __future__ import annotations

from numba import njit

from tuiprof.jit import plain_args


def test_constants_from_two_callers_share_one_compile() -> None:
    @plain_args
    @njit  # not cached: tests write nothing outside their temporary folders
    def scaled(x, k):
        return x * k

    @njit
    def by_four(x):
        return scaled(x, 4)

    @njit
    def by_five(x):
        return scaled(x, 5)

    assert by_four(3) == 12 and by_five(3) == 15
    assert len(scaled.signatures) == 1
    assert "Literal" not in str(scaled.signatures[0])


def test_without_it_each_constant_is_a_compile_of_its_own() -> None:
    """The control: plain `njit` specialises the same calls per literal value (so the test above
    can fail)."""
    @njit
    def scaled(x, k):
        return x * k

    @njit
    def by_four(x):
        return scaled(x, 4)

    @njit
    def by_five(x):
        return scaled(x, 5)

    by_four(3)
    by_five(3)
    assert len(scaled.signatures) == 2
