// Kernels that fail on purpose: each must stop the emulator with one clear error.
extern "C" __global__ void out_of_bounds(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i + n];   // reads past the end of in
}
extern "C" __global__ void shared_out_of_bounds(int* out, int k) {
    __shared__ int s[64];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x + k];
}
extern "C" __global__ void misaligned(char* p) {
    *(int*)(p + 1 + 4 * threadIdx.x) = 1;
}
extern "C" __global__ void runaway(const int* flag, int* out) {
    int k = 0;
    while (flag[0] == 0) { k++; }
    out[threadIdx.x] = k;
}
extern "C" __global__ void barrier_count_never_reached(int* out) {
    asm volatile("bar.sync 1, 64;");
    out[threadIdx.x] = 1;
}
extern "C" __global__ void warp_sync_vs_block_sync(int* out) {
    if (threadIdx.x & 1) __syncwarp(0xffffffff);
    else __syncthreads();
    out[threadIdx.x] = 1;
}
extern "C" __global__ void unsupported_mad_cc(const int* a, int* out) {
    int r;
    asm("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a[threadIdx.x]), "r"(a[threadIdx.x]), "r"(0));
    out[threadIdx.x] = r;
}
extern "C" __global__ void traps(int* out) {
    if (threadIdx.x == 5) __trap();
    out[threadIdx.x] = 1;
}
extern "C" __global__ void takes_three(float* out, const float* in, int n) {
    int i = threadIdx.x;
    if (i < n) out[i] = in[i];
}
extern "C" __global__ void bra_uni_divergent(int* out) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %0, 16;\n\t@p bra.uni $Ltuiprof_uni;\n$Ltuiprof_uni:\n\t}" :: "r"(threadIdx.x));
    out[threadIdx.x] = 1;
}
