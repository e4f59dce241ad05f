// Special registers: %clock64 and %globaltimer read twice around some work, %smid, %warpid, %laneid.
extern "C" __global__ void clocks(long long* out) {
    long long c0 = clock64();
    unsigned long long g0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    float s = 0;
    for (int k = 0; k < 100; k++) s += k * threadIdx.x;
    long long c1 = clock64();
    unsigned long long g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    unsigned smid, warpid, laneid;
    asm("mov.u32 %0, %%smid;" : "=r"(smid));
    asm("mov.u32 %0, %%warpid;" : "=r"(warpid));
    asm("mov.u32 %0, %%laneid;" : "=r"(laneid));
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[6 * t] = c0;
    out[6 * t + 1] = c1;
    out[6 * t + 2] = (long long)g0;
    out[6 * t + 3] = (long long)g1;
    out[6 * t + 4] = smid;
    out[6 * t + 5] = warpid * 100 + laneid + (s > 1e30f);
}
// Each CTA records its %smid and loads in[] (CTA id mod 7) + 1 times: the CTAs differ in L1 requests.
extern "C" __global__ void placed(const int* in, int* out, unsigned* sm) {
    unsigned s;
    asm("mov.u32 %0, %%smid;" : "=r"(s));
    if (threadIdx.x == 0) sm[blockIdx.x] = s;
    int acc = 0;
    for (int k = 0; k <= blockIdx.x % 7; k++) acc += in[k * 32 + threadIdx.x];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
