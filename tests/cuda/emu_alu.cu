// One PTX instruction form per kernel (inline asm), applied element-wise, so that the emulator's
// arithmetic can be checked against exact references: rounding modes, saturation, bit operations.
#define UNARY(name, OT, IT, OC, IC, ins) \
extern "C" __global__ void name(const IT* a, OT* d, int n) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; \
    if (i < n) { OT r; asm(ins " %0, %1;" : "=" OC(r) : IC(a[i])); d[i] = r; } }
#define BINARY(name, T, C, ins) \
extern "C" __global__ void name(const T* a, const T* b, T* d, int n) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; \
    if (i < n) { T r; asm(ins " %0, %1, %2;" : "=" C(r) : C(a[i]), C(b[i])); d[i] = r; } }
#define TERNARY(name, T, C, ins) \
extern "C" __global__ void name(const T* a, const T* b, const T* c, T* d, int n) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; \
    if (i < n) { T r; asm(ins " %0, %1, %2, %3;" : "=" C(r) : C(a[i]), C(b[i]), C(c[i])); d[i] = r; } }

UNARY(cvt_rn_f32_f64, float, double, "f", "d", "cvt.rn.f32.f64")
UNARY(cvt_rz_f32_f64, float, double, "f", "d", "cvt.rz.f32.f64")
UNARY(cvt_rm_f32_f64, float, double, "f", "d", "cvt.rm.f32.f64")
UNARY(cvt_rp_f32_f64, float, double, "f", "d", "cvt.rp.f32.f64")
UNARY(cvt_rn_f32_s64, float, long long, "f", "l", "cvt.rn.f32.s64")
UNARY(cvt_rz_f32_s64, float, long long, "f", "l", "cvt.rz.f32.s64")
UNARY(cvt_rm_f32_s64, float, long long, "f", "l", "cvt.rm.f32.s64")
UNARY(cvt_rp_f32_s64, float, long long, "f", "l", "cvt.rp.f32.s64")
UNARY(cvt_rn_f64_u64, double, unsigned long long, "d", "l", "cvt.rn.f64.u64")
UNARY(cvt_rz_f64_u64, double, unsigned long long, "d", "l", "cvt.rz.f64.u64")
UNARY(cvt_rp_f64_u64, double, unsigned long long, "d", "l", "cvt.rp.f64.u64")
UNARY(cvt_rni_s32_f32, int, float, "r", "f", "cvt.rni.s32.f32")
UNARY(cvt_rzi_s32_f32, int, float, "r", "f", "cvt.rzi.s32.f32")
UNARY(cvt_rmi_s32_f32, int, float, "r", "f", "cvt.rmi.s32.f32")
UNARY(cvt_rpi_s32_f32, int, float, "r", "f", "cvt.rpi.s32.f32")
UNARY(cvt_rzi_u32_f64, unsigned, double, "r", "d", "cvt.rzi.u32.f64")
UNARY(cvt_rni_f32_f32, float, float, "f", "f", "cvt.rni.f32.f32")
UNARY(cvt_sat_f32_f32, float, float, "f", "f", "cvt.sat.f32.f32")
UNARY(cvt_ftz_f32_f32, float, float, "f", "f", "cvt.ftz.f32.f32")
UNARY(cvt_s8_s32_sat, int, int, "r", "r", "cvt.sat.s8.s32")
UNARY(cvt_u16_s32_sat, int, int, "r", "r", "cvt.sat.u16.s32")
UNARY(cvt_s32_s8, int, int, "r", "r", "cvt.s32.s8")
UNARY(sqrt_rn_f32, float, float, "f", "f", "sqrt.rn.f32")
UNARY(sqrt_rz_f32, float, float, "f", "f", "sqrt.rz.f32")
UNARY(rcp_rn_f32, float, float, "f", "f", "rcp.rn.f32")
UNARY(rcp_rm_f64, double, double, "d", "d", "rcp.rm.f64")
UNARY(brev_b32, unsigned, unsigned, "r", "r", "brev.b32")
UNARY(clz_b64, unsigned, unsigned long long, "r", "l", "clz.b64")
UNARY(popc_b64, unsigned, unsigned long long, "r", "l", "popc.b64")
UNARY(bfind_s32, unsigned, int, "r", "r", "bfind.s32")
UNARY(bfind_shiftamt_u32, unsigned, unsigned, "r", "r", "bfind.shiftamt.u32")
BINARY(add_rz_f32, float, "f", "add.rz.f32")
BINARY(add_rm_f32, float, "f", "add.rm.f32")
BINARY(sub_rp_f32, float, "f", "sub.rp.f32")
BINARY(mul_rz_f32, float, "f", "mul.rz.f32")
BINARY(mul_rp_f64, double, "d", "mul.rp.f64")
BINARY(div_rn_f32, float, "f", "div.rn.f32")
BINARY(div_rz_f32, float, "f", "div.rz.f32")
BINARY(div_rm_f64, double, "d", "div.rm.f64")
BINARY(add_rz_f64, double, "d", "add.rz.f64")
BINARY(min_f32, float, "f", "min.f32")
BINARY(max_f32, float, "f", "max.f32")
BINARY(add_sat_f32, float, "f", "add.sat.f32")
BINARY(mul_hi_s64, long long, "l", "mul.hi.s64")
BINARY(mul_hi_u64, unsigned long long, "l", "mul.hi.u64")
BINARY(div_s32, int, "r", "div.s32")
BINARY(rem_s32, int, "r", "rem.s32")
BINARY(div_u64, unsigned long long, "l", "div.u64")
BINARY(min_u32, unsigned, "r", "min.u32")
BINARY(max_s64, long long, "l", "max.s64")
BINARY(add_sat_s32, int, "r", "add.sat.s32")
BINARY(sub_sat_s32, int, "r", "sub.sat.s32")
BINARY(shr_s32, int, "r", "shr.s32")
BINARY(shr_u32, unsigned, "r", "shr.u32")
BINARY(shl_b64, unsigned long long, "l", "shl.b64")
BINARY(mul24_hi_s32, int, "r", "mul24.hi.s32")
TERNARY(fma_rz_f32, float, "f", "fma.rz.f32")
TERNARY(fma_rp_f32, float, "f", "fma.rp.f32")
TERNARY(fma_rn_f64, double, "d", "fma.rn.f64")
TERNARY(bfe_u32, unsigned, "r", "bfe.u32")
TERNARY(bfe_s32, int, "r", "bfe.s32")
TERNARY(prmt_b32, unsigned, "r", "prmt.b32")
TERNARY(shf_l_wrap, unsigned, "r", "shf.l.wrap.b32")
TERNARY(shf_r_clamp, unsigned, "r", "shf.r.clamp.b32")
TERNARY(sad_s32, int, "r", "sad.s32")
extern "C" __global__ void lop3_e8(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { unsigned r; asm("lop3.b32 %0, %1, %2, %3, 0xe8;" : "=r"(r) : "r"(a[i]), "r"(b[i]), "r"(c[i])); d[i] = r; }
}
TERNARY(mad_hi_u32, unsigned, "r", "mad.hi.u32")
TERNARY(dp4a_s32_u32, int, "r", "dp4a.s32.u32")
TERNARY(dp2a_hi_u32_s32, int, "r", "dp2a.hi.u32.s32")
TERNARY(mad_wide_s32_lo, int, "r", "mad.lo.s32")

