// Version 2 of a small kernel for tests/compare/test_compare.py (matching ops across two versions):
// lines inserted above and inside the kernel, j renamed to col, in[i] read on a line of its own,
// and one load added (idx[n - 1 - i]).
// (one more line of comment, so that every line below moves)

extern "C" __global__ void scale_gather(float *out, const float *in, const int *idx, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    // only the threads inside the array
    if (i < n) {
        int col = idx[i];
        float v = in[col];
        float w = in[i];
        out[i] = a * v + w + in[idx[n - 1 - i]];
    }
}
