// Inclusive scan of each block's tile in dynamic shared memory (two buffers, Hillis-Steele), the
// tile size chosen at launch; __launch_bounds__ caps the block at 512 threads.
template <typename T>
__global__ void __launch_bounds__(512) tile_scan(const T* __restrict__ in, T* __restrict__ out,
                                                 T* __restrict__ tile_totals, int n) {
    extern __shared__ unsigned char smem_raw[];
    T* buf = reinterpret_cast<T*>(smem_raw);
    const int tid = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + tid;
    int pin = 0;
    buf[tid] = i < n ? in[i] : T(0);
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        const int pout = 1 - pin;
        T v = buf[pin * blockDim.x + tid];
        if (tid >= offset) v += buf[pin * blockDim.x + tid - offset];
        buf[pout * blockDim.x + tid] = v;
        pin = pout;
        __syncthreads();
    }
    if (i < n) out[i] = buf[pin * blockDim.x + tid];
    if (tid == blockDim.x - 1) tile_totals[blockIdx.x] = buf[pin * blockDim.x + tid];
}

template __global__ void tile_scan<int>(const int*, int*, int*, int);