extern "C" __global__ void bfi_b32(const unsigned* a, const unsigned* b, const unsigned* c, const unsigned* e,
                                   unsigned* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { unsigned r; asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a[i]), "r"(b[i]), "r"(c[i]), "r"(e[i])); d[i] = r; }
}
extern "C" __global__ void setp_all(const float* a, const float* b, unsigned* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned r;
        asm("{ .reg .pred p; .reg .b32 t; mov.b32 %0, 0;\n"
            "setp.lt.f32 p, %1, %2; selp.b32 t, 1, 0, p; or.b32 %0, %0, t;\n"
            "setp.ltu.f32 p, %1, %2; selp.b32 t, 2, 0, p; or.b32 %0, %0, t;\n"
            "setp.ne.f32 p, %1, %2; selp.b32 t, 4, 0, p; or.b32 %0, %0, t;\n"
            "setp.neu.f32 p, %1, %2; selp.b32 t, 8, 0, p; or.b32 %0, %0, t;\n"
            "setp.nan.f32 p, %1, %2; selp.b32 t, 16, 0, p; or.b32 %0, %0, t;\n"
            "setp.geu.and.f32 p, %1, %2, 1; selp.b32 t, 32, 0, p; or.b32 %0, %0, t;\n"
            "testp.infinite.f32 p, %1; selp.b32 t, 64, 0, p; or.b32 %0, %0, t;\n"
            "testp.subnormal.f32 p, %1; selp.b32 t, 128, 0, p; or.b32 %0, %0, t; }"
            : "=r"(r) : "f"(a[i]), "f"(b[i]));
        d[i] = r;
    }
}
extern "C" __global__ void half_cvt(const float* a, unsigned short* rn, unsigned short* rz, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned short h1, h2; float f;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h1) : "f"(a[i]));
        asm("cvt.rz.f16.f32 %0, %1;" : "=h"(h2) : "f"(a[i]));
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h1));
        rn[i] = h1; rz[i] = h2; back[i] = f;
    }
}
