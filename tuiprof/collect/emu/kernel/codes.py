"""The numbers shared by the decoder and the interpreter: opcode ids, instruction fields, type,
comparison, atomic, rounding and space codes, thread states and error statuses.

A decoded instruction is one row of an int64 table (`F_*` columns); every operand is a register
slot (immediates, symbols and special registers get slots of their own, filled before a CTA
runs), so the interpreter never branches on an operand's kind.
"""

from __future__ import annotations

# ------------------------------------------------------------------ instruction row fields
F_OP = 0        # opcode id (OP_*)
F_TY = 1        # operation type (T_*)
F_TY2 = 2       # second type: cvt source, setp/set/slct compare type, mul.wide result...
F_SUB = 3       # sub-operation: comparison, atomic op, shfl/vote mode, rounding, lop3 table...
F_FLAGS = 4     # FL_* bits
F_D0 = 5        # destination slots (-1: none); vectors use D0..D3
F_D1 = 6
F_D2 = 7
F_D3 = 8
F_S0 = 9        # source slots (-1: none)
F_S1 = 10
F_S2 = 11
F_S3 = 12
F_S4 = 13
F_GUARD = 14    # guard predicate slot, -1 when unguarded
F_GNEG = 15     # 1: guard is negated (@!p)
F_TGT = 16      # branch / call target instruction index
F_IPDOM = 17    # immediate post-dominator of a guarded branch, -1 = function exit
F_SPACE = 18    # memory space (SP_*)
F_VEC = 19      # vector width of a memory access (1, 2, 4)
F_SOP = 20      # StaticOp id, -1 when the access is not recorded
F_ABASE = 21    # address base register slot, -1 for an absolute address
F_AOFF = 22     # address offset (symbol address included)
F_NB = 23       # bytes per element of a memory access
F_AUX = 24      # opcode-specific: bar id, call return slot count, cp.async sizes...
F_AUX2 = 25
F_SOP2 = 26     # second StaticOp id (cp.async: the shared-memory store)
F_FAM = 27      # the instruction's family (FAM_*): which handler of the interpreter runs it
N_FIELDS = 28

# ------------------------------------------------------------------ flags
FL_FTZ = 1
FL_SAT = 2
FL_APPROX = 4
FL_UNI = 8          # bra.uni: checked uniform
FL_HAS_PRED = 16    # shfl/setp second predicate destination present (in D1)
FL_CC_OUT = 32      # add.cc / sub.cc ... write the carry flag
FL_CC_IN = 64       # addc / subc ... read the carry flag
FL_NEG_S2 = 128     # setp/selp third (predicate) source negated (!p)
FL_VOLATILE = 256
FL_ZFILL = 512      # cp.async with an explicit source size (the rest is zero-filled)
FL_HI = 1024        # mul/mad .hi
FL_WIDE = 2048      # mul/mad .wide
FL_CLAMP = 4096     # shf.clamp, bfind.shiftamt...
FL_RELU = 8192

# ------------------------------------------------------------------ types
T_NONE = 0
T_U8 = 1
T_U16 = 2
T_U32 = 3
T_U64 = 4
T_S8 = 5
T_S16 = 6
T_S32 = 7
T_S64 = 8
T_F16 = 9
T_F32 = 10
T_F64 = 11
T_PRED = 12
T_BF16 = 13
T_F16X2 = 14
T_BF16X2 = 15

TYPE_CODES = {
    "u8": T_U8, "b8": T_U8, "s8": T_S8,
    "u16": T_U16, "b16": T_U16, "s16": T_S16,
    "u32": T_U32, "b32": T_U32, "s32": T_S32,
    "u64": T_U64, "b64": T_U64, "s64": T_S64,
    "f16": T_F16, "bf16": T_BF16, "f32": T_F32, "f64": T_F64, "pred": T_PRED,
    "f16x2": T_F16X2, "bf16x2": T_BF16X2,
}
TYPE_BITS = {T_U8: 8, T_U16: 16, T_U32: 32, T_U64: 64, T_S8: 8, T_S16: 16, T_S32: 32, T_S64: 64,
             T_F16: 16, T_F32: 32, T_F64: 64, T_PRED: 1, T_BF16: 16, T_F16X2: 32, T_BF16X2: 32}

