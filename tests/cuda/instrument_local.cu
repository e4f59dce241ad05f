// Local memory through the probes (tests/gpu/test_instrument_emu.py): a local array indexed at run
// time, and a generic pointer that is local for odd threads and global for even ones, so one
// warp access mixes spaces lane by lane. No printf (the emulator's vprintf is not the point here).
extern "C" __global__ void local_mix(const int *in, int *out, int n, int k)
{
    int loc[16];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    for (int j = 0; j < 16; ++j)
        loc[j] = in[(i + j) % n];
    const int *p = (i & 1) ? loc : in;
    out[i] = loc[k & 15] + p[(i + k) & 15];
}
