// The emulator's cross-lane instructions against NumPy references (tests/emu/test_emu_collectives.py).
// Each warp runs one case: per lane a membermask (0: the lane skips the collectives), a value,
// shfl operands, and flags (bit 0: the lane exits first; bit 1: it runs the collectives from a
// second copy of the code, so that one group meets across two PCs). Inline PTX pins the exact
// instruction forms (negated vote predicates, match.all's predicate, shfl's clamp operand and
// predicate output), which nvcc would otherwise choose for us. sm_80 and later (redux.sync).
#define NOUT 32

#define RED(k, op, ty)                                                                             \
    asm volatile("redux.sync." op "." ty " %0, %1, %2;" : "=r"(r) : "r"(v), "r"(m)); o[k] = r;
#define VOTE(k, mode, neg)                                                                         \
    asm volatile("{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync." mode ".pred q, " neg "p, %2; " \
                 "selp.u32 %0, 1, 0, q; }" : "=r"(r) : "r"(v & 1u), "r"(m)); o[k] = r;
#define BALLOT(k, neg)                                                                             \
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; vote.sync.ballot.b32 %0, " neg "p, %2; }"  \
                 : "=r"(r) : "r"(v & 1u), "r"(m)); o[k] = r;
#define SHFL(k, mode, j)                                                                           \
    asm volatile("{ .reg .pred q; shfl.sync." mode ".b32 %0|q, %2, %3, %4, %5; selp.u32 %1, 1, 0, q; }" \
                 : "=r"(r), "=r"(p) : "r"(v), "r"(sb[j]), "r"(sc[j]), "r"(m)); o[k] = r; o[k + 1] = p;

// SIDE only makes the two copies' PTX differ (a register name), so that nvcc cannot merge them.
#define COLLECTIVES(SIDE)                                                                          \
    {                                                                                              \
        unsigned r, p;                                                                             \
        RED(0, "add", "u32") RED(1, "min", "u32") RED(2, "max", "u32") RED(3, "min", "s32")       \
        RED(4, "max", "s32") RED(5, "and", "b32") RED(6, "or", "b32") RED(7, "xor", "b32")        \
        RED(8, "add", "s32")                                                                       \
        VOTE(9, "all", "") VOTE(10, "all", "!") VOTE(11, "any", "") VOTE(12, "any", "!")           \
        VOTE(13, "uni", "") VOTE(14, "uni", "!") BALLOT(15, "") BALLOT(16, "!")                    \
        asm volatile("match.any.sync.b32 %0, %1, %2;" : "=r"(r) : "r"(v & 3u), "r"(m)); o[17] = r; \
        asm volatile("match.any.sync.b64 %0, %1, %2;" : "=r"(r) : "l"(wide), "r"(m)); o[18] = r;   \
        asm volatile("{ .reg .pred q" #SIDE "; match.all.sync.b32 %0|q" #SIDE ", %2, %3; "         \
                     "selp.u32 %1, 1, 0, q" #SIDE "; }" : "=r"(r), "=r"(p) : "r"(v & 1u), "r"(m)); \
        o[19] = r; o[20] = p;                                                                      \
        asm volatile("{ .reg .pred q; match.all.sync.b64 %0|q, %2, %3; selp.u32 %1, 1, 0, q; }"    \
                     : "=r"(r), "=r"(p) : "l"(wide), "r"(m)); o[21] = r; o[22] = p;               \
        SHFL(23, "up", 0) SHFL(25, "down", 1) SHFL(27, "bfly", 2) SHFL(29, "idx", 3)               \
        o[31] = SIDE;                                                                              \
    }

extern "C" __global__ void warp_collectives(const unsigned* masks, const unsigned* vals, const unsigned* shfl_b,
                                            const unsigned* shfl_c, const int* flags, unsigned* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;   // case i / 32, lane i % 32
    int f = flags[i];
    if (f & 1) return;
    unsigned m = masks[i], v = vals[i];
    unsigned sb[4], sc[4];
    for (int k = 0; k < 4; k++) { sb[k] = shfl_b[4 * i + k]; sc[k] = shfl_c[4 * i + k]; }
    unsigned long long wide = ((unsigned long long)(v & 1u) << 40) | ((v >> 1) & 1u);
    unsigned* o = out + NOUT * i;
    if (m != 0) {
        if (f & 2) COLLECTIVES(1)
        else COLLECTIVES(0)
    }
}

// The issue's reproduction: one reduction per half warp, the groups found by match.any.
extern "C" __global__ void reduce_by_parity(unsigned* out) {
    unsigned lane = threadIdx.x & 31;
    out[blockIdx.x * blockDim.x + threadIdx.x] = __reduce_add_sync(__match_any_sync(0xffffffff, lane & 1), lane);
}

// A predicated-off thread is not active (PTX ISA, activemask).
extern "C" __global__ void activemask_predicated(const unsigned* in, unsigned* out) {
    unsigned r = 0;
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; @p activemask.b32 %0; }" : "+r"(r) : "r"(in[threadIdx.x]));
    out[threadIdx.x] = r;
}