# ------------------------------------------------------------------ opcodes
OP_NOP = 0
OP_MOV = 1          # d = s0 (truncated to the type's width)
OP_PACK = 2         # d = s0 | s1 << w | ... (element width in F_AUX bits, count in F_AUX2)
OP_UNPACK = 3       # d0..d3 = pieces of s0
OP_IADD = 4
OP_ISUB = 5
OP_IMUL = 6         # .lo / .hi (FL_HI) / .wide (FL_WIDE)
OP_IMAD = 7
OP_IDIV = 8
OP_IREM = 9
OP_IABS = 10
OP_INEG = 11
OP_IMIN = 12
OP_IMAX = 13
OP_AND = 14
OP_OR = 15
OP_XOR = 16
OP_NOT = 17
OP_CNOT = 18
OP_SHL = 19
OP_SHR = 20
OP_BFE = 21
OP_BFI = 22
OP_BREV = 23
OP_CLZ = 24
OP_POPC = 25
OP_BFIND = 26
OP_PRMT = 27
OP_LOP3 = 28
OP_MUL24 = 29       # mul24.lo/.hi, mad24 (s2 = addend or -1)
OP_SAD = 30
OP_SHF = 31         # funnel shift, F_SUB 0 = left, 1 = right
OP_FNS = 32
OP_DP4A = 33        # F_SUB bit 0: a signed, bit 1: b signed
OP_DP2A = 34        # as dp4a; bit 2: .hi (bytes 2, 3 of b)
OP_SETP = 40
OP_SET = 41
OP_SELP = 42
OP_SLCT = 43
OP_FADD = 50
OP_FSUB = 51
OP_FMUL = 52
OP_FFMA = 53
OP_FDIV = 54
OP_FABS = 55
OP_FNEG = 56
OP_FMIN = 57
OP_FMAX = 58
OP_FRCP = 59
OP_FSQRT = 60
OP_FRSQRT = 61
OP_FEX2 = 62
OP_FLG2 = 63
OP_FSIN = 64
OP_FCOS = 65
OP_FTANH = 66
OP_TESTP = 67
OP_COPYSIGN = 68
OP_CVT = 70
OP_CVTA_TO = 71     # generic -> space
OP_CVTA_FROM = 72   # space -> generic
OP_ISSPACEP = 73
OP_LD = 80
OP_ST = 81
OP_ATOM = 82        # also red (no destination)
OP_CPASYNC = 83
OP_TEX = 84         # tex / tld4: F_AUX dims, F_TY result type, F_TY2 coordinate type, F_SUB 0 (tex) or 1 + tld4 component
OP_SULD = 85        # suld.b: F_AUX dims, F_NB element bytes, F_VEC, F_SUB surface clamp mode (SU_*)
OP_SUST = 86        # sust.b: as suld, the values in F_S0..
OP_MEM_LAST = OP_SUST
"""Opcodes OP_LD .. OP_MEM_LAST access memory (the FAM_SCALAR_LDST .. FAM_CPASYNC handlers run and record them)."""
OP_BRA = 90
OP_CALL = 91
OP_RET = 92
OP_EXIT = 93
OP_TRAP = 94
TRAP_ASSERT, TRAP_BREAKPOINT = 1, 2
"""F_AUX of OP_TRAP for a failed assert() (__assertfail) and a PTX brkpt; 0 for trap."""
OP_BAR = 95         # bar.sync / barrier.sync / bar.red / bar.arrive (F_SUB: BAR_*)
OP_BARWARP = 96
OP_SHFL = 97
OP_VOTE = 98
OP_MATCH = 99
OP_REDUX = 100
OP_ACTIVEMASK = 101
OP_CLOCK = 102      # %clock / %clock64 / %globaltimer reads (F_SUB: CLK_*)
OP_NANOSLEEP = 103  # a hint to let other lanes run: yields like a back-edge
OP_PRINTF = 104     # call to vprintf: a no-op returning 0 in its return parameter

