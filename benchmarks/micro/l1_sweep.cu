// Micro-kernel (issue 24): the L1's capacity and replacement at SpMV's launch shape.
//
// Each CTA of 256 threads (the SpMV demos' CTA) reads its own window of `window` floats `reps`
// times, coalesced: a warp reads one 128 B line per load. The first pass misses; later passes
// hit in the L1 while the windows of the CTAs resident on an SM fit in what the carve-out leaves
// of its L1 (ncu's launch__shared_mem_config_size says what the driver chose). The launch script
// sweeps the window, one launch per size, with SpMV's grid (512 CTAs).
extern "C" __global__ void l1_sweep(const float *__restrict__ in, float *__restrict__ out, unsigned window, int reps)
{
    const float *mine = in + (size_t)blockIdx.x * window;
    float sum = 0.0f;
    for (int r = 0; r < reps; ++r)
        for (unsigned k = threadIdx.x; k < window; k += blockDim.x)
            sum += mine[k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
