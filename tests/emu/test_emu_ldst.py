"""A scalar ld or st of global or shared memory: the interpreter runs `interp.scalar_ldst` inline,
and `mem_ldst`'s lane-by-lane way (every space and width, and the fault messages) still does the same
case for its own callers (handing it to `scalar_ldst` too cost 1 s of a first compile). Both are
checked against a NumPy oracle that shares none of their code (bytes read little-endian with `int.from_bytes`, the
allocation found by a linear scan, the fault of the first lane in lane order) on random accesses:
every width, signed and unsigned, aligned and not, inside and outside shared memory and the
allocations, with a cached allocation that is sometimes the wrong one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.collect.emu.kernel.codes import (
    E_ADDR,
    E_BYTES,
    E_SPACE,
    E_STATUS,
    E_THREAD,
    F_ABASE,
    F_AOFF,
    F_AUX2,
    F_D0,
    F_NB,
    F_OP,
    F_S0,
    F_SOP,
    F_SPACE,
    F_TY,
    F_VEC,
    N_ERR,
    N_FIELDS,
    OP_LD,
    OP_ST,
    SP_GLOBAL,
    SP_SHARED,
    ST_MISALIGNED,
    ST_OOB,
    T_S8,
    T_S16,
    T_S32,
    T_U8,
    T_U16,
    T_U32,
    T_U64,
)
from tuiprof.collect.emu.kernel.interp import mem_ldst, scalar_ldst

SEG_LO = np.array([0x1000, 0x2000, 0x2040, 0x7000], np.int64)   # the third starts where the second ends
SEG_SIZE = np.array([64, 64, 128, 32], np.int64)
SHARED_SIZE = 96
BASE, W, WARP, SPOS, CTA = 32, 2, 1, 3, 5   # the second warp of its CTA: lanes are threads 32..63
ADDR, DST, SRC = 1, 2, 3                    # register slots
TYPES = {1: (T_U8, T_S8), 2: (T_U16, T_S16), 4: (T_U32, T_S32), 8: (T_U64, T_U64)}


@dataclass(frozen=True)
class Fault:
    status: int
    thread: int
    addr: int


def _heap(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    seg_off = np.concatenate(([0], np.cumsum(SEG_SIZE)[:-1])).astype(np.int64)
    return rng.integers(0, 256, int(SEG_SIZE.sum()) + 16, dtype=np.uint8), SEG_LO, SEG_LO + SEG_SIZE, seg_off


def _addresses(rng: np.random.Generator, sh: bool, nb: int, act: int) -> np.ndarray:
    """Per lane: an aligned address inside shared memory or an allocation; sometimes one lane's
    misaligned or (partly) outside."""
    a = np.zeros(32, np.int64)
    for l in range(32):
        if sh:
            a[l] = rng.integers(0, SHARED_SIZE // nb) * nb
        else:
            i = rng.integers(0, len(SEG_LO))
            a[l] = SEG_LO[i] + rng.integers(0, SEG_SIZE[i] // nb) * nb
    lanes = [l for l in range(32) if (act >> l) & 1]
    if lanes and rng.random() < 0.5:
        l = int(rng.choice(lanes))
        kind = rng.integers(0, 4)
        if kind == 0 and nb > 1:
            a[l] += rng.integers(1, nb)                       # misaligned
        elif kind == 1:
            a[l] = (SHARED_SIZE if sh else SEG_LO[-1] + SEG_SIZE[-1]) - nb + rng.integers(1, nb + 1)  # past the end
        elif kind == 2:
            a[l] = -nb if sh else SEG_LO[0] - nb               # before the start
        else:
            a[l] = 0x1000 + 64 + 64 + 128 if not sh else SHARED_SIZE   # a gap / the end exactly
    return a


def _locate(sh: bool, a: int, nb: int, seg_hi: np.ndarray, seg_off: np.ndarray) -> int | None:
    """The buffer offset of bytes a .. a+nb-1, or None outside (a linear scan)."""
    if sh:
        return a if 0 <= a and a + nb <= SHARED_SIZE else None
    for lo, hi, off in zip(SEG_LO, seg_hi, seg_off):
        if lo <= a and a + nb <= hi:
            return int(off + a - lo)
    return None


def _oracle(row: np.ndarray, act: int, regs: np.ndarray, heap: np.ndarray, shared: np.ndarray, seg_hi: np.ndarray,
            seg_off: np.ndarray) -> Fault | None:
    """Run the access on the arrays (in place), or name its fault (leaving them as they were)."""
    sh = row[F_SPACE] == SP_SHARED
    nb = int(row[F_NB])
    lanes = [l for l in range(32) if (act >> l) & 1]
    addr = {l: int(row[F_AOFF] + regs[ADDR, BASE + l]) for l in lanes}
    offs = {}
    for l in lanes:
        off = _locate(sh, addr[l], nb, seg_hi, seg_off)
        if off is None:
            return Fault(ST_OOB, BASE + l, addr[l])
        if addr[l] % nb:
            return Fault(ST_MISALIGNED, BASE + l, addr[l])
        offs[l] = off
    buf = shared if sh else heap
    for l in lanes:
        if row[F_OP] == OP_LD:
            x = int.from_bytes(buf[offs[l]:offs[l] + nb].tobytes(), "little")
            if row[F_TY] in (T_S8, T_S16, T_S32) and x >> (8 * nb - 1):
                x -= 1 << (8 * nb)
            x &= (1 << int(row[F_AUX2])) - 1
            regs[DST, BASE + l] = x - (1 << 64) if x >> 63 else x
        else:
            v = int(regs[SRC, BASE + l]) & ((1 << (8 * nb)) - 1)
            buf[offs[l]:offs[l] + nb] = np.frombuffer(v.to_bytes(nb, "little"), np.uint8)
    return None


def _case(rng: np.random.Generator) -> tuple[np.ndarray, int, np.ndarray]:
    nb = int(rng.choice([1, 2, 4, 8]))
    signed = bool(rng.integers(0, 2))
    row = np.full(N_FIELDS, -1, np.int64)
    row[F_OP] = OP_LD if rng.integers(0, 2) else OP_ST
    row[F_TY] = TYPES[nb][signed]
    row[F_SPACE] = SP_SHARED if rng.integers(0, 2) else SP_GLOBAL
    row[F_VEC] = 1
    row[F_NB] = nb
    row[F_SOP] = rng.integers(0, 3) - 1     # -1: an access not recorded
    row[F_ABASE] = ADDR
    row[F_AOFF] = int(rng.choice([0, 0, -8, 8, 16]))
    row[F_AUX2] = 64 if nb == 8 or rng.integers(0, 2) else 32
    row[F_D0 if row[F_OP] == OP_LD else F_S0] = DST if row[F_OP] == OP_LD else SRC
    act = int(rng.choice([0, 0xFFFFFFFF, int(rng.integers(0, 1 << 32))]))
    regs = rng.integers(-(1 << 62), 1 << 62, (4, BASE + 32), dtype=np.int64)
    regs[ADDR, BASE:] = _addresses(rng, row[F_SPACE] == SP_SHARED, nb, act) - row[F_AOFF]
    return row, act, regs


def test_scalar_global_and_shared_accesses_match_the_oracle_in_both_callers():
    rng = np.random.default_rng(23)
    faults = done = 0
    for _ in range(400):
        row, act, regs = _case(rng)
        heap, seg_lo, seg_hi, seg_off = _heap(rng)
        shared = rng.integers(0, 256, SHARED_SIZE + 16, dtype=np.uint8)
        code = row[None, :].copy()
        sop = int(row[F_SOP])
        want_regs, want_heap, want_shared = regs.copy(), heap.copy(), shared.copy()
        fault = _oracle(row, act, want_regs, want_heap, want_shared, seg_hi, seg_off)
        recorded = fault is None and sop >= 0 and act != 0
        lanes = [l for l in range(32) if (act >> l) & 1]

        # mem_ldst, as the interpreter calls it when the inline way declines
        r, h, s = regs.copy(), heap.copy(), shared.copy()
        rec_key, rec_op = np.full(4, -7, np.int64), np.full(4, -7, np.int32)
        rec_mask, rec_addr = np.zeros(4, np.uint32), np.full((4, 32), 9, np.uint64)
        op_space, err = np.zeros((2, 3), np.int64), np.zeros(N_ERR, np.int64)
        local = np.zeros(16, np.uint8)
        nrec, nacc = mem_ldst(0, act, code, r, BASE, 32, WARP, W, CTA, SPOS, True, h, s, local, local, local, seg_lo,
                              seg_hi, seg_off, SHARED_SIZE, 0, 0, 0, 4, rec_key, rec_op, rec_mask, rec_addr, 1,
                              op_space, err)
        if fault is not None:
            faults += 1
            assert (nrec, nacc) == (-1, 0)
            assert (err[E_STATUS], err[E_THREAD], err[E_ADDR], err[E_BYTES]) == \
                (fault.status, fault.thread, fault.addr, row[F_NB])
            assert err[E_SPACE] == row[F_SPACE]
        else:
            done += 1
            assert (nrec, nacc) == (2 if recorded else 1, 1 if sop >= 0 and act != 0 else 0)
            np.testing.assert_array_equal(r, want_regs)
            np.testing.assert_array_equal(h, want_heap)
            np.testing.assert_array_equal(s, want_shared)
            space_col = 1 if row[F_SPACE] == SP_SHARED else 0
            assert op_space.sum() == nacc and (nacc == 0 or op_space[sop, space_col] == 1)
            if recorded:
                assert (rec_key[1], rec_op[1], rec_mask[1]) == (SPOS * W + WARP, sop, act)
                want_addr = np.zeros(32, np.uint64)
                for l in lanes:
                    want_addr[l] = np.uint64(row[F_AOFF] + regs[ADDR, BASE + l])
                np.testing.assert_array_equal(rec_addr[1], want_addr)
            assert rec_key[2] == -7 and rec_key[0] == -7    # no other record written

        # scalar_ldst, as the interpreter runs it inline: a cached allocation, sometimes the wrong one
        r, h, s = regs.copy(), heap.copy(), shared.copy()
        rec_key, rec_op = np.full(4, -7, np.int64), np.full(4, -7, np.int32)
        rec_mask, rec_addr = np.zeros(4, np.uint32), np.full((4, 32), 9, np.uint64)
        op_space = np.zeros((2, 3), np.int64)
        cs = int(rng.integers(0, len(SEG_LO)))
        ok, cs2, nrec, nacc = scalar_ldst(0, act, code, r, BASE, 32, True, SPOS * W + WARP, h, s, seg_lo, seg_hi,
                                          seg_off, SHARED_SIZE, cs, np.zeros(32, np.int64), np.zeros(32, np.int64),
                                          rec_key, rec_op, rec_mask, rec_addr, 1, op_space)
        assert ok == (fault is None)
        assert 0 <= cs2 < len(SEG_LO)
        if fault is not None:    # nothing changed: mem_ldst then names the fault
            assert nrec == 1 and nacc == 0
            np.testing.assert_array_equal(r, regs)
            np.testing.assert_array_equal(h, heap)
            np.testing.assert_array_equal(s, shared)
            assert not op_space.any() and (rec_key == -7).all()
        else:
            assert (nrec, nacc) == (2 if recorded else 1, 1 if sop >= 0 and act != 0 else 0)
            np.testing.assert_array_equal(r, want_regs)
            np.testing.assert_array_equal(h, want_heap)
            np.testing.assert_array_equal(s, want_shared)
            if recorded:
                assert (rec_key[1], rec_op[1], rec_mask[1]) == (SPOS * W + WARP, sop, act)
    assert faults > 60 and done > 200    # both kinds well represented