SYNC_OPS = (OP_SHFL, OP_VOTE, OP_MATCH, OP_REDUX, OP_BARWARP)

# ------------------------------------------------------------------ instruction families
# Each row of the code table belongs to one family, whose handler runs it (kernel/warp.py for the
# register-only ones, kernel/interp.py for memory and control); the interpreter is compiled with
# the handlers of the families a kernel uses (interp.run_ctas_for). Register-only families come
# first (below FAM_SCALAR_LDST), then the memory ones (up to FAM_CPASYNC), then control.
FAM_NOP = 0
FAM_MOV = 1           # mov                                          warp.ex_mov
FAM_IADD = 2          # add, sub (.cc, .sat, addc, subc)             warp.ex_iadd
FAM_IMUL = 3          # mul, mad (.lo, .hi, .wide)                   warp.ex_imul
FAM_SHIFT = 4         # shl, shr                                     warp.ex_shift
FAM_LOGIC = 5         # and, or, xor, not                            warp.ex_logic
FAM_SETP_INT = 6      # setp on integers, no boolean combination     warp.ex_setp_int
FAM_SELP = 7          # selp                                         warp.ex_selp
FAM_CVT_INT = 8       # cvt between integers, no rounding or .sat    warp.ex_cvt_int
FAM_FLOAT_PLAIN = 9   # add, sub, mul, fma .rn on f32 / f64          warp.ex_float_plain
FAM_CVTA = 10         # cvta, isspacep                               warp.ex_cvta
FAM_INT_MORE = 11     # the other integer, bit and pack ops          warp.alu_int
FAM_CMP = 12          # the other setp, set, slct                    warp.alu_cmp
FAM_FLOAT = 13        # the other float ops, testp                   warp.alu_float
FAM_CVT = 14          # the other cvt                                warp.alu_cvt
FAM_SCALAR_LDST = 15  # one element: ld (to a register), st of global, shared    interp.scalar_ldst (inline)
FAM_LD_BANK = 16      # one element: ld of kernel parameters, __constant__ data   interp.ld_bank
FAM_LDST = 17         # the other ld, st (local, generic, vectors)   interp.mem_ldst
FAM_ATOM = 18         # atom, red                                    interp.mem_atom
FAM_TEX = 19          # tex, tld4, suld, sust                        interp.mem_tex
FAM_CPASYNC = 20      # cp.async                                     interp.mem_cpasync
FAM_BRA = 21
FAM_CALL = 22         # call, ret from a device function
FAM_EXIT = 23
FAM_BAR = 24          # CTA barriers
FAM_SYNC = 25         # shfl, vote, match, redux, bar.warp.sync
FAM_MISC = 26         # activemask, clock reads, nanosleep, printf, trap
FAM_NONE = 27         # an opcode without a handler: refused when it runs

# ------------------------------------------------------------------ sub-operation codes
CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE = 0, 1, 2, 3, 4, 5
CMP_EQU, CMP_NEU, CMP_LTU, CMP_LEU, CMP_GTU, CMP_GEU = 6, 7, 8, 9, 10, 11
CMP_NUM, CMP_NAN = 12, 13
CMP_CODES = {"eq": CMP_EQ, "ne": CMP_NE, "lt": CMP_LT, "le": CMP_LE, "gt": CMP_GT, "ge": CMP_GE,
             "lo": CMP_LT, "ls": CMP_LE, "hi": CMP_GT, "hs": CMP_GE,
             "equ": CMP_EQU, "neu": CMP_NEU, "ltu": CMP_LTU, "leu": CMP_LEU, "gtu": CMP_GTU, "geu": CMP_GEU,
             "num": CMP_NUM, "nan": CMP_NAN}
