// Cyclic reduction (CR) tridiagonal solver: Zhang11 (Zhang & Owens, HPCA'11) sec. 5.2, after
// Zhang, Cohen & Owens, "Fast tridiagonal solvers on the GPU" (PPoPP'10). One CTA per system and
// one thread per two equations; the system is loaded into shared memory, reduced to two equations
// (forward reduction: log2(n) - 1 steps, the stride doubling every step), solved, and the unknowns
// found back (backward substitution: the stride halving every step).
// Equation i of system s is a[i] x[i-1] + b[i] x[i] + c[i] x[i+1] = d[i] with a[0] = c[n-1] = 0,
// stored at s * n + i; n = 2 * blockDim.x must be a power of two. Dynamic shared memory holds
// the CTA's system as five arrays sa, sb, sc, sd, sx of at<PAD>(n - 1) + 1 floats each: n for CR,
// n + (n - 1) / 32 for CR-NBC.
//
// CR: element i at i. The threads of a step access every s-th element (stride s = 2, 4, ...), so
// a warp's accesses pile into the same banks: 2-way at stride 2, 4-way at 4, up to 16-way for
// 512 equations (the fewer active threads cap it).
// CR-NBC ("no bank conflicts"): the paper pads one element per bank count; with the 32 four-byte
// banks of Fermi and later GPUs (the paper's GT200 had 16), element i sits at i + i / 32. For 512
// equations that leaves at most 2-way conflicts (a warp's neighbour accesses at strides 2-8 reach
// one element into the next padded row).

#define LOG_BANKS 5  // 32 banks

template <bool PAD>
__device__ __forceinline__ int at(int i)
{
    return PAD ? i + (i >> LOG_BANKS) : i;
}

template <bool PAD>
__device__ __forceinline__ void cyclic_reduction(const float *a, const float *b, const float *c,
                                                 const float *d, float *x)
{
    extern __shared__ float smem[];
    int n = 2 * blockDim.x;
    int len = at<PAD>(n - 1) + 1;
    float *sa = smem;
    float *sb = sa + len;
    float *sc = sb + len;
    float *sd = sc + len;
    float *sx = sd + len;
    int t = threadIdx.x;
    int sys = blockIdx.x * n;

    for (int i = t; i < n; i += blockDim.x) {
        sa[at<PAD>(i)] = a[sys + i];
        sb[at<PAD>(i)] = b[sys + i];
        sc[at<PAD>(i)] = c[sys + i];
        sd[at<PAD>(i)] = d[sys + i];
    }

    // Forward reduction: equation i absorbs its neighbours i - delta and i + delta.
    int stride = 1;
    for (int active = n / 2; active > 1; active /= 2) {
        __syncthreads();
        stride *= 2;
        int delta = stride / 2;
        if (t < active) {
            int i = stride * t + stride - 1;
            int me = at<PAD>(i);
            int left = at<PAD>(i - delta);
            float k1 = sa[me] / sb[left];
            float bi = sb[me] - sc[left] * k1;
            float di = sd[me] - sd[left] * k1;
            sa[me] = -sa[left] * k1;
            if (i + delta < n) {
                int right = at<PAD>(i + delta);
                float k2 = sc[me] / sb[right];
                bi -= sa[right] * k2;
                di -= sd[right] * k2;
                sc[me] = -sc[right] * k2;
            }
            sb[me] = bi;
            sd[me] = di;
        }
    }

    // The two equations left, n/2 - 1 and n - 1, form a 2x2 system.
    __syncthreads();
    if (t == 0) {
        int i1 = at<PAD>(stride - 1);
        int i2 = at<PAD>(2 * stride - 1);
        float det = sb[i2] * sb[i1] - sc[i1] * sa[i2];
        sx[i1] = (sb[i2] * sd[i1] - sc[i1] * sd[i2]) / det;
        sx[i2] = (sd[i2] * sb[i1] - sd[i1] * sa[i2]) / det;
    }

    // Backward substitution: equation i from its solved neighbours i - delta and i + delta.
    for (int active = 2; active <= n / 2; active *= 2) {
        __syncthreads();
        int delta = stride / 2;
        if (t < active) {
            int i = stride * t + delta - 1;
            int me = at<PAD>(i);
            float r = sd[me] - sc[me] * sx[at<PAD>(i + delta)];
            if (i >= delta)
                r -= sa[me] * sx[at<PAD>(i - delta)];
            sx[me] = r / sb[me];
        }
        stride /= 2;
    }

    __syncthreads();
    for (int i = t; i < n; i += blockDim.x)
        x[sys + i] = sx[at<PAD>(i)];
}

extern "C" __global__ void cr(const float *a, const float *b, const float *c, const float *d, float *x)
{
    cyclic_reduction<false>(a, b, c, d, x);
}

extern "C" __global__ void cr_nbc(const float *a, const float *b, const float *c, const float *d, float *x)
{
    cyclic_reduction<true>(a, b, c, d, x);
}
