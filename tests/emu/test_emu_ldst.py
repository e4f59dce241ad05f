"""A scalar ld or st of global or shared memory is its own family, FAM_SCALAR_LDST, which the
interpreter runs with `interp.scalar_ldst` inline; an ld of the kernel parameters or the constant
bank is FAM_LD_BANK, run by `interp.ld_bank`; `mem_ldst`'s lane-by-lane way runs the other rows,
and its resolution of a generic address lands in the same spaces, so all must agree. They are
checked against a NumPy oracle
that shares none of their code (bytes read little-endian with `int.from_bytes`, the allocation
found by a linear scan, the fault of the first lane in lane order) on random accesses: every width,
signed and unsigned, aligned and not, inside and outside each space, with a cached allocation that
is sometimes the wrong one."""

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
    FAM_LD_BANK,
    FAM_SCALAR_LDST,
    N_ERR,
    N_FIELDS,
    OP_LD,
    OP_ST,
    SP_CONST,
    SP_GLOBAL,
    SP_PARAM,
    SP_SHARED,
    ST_MISALIGNED,
    ST_OK,
    ST_OOB,
    T_S8,
    T_S16,
    T_S32,
    T_U8,
    T_U16,
    T_U32,
    T_U64,
)
from tuiprof.collect.emu.kernel.interp import ld_bank, mem_ldst, scalar_ldst
from tuiprof.collect.emu.kernel.warp import row_family

SEG_LO = np.array([0x1000, 0x2000, 0x2040, 0x7000], np.int64)   # the third starts where the second ends
SEG_SIZE = np.array([64, 64, 128, 32], np.int64)
SHARED_SIZE = 96
SIZES = {SP_SHARED: SHARED_SIZE, SP_CONST: 48, SP_PARAM: 24}
"""The bytes of each space addressed from 0."""
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