// Cases PTX leaves undefined: each must stop the emulator with the unsupported-instruction error.
extern "C" __global__ void redux_outside_own_mask(const unsigned* in, unsigned* out) {
    unsigned lane = threadIdx.x & 31;
    out[threadIdx.x] = __reduce_add_sync(1u << ((lane + 1) & 31), in[threadIdx.x]);
}
extern "C" __global__ void masks_disagree(const unsigned* in, unsigned* out) {
    unsigned lane = threadIdx.x & 31;
    unsigned m = lane == 0 ? 3u : 1u << lane;   // lane 0 names lane 1, which names only itself
    out[threadIdx.x] = __reduce_add_sync(m, in[threadIdx.x]);
}
extern "C" __global__ void shfl_from_outside_mask(const unsigned* in, unsigned* out) {
    unsigned lane = threadIdx.x & 31;
    if (lane < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, in[threadIdx.x], lane + 16);
}
extern "C" __global__ void shfl_from_exited_lane(const unsigned* in, unsigned* out) {
    unsigned lane = threadIdx.x & 31;
    if (lane >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, in[threadIdx.x], 8);
}
extern "C" __global__ void bar_red_mixed_with_sync(unsigned* out) {
    unsigned c = 0;
    if (threadIdx.x < 32) c = __syncthreads_count(threadIdx.x & 1);
    else __syncthreads();
    out[threadIdx.x] = c;
}

// CTA barriers: per-warp arrival (a warp arrives when its non-exited threads have, and counts as
// 32 threads towards a thread count), bar.red over the threads that arrive, bar.arrive.
extern "C" __global__ void barriers(const int* exits, const int* preds, unsigned* out) {
    __shared__ unsigned s[128];
    int t = threadIdx.x, w = t / 32;
    if (exits[t]) return;
    s[t] = 1000 + t;
    unsigned pair = 1 + w / 2, popc;
    asm volatile("{ .reg .pred p; setp.ne.s32 p, %1, 0; bar.red.popc.u32 %0, %2, 64, p; }"
                 : "=r"(popc) : "r"(preds[t]), "r"(pair) : "memory");
    unsigned partner = s[t ^ 32];          // the other warp of the pair, written before the barrier
    unsigned cnt = __syncthreads_count(preds[t]);
    unsigned all = __syncthreads_and(preds[t]);
    unsigned any = __syncthreads_or(!preds[t]);
    s[t] = 2000 + t;
    // a warp's threads reach this barrier from two places; all four warps make the count of 128
    if (t & 1) asm volatile("barrier.sync 3, 128; // odd threads" ::: "memory");
    else asm volatile("barrier.sync 3, 128; // even threads" ::: "memory");
    out[5 * t] = popc;
    out[5 * t + 1] = partner;
    out[5 * t + 2] = cnt;
    out[5 * t + 3] = all * 2 + any;
    out[5 * t + 4] = s[127 - t];
}
extern "C" __global__ void producer_consumer(unsigned* out) {
    __shared__ unsigned s[32];
    int t = threadIdx.x;
    if (t < 32) {
        s[t] = 7 * t + 1;
        asm volatile("bar.arrive 5, 64;" ::: "memory");
    } else {
        asm volatile("bar.sync 5, 64;" ::: "memory");
        out[t - 32] = s[63 - t];
    }
}

