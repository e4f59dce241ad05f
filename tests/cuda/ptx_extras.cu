// Constructs for the PTX front end's tests: user inline asm (scoped registers, predicates, a load),
// a noinline device function that touches global memory, an inlined user device function, __ldg,
// printf, a loop with break and a do-while. No #include: nvcc and NVRTC both declare printf.

__device__ __forceinline__ unsigned pick_add(unsigned a, unsigned b) {
    unsigned r;
    asm("{\n\t.reg .pred p;\n\t.reg .u32 t;\n\tsetp.ne.u32 p, %1, 0;\n\tadd.u32 t, %1, %2;\n\t@p mov.u32 %0, t;\n\t@!p mov.u32 %0, %2;\n}"
        : "=r"(r) : "r"(a), "r"(b));
    return r;
}

__device__ __forceinline__ float load_cg(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ float twice(const float* p, int i) {
    return p[i] * 2.0f;
}

__device__ __noinline__ void store_pair(float* out, int i, float v) {
    out[i] = v;
    out[i + 1] = v * 0.5f;
}

extern "C" __global__ void extras(const float* in, float* out, const unsigned* keys, unsigned* res, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = twice(in, i);
    float b = load_cg(in + (i ^ 1));
    float c = __ldg(&in[(i + 7) % n]);
    unsigned k = pick_add(keys[i], (unsigned)i);
    res[i] = k;
    int j = 0;
    while (true) {
        if (keys[(i + j) % n] == 0u || j > 8) break;
        ++j;
    }
    int m = 0;
    do { m += (int)keys[(i + m) % n]; } while (m < 3);
    store_pair(out, 2 * i, a + b + c + (float)(j + m));
    if (i == 0) printf("extras %d %f\n", j, a);
}
