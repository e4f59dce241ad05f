// Version 1 of a small kernel for tests/compare/test_compare.py (matching ops across two versions):
// diff_after.cu inserts lines, renames j to col, moves in[i] to a line of its own and adds a load.

extern "C" __global__ void scale_gather(float *out, const float *in, const int *idx, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = idx[i];
        float v = in[j];
        out[i] = a * v + in[i];
    }
}
