// Micro-kernel (issue 24): stores that cover part of a sector, then a read of the rest of it.
//
// Each thread writes the first 4 B of its own 32 B sector (`buf[8 * i]`), waits at the CTA
// barrier, then reads the next 4 B of the same sector (`buf[8 * i + 1]`), which no store wrote.
// The L1 is write-through; whether a partly written sector can serve a read of its other bytes
// (L1 hit), or the read must go to the L2, and whether the L2 then fetches the sector from DRAM
// (a read miss on a dirty, partly valid sector), is what ncu's L1 and L2 read hit ratios and
// dram__sectors_read show.
extern "C" __global__ void partial_store(float *__restrict__ buf, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        buf[8 * (size_t)i] = (float)i;
    __syncthreads();
    if (i < n)
        out[i] = buf[8 * (size_t)i + 1];
}