BOOL_NONE, BOOL_AND, BOOL_OR, BOOL_XOR = 0, 1, 2, 3
BOOL_CODES = {"and": BOOL_AND, "or": BOOL_OR, "xor": BOOL_XOR}

AT_ADD, AT_MIN, AT_MAX, AT_INC, AT_DEC, AT_AND, AT_OR, AT_XOR, AT_EXCH, AT_CAS = range(10)
ATOM_CODES = {"add": AT_ADD, "min": AT_MIN, "max": AT_MAX, "inc": AT_INC, "dec": AT_DEC, "and": AT_AND,
              "or": AT_OR, "xor": AT_XOR, "exch": AT_EXCH, "cas": AT_CAS}

RND_RN, RND_RZ, RND_RM, RND_RP, RND_RNA = 0, 1, 2, 3, 4
RND_RNI, RND_RZI, RND_RMI, RND_RPI = 8, 9, 10, 11
RND_NONE = 15
ROUND_CODES = {"rn": RND_RN, "rz": RND_RZ, "rm": RND_RM, "rp": RND_RP, "rna": RND_RNA,
               "rni": RND_RNI, "rzi": RND_RZI, "rmi": RND_RMI, "rpi": RND_RPI}

SHFL_UP, SHFL_DOWN, SHFL_BFLY, SHFL_IDX = 0, 1, 2, 3
VOTE_ALL, VOTE_ANY, VOTE_UNI, VOTE_BALLOT = 0, 1, 2, 3
MATCH_ANY, MATCH_ALL = 0, 1
REDUX_ADD, REDUX_MIN, REDUX_MAX, REDUX_AND, REDUX_OR, REDUX_XOR = range(6)

BAR_SYNC, BAR_ARRIVE, BAR_RED_POPC, BAR_RED_AND, BAR_RED_OR = 0, 1, 2, 3, 4

CLK_CLOCK, CLK_CLOCK64, CLK_GLOBALTIMER, CLK_GLOBALTIMER_LO, CLK_GLOBALTIMER_HI = 0, 1, 2, 3, 4

TESTP_FINITE, TESTP_INFINITE, TESTP_NUMBER, TESTP_NOTANUMBER, TESTP_NORMAL, TESTP_SUBNORMAL = range(6)

# ------------------------------------------------------------------ memory spaces
SP_GENERIC = 0
SP_GLOBAL = 1
SP_SHARED = 2
SP_LOCAL = 3
SP_CONST = 4
SP_PARAM = 5        # kernel parameters (one buffer per launch)
SP_FPARAM = 6       # device-function parameters: a per-thread frame in local memory
SPACE_CODES = {"generic": SP_GENERIC, "global": SP_GLOBAL, "shared": SP_SHARED, "local": SP_LOCAL,
               "const": SP_CONST, "param": SP_PARAM}
RESOLVED_SPACES = ("global", "shared", "local")
"""Index 0..2 of the per-op resolved-space counts the interpreter keeps for generic ops."""

# Generic address windows (a flat 64-bit generic space; global is the identity).
SHARED_WINDOW = 0x7C00_0000_0000
LOCAL_WINDOW = 0x7C80_0000_0000
CONST_WINDOW = 0x7D00_0000_0000
WINDOW_SIZE = 1 << 32
MODULE_GLOBAL_BASE = 0x7E80_0000_0000
"""Module-level ``.global`` variables live here, apart from the launch script's allocations."""
LOCAL_TRACE_BASE = 0x7E00_0000_0000
"""Recorded addresses of local-memory accesses: a modeled interleaved layout (see interp)."""

# ------------------------------------------------------------------ thread states
TS_RUN = 0
TS_EXIT = 1
TS_BAR = 2
TS_SYNC = 3
TS_CBAR = 4