// Atomics under contention: for each operation `op` in turn, lane t applies it to word
// idx[op][t] of that operation's words (global `g`, or a shared copy when `shared`), with operands
// b[op][t] and c[op][t]; the old value goes to old[op][t]. idx < 0: the lane sits that one out.
#define ATOMIC_CASES(T, ST)                                                                        \
    case 0: r = atomicAdd(a, b[q]); break;                                                         \
    case 2: r = atomicExch(a, b[q]); break;                                                        \
    case 3: r = atomicMin(a, b[q]); break;                                                         \
    case 4: r = atomicMax(a, b[q]); break;                                                         \
    case 5: r = (T)atomicMin((ST*)a, (ST)b[q]); break;                                             \
    case 6: r = (T)atomicMax((ST*)a, (ST)b[q]); break;                                             \
    case 9: r = atomicCAS(a, c[q], b[q]); break;                                                   \
    case 10: r = atomicAnd(a, b[q]); break;                                                        \
    case 11: r = atomicOr(a, b[q]); break;                                                         \
    case 12: r = atomicXor(a, b[q]); break;

#define NOPS 13
extern "C" __global__ void atomics32(int shared, const int* idx, const unsigned* b, const unsigned* c,
                                     unsigned* g, unsigned* old, int nw) {
    __shared__ unsigned sh[NOPS * 4];
    int t = threadIdx.x, n = blockDim.x;
    for (int k = t; k < NOPS * nw; k += n) sh[k] = g[k];
    __syncthreads();
#pragma unroll 1
    for (int op = 0; op < NOPS; op++) {
        int q = op * n + t, k = idx[q];
        if (k < 0) continue;
        unsigned* a = (shared ? sh : g) + op * nw + k;
        unsigned r = 0;
        switch (op) {
            ATOMIC_CASES(unsigned, int)
            case 1: r = atomicSub(a, b[q]); break;
            case 7: r = atomicInc(a, b[q]); break;
            case 8: r = atomicDec(a, b[q]); break;
        }
        old[q] = r;
    }
    __syncthreads();
    if (shared)
        for (int k = t; k < NOPS * nw; k += n) g[k] = sh[k];
}
extern "C" __global__ void atomics64(int shared, const int* idx, const unsigned long long* b,
                                     const unsigned long long* c, unsigned long long* g, unsigned long long* old,
                                     int nw) {
    __shared__ unsigned long long sh[NOPS * 4];
    int t = threadIdx.x, n = blockDim.x;
    for (int k = t; k < NOPS * nw; k += n) sh[k] = g[k];
    __syncthreads();
#pragma unroll 1
    for (int op = 0; op < NOPS; op++) {
        int q = op * n + t, k = idx[q];
        if (k < 0) continue;
        unsigned long long* a = (shared ? sh : g) + op * nw + k;
        unsigned long long r = 0;
        switch (op) {
            ATOMIC_CASES(unsigned long long, long long)
            default: continue;   // no 64-bit sub, inc, dec
        }
        old[q] = r;
    }
    __syncthreads();
    if (shared)
        for (int k = t; k < NOPS * nw; k += n) g[k] = sh[k];
}
// atom.add.f32 flushes subnormal inputs and results to zero on global memory, not on shared memory
// (PTX ISA, atom: "Current implementation of atom.add.f32 on global memory flushes subnormal ...").
extern "C" __global__ void float_add(const float* x, float* g, float* old_g, float* old_s, float* s_out) {
    __shared__ float sh[1];
    int t = threadIdx.x;
    if (t == 0) sh[0] = g[1];
    __syncthreads();
    old_g[t] = atomicAdd(g, x[t]);
    old_s[t] = atomicAdd(sh, x[t]);
    __syncthreads();
    if (t == 0) s_out[0] = sh[0];
}