def _addresses(rng: np.random.Generator, space: int, nb: int, act: int) -> np.ndarray:
    """Per lane: an aligned address inside the space (for global, an allocation); sometimes one
    lane's misaligned or (partly) outside."""
    sh = space != SP_GLOBAL
    a = np.zeros(32, np.int64)
    for l in range(32):
        if sh:
            a[l] = rng.integers(0, SIZES[space] // nb) * nb
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
            a[l] = (SIZES[space] if sh else SEG_LO[-1] + SEG_SIZE[-1]) - nb + rng.integers(1, nb + 1)  # past the end
        elif kind == 2:
            a[l] = -nb if sh else SEG_LO[0] - nb               # before the start
        else:
            a[l] = 0x1000 + 64 + 64 + 128 if not sh else SIZES[space]   # a gap / the end exactly
    return a


def _locate(space: int, a: int, nb: int, seg_hi: np.ndarray, seg_off: np.ndarray) -> int | None:
    """The buffer offset of bytes a .. a+nb-1, or None outside (a linear scan)."""
    if space != SP_GLOBAL:
        return a if 0 <= a and a + nb <= SIZES[space] else None
    for lo, hi, off in zip(SEG_LO, seg_hi, seg_off):
        if lo <= a and a + nb <= hi:
            return int(off + a - lo)
    return None


def _oracle(row: np.ndarray, act: int, regs: np.ndarray, bufs: dict[int, np.ndarray], seg_hi: np.ndarray,
            seg_off: np.ndarray) -> Fault | None:
    """Run the access on the arrays (in place), or name its fault (leaving them as they were)."""
    space = int(row[F_SPACE])
    nb = int(row[F_NB])
    lanes = [l for l in range(32) if (act >> l) & 1]
    addr = {l: int(row[F_AOFF] + regs[ADDR, BASE + l]) for l in lanes}
    offs = {}
    for l in lanes:
        off = _locate(space, addr[l], nb, seg_hi, seg_off)
        if off is None:
            return Fault(ST_OOB, BASE + l, addr[l])
        if addr[l] % nb:
            return Fault(ST_MISALIGNED, BASE + l, addr[l])
        offs[l] = off
    buf = bufs[space]
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
    """A random row of FAM_SCALAR_LDST or FAM_LD_BANK (as `warp.row_family` says), its active lanes
    and registers."""
    nb = int(rng.choice([1, 2, 4, 8]))
    signed = bool(rng.integers(0, 2))
    row = np.full(N_FIELDS, -1, np.int64)
    row[F_OP] = OP_LD if rng.integers(0, 2) else OP_ST
    spaces = [SP_GLOBAL, SP_SHARED] + ([SP_CONST, SP_PARAM] if row[F_OP] == OP_LD else [])
    row[F_SPACE] = rng.choice(spaces)
    row[F_TY] = TYPES[nb][signed]
    row[F_VEC] = 1
    row[F_NB] = nb
    row[F_SOP] = rng.integers(0, 3) - 1     # -1: an access not recorded
    row[F_ABASE] = ADDR
    row[F_AOFF] = int(rng.choice([0, 0, -8, 8, 16]))
    row[F_AUX2] = 64 if nb == 8 or rng.integers(0, 2) else 32
    row[F_D0 if row[F_OP] == OP_LD else F_S0] = DST if row[F_OP] == OP_LD else SRC
    act = int(rng.choice([0, 0xFFFFFFFF, int(rng.integers(0, 1 << 32))]))
    regs = rng.integers(-(1 << 62), 1 << 62, (4, BASE + 32), dtype=np.int64)
    regs[ADDR, BASE:] = _addresses(rng, int(row[F_SPACE]), nb, act) - row[F_AOFF]
    assert row_family(row[None, :], 0) == (FAM_SCALAR_LDST if row[F_SPACE] in (SP_GLOBAL, SP_SHARED) else FAM_LD_BANK)
    return row, act, regs


def _records() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Room for 4 records, filled with marks: the callers write record 1."""
    return np.full(4, -7, np.int64), np.full(4, -7, np.int32), np.zeros(4, np.uint32), np.full((4, 32), 9, np.uint64)


def test_scalar_accesses_of_a_fixed_space_match_the_oracle_in_both_ways():
    rng = np.random.default_rng(23)
    faults = done = 0
    for _ in range(500):
        row, act, regs = _case(rng)
        heap, seg_lo, seg_hi, seg_off = _heap(rng)
        bufs = {SP_GLOBAL: heap} | {sp: rng.integers(0, 256, n + 16, dtype=np.uint8) for sp, n in SIZES.items()}
        code = row[None, :].copy()
        sop = int(row[F_SOP])
        space = int(row[F_SPACE])
        want_regs, want_bufs = regs.copy(), {sp: b.copy() for sp, b in bufs.items()}
        fault = _oracle(row, act, want_regs, want_bufs, seg_hi, seg_off)
        recorded = fault is None and sop >= 0 and act != 0
        lanes = [l for l in range(32) if (act >> l) & 1]
        want_addr = np.zeros(32, np.uint64)
        for l in lanes:
            want_addr[l] = np.uint64(row[F_AOFF] + regs[ADDR, BASE + l])
        counted = {SP_GLOBAL: 0, SP_SHARED: 1}.get(space)   # the op_space column, None: not counted

        for way in ("scalar_ldst" if space in (SP_GLOBAL, SP_SHARED) else "ld_bank", "mem_ldst"):
            r, b = regs.copy(), {sp: x.copy() for sp, x in bufs.items()}
            rec_key, rec_op, rec_mask, rec_addr = _records()
            op_space, err = np.zeros((2, 3), np.int64), np.zeros(N_ERR, np.int64)
            addrs = np.zeros(32, np.int64)
            if way == "scalar_ldst":     # as the interpreter runs it: a cached allocation, sometimes the wrong one
                cs = int(rng.integers(0, len(SEG_LO)))
                status, lane, cs2, nrec, nacc = scalar_ldst(0, act, code, r, BASE, 32, True, SPOS * W + WARP,
                                                            b[SP_GLOBAL], b[SP_SHARED], seg_lo, seg_hi, seg_off,
                                                            SIZES[SP_SHARED], cs, np.zeros(32, np.int64), addrs,
                                                            rec_key, rec_op, rec_mask, rec_addr, 1, op_space)
                assert 0 <= cs2 < len(SEG_LO)
                if fault is not None:    # what the interpreter then reports, and nothing changed
                    assert (status, BASE + lane, addrs[lane], nrec, nacc) == \
                        (fault.status, fault.thread, fault.addr, 1, 0)
                    np.testing.assert_array_equal(r, regs)
                    for sp, x in b.items():
                        np.testing.assert_array_equal(x, bufs[sp])
                    assert not op_space.any() and (rec_key == -7).all()
                    continue
                assert status == ST_OK
            elif way == "ld_bank":
                nrec, nacc = ld_bank(0, act, code, r, BASE, 32, True, SPOS * W + WARP, b[SP_CONST], b[SP_PARAM],
                                     SIZES[SP_CONST], SIZES[SP_PARAM], rec_key, rec_op, rec_mask, rec_addr, 1, err,
                                     CTA)
            else:
                local = np.zeros(16, np.uint8)
                nrec, nacc = mem_ldst(0, act, code, r, BASE, 32, WARP, W, CTA, SPOS, True, b[SP_GLOBAL],
                                      b[SP_SHARED], local, b[SP_CONST], b[SP_PARAM], seg_lo, seg_hi, seg_off,
                                      SIZES[SP_SHARED], 0, SIZES[SP_CONST], SIZES[SP_PARAM], 4, rec_key, rec_op,
                                      rec_mask, rec_addr, 1, op_space, err)
            if fault is not None:
                assert (nrec, nacc) == (-1, 0), way
                assert (err[E_STATUS], err[E_THREAD], err[E_ADDR], err[E_BYTES], err[E_SPACE]) == \
                    (fault.status, fault.thread, fault.addr, row[F_NB], space), way
                continue
            assert (nrec, nacc) == (2 if recorded else 1, 1 if sop >= 0 and act != 0 else 0), way
            np.testing.assert_array_equal(r, want_regs, err_msg=way)
            for sp, x in b.items():
                np.testing.assert_array_equal(x, want_bufs[sp], err_msg=way)
            assert op_space.sum() == (nacc if counted is not None else 0), way
            assert counted is None or nacc == 0 or op_space[sop, counted] == 1, way
            if recorded:
                assert (rec_key[1], rec_op[1], rec_mask[1]) == (SPOS * W + WARP, sop, act), way
                np.testing.assert_array_equal(rec_addr[1], want_addr, err_msg=way)
            assert rec_key[2] == -7 and rec_key[0] == -7, way    # no other record written
        if fault is not None:
            faults += 1
        else:
            done += 1
    assert faults > 60 and done > 200    # both kinds well represented