# ------------------------------------------------------------------ statuses (err[0])
ST_OK = 0
ST_OOB = 1            # out-of-bounds access: err = pc, thread, cta, address, bytes, space
ST_MISALIGNED = 2
ST_STEP_LIMIT = 3
ST_DEADLOCK = 4       # err = pc of a waiting lane, thread, cta, counts...
ST_TRAP = 5
ST_NONUNIFORM = 6     # bra.uni with lanes that disagree
ST_CALL_DEPTH = 7
ST_CBAR_OVERFLOW = 8
ST_BAD_BARRIER = 9    # barrier id out of range or count not a multiple of 32
ST_UNSUPPORTED = 10   # an operation reached at run time that the kernel cannot do (err[1] = pc)
ST_SPACE = 11         # a generic address in no window / a space the op cannot reach
ST_ABORTED = 12       # stopped unfinished because a batch of earlier CTAs failed (ctl[CTL_FAILED])
ST_TEXTURE = 13       # a texture/surface fetch through a handle that is no texture (E_ADDR), or a surface
#                       access out of range with .trap (E_INFO = 1, E_ADDR the byte coordinate)

E_STATUS, E_PC, E_THREAD, E_CTA, E_ADDR, E_BYTES, E_SPACE, E_INFO = range(8)
E_REASON, E_OTHER, E_MASK, E_MASK2 = 8, 9, 10, 11
"""ST_UNSUPPORTED: why (UNS_*), the other lane involved (UNS_BAR_*: the barrier), the thread's membermask
and the other lane's."""
N_ERR = 12

# the int64 array every batch of one launch shares (run_ctas' `ctl`)
CTL_RECORDS = 0
"""Warp accesses the snapshot CTAs have made so far (kept or not: see C_REC_MAX)."""
CTL_FAILED = 1
"""The lowest index of a batch that failed; later batches stop at their next check."""
N_CTL = 2

# Why an ST_UNSUPPORTED run stopped (err[E_REASON]): an opcode without a case, or a case that PTX
# leaves undefined, which the emulator refuses rather than answer with a value the hardware might
# not give (kernel/sync.py).
UNS_OPCODE = 0          # no case for the opcode (err[E_INFO] = opcode)
UNS_NOT_MEMBER = 1      # a lane executes a .sync collective outside its own membermask
UNS_MASK_CONFLICT = 2   # lanes executing one collective together name each other with different masks
UNS_SHFL_SOURCE = 3     # shfl.sync reads a lane that does not execute it (E_OTHER: that lane)
UNS_BAR_MIX = 4         # one barrier mixes bar.red with other forms, reductions or thread counts
UNS_BAR_TWICE = 5       # a warp arrives again at a barrier that has not completed (after bar.arrive)

MAX_CALL_DEPTH = 32
MAX_CBARS = 32
N_BARRIERS = 16

# ------------------------------------------------------------------ texture and surface objects
# A texture object (dev.texture) is the device address of a descriptor of TX_WORDS int64 words in
# the heap; the interpreter reads it at each fetch (tuiprof.collect.emu.kernel.texture).
TX_MAGIC, TX_DATA, TX_W, TX_H, TX_D, TX_PITCH, TX_SLICE, TX_ELEM, TX_CHANNELS, TX_FILTER = range(10)
TX_MODE_X, TX_MODE_Y, TX_MODE_Z, TX_NORMALIZED, TX_READ_FLOAT, TX_SURFACE = range(10, 16)
TX_WORDS = 16
TEXTURE_MAGIC = 0x5450_5458_7475_7270
"""First word of every descriptor: a handle that points elsewhere is refused, not read."""
AM_WRAP, AM_CLAMP, AM_MIRROR, AM_BORDER = 0, 1, 2, 3
"""cudaTextureAddressMode, in CUDA's order."""
SU_TRAP, SU_CLAMP, SU_ZERO = 0, 1, 2
"""A surface access out of range: .trap, .clamp, .zero."""
