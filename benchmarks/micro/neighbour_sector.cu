// Micro-kernel (issue 24): a sector miss followed by its neighbour sector.
//
// Each thread owns a 64 B chunk (two 32 B sectors of one 128 B line) and reads the first float of
// each sector: `chunk[0]`, then `chunk[8]`, 32 B on. A warp's first load touches sectors 0 and 2
// of 16 lines (32 sectors), its second load sectors 1 and 3 of the same lines: never a sector the
// first load brought, always that sector's neighbour. With 32 B fills (L1 and L2) the second load
// misses everywhere; an L2 that fetches 64 B from DRAM on a sector miss
// (cudaLimitMaxL2FetchGranularity) serves it, and ncu's dram__sectors_read against the L2's read
// misses shows which the hardware does.
extern "C" __global__ void neighbour_sector(const float *__restrict__ in, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float *chunk = in + 16 * (size_t)i;
        float first = chunk[0];
        float neighbour = chunk[8];
        out[i] = first + neighbour;
    }
}
