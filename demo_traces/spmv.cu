// Scalar and vectorized CSR sparse matrix-vector multiply, x = A y.
// Baghsorkhi12 (Baghsorkhi et al., PPoPP'12) sec. 6.2: Listing 2 (scalar) and Listing 3
// (vectorized: uint4 / float4 loads of indices and val, with an alignment prologue and epilogue).
// One thread per row; rowIndices holds numRows + 1 offsets; column indices are sorted per row.
// "#pragma unroll 1" keeps one loop iteration per body, as in the listings (nvcc 13 otherwise
// unrolls by 4 and needs 63-64 registers, beyond what a Fermi SM gives 1536 threads).

#define BLOCKSIZE 256

extern "C" __global__ void spmv_csr_scalar(float *x, const float *val, const unsigned int *indices,
                                           const unsigned int *rowIndices, const float *y,
                                           unsigned int numRows)
{
    unsigned int tid = threadIdx.x;
    unsigned int bid = blockIdx.x;
    float t = 0;
    unsigned int myi = bid * BLOCKSIZE + tid;

    if (myi < numRows) {
        unsigned int lb = rowIndices[myi];
        unsigned int ub = rowIndices[myi + 1];
        #pragma unroll 1
        for (unsigned int j = lb; j < ub; j++) {
            unsigned int ind = indices[j];
            float yval = y[ind];
            t += val[j] * yval;
        }
        x[myi] = t;
    }
}

extern "C" __global__ void spmv_csr_vector4(float *x, const float *val, const unsigned int *indices,
                                            const unsigned int *rowIndices, const float *y,
                                            unsigned int numRows)
{
    const uint4 *indices4 = reinterpret_cast<const uint4 *>(indices);
    const float4 *val4 = reinterpret_cast<const float4 *>(val);
    unsigned int tid = threadIdx.x;
    unsigned int bid = blockIdx.x;
    float t = 0;
    unsigned int myi = bid * BLOCKSIZE + tid;

    if (myi < numRows) {
        unsigned int lb = rowIndices[myi];
        unsigned int ub = rowIndices[myi + 1];
        // prologue: scalar steps until j is a multiple of 4 (16-byte aligned vector loads)
        unsigned int newlb = min((lb + 3u) & ~3u, ub);
        unsigned int newub = max(ub & ~3u, newlb);
        #pragma unroll 1
        for (unsigned int j = lb; j < newlb; j++) {
            unsigned int ind = indices[j];
            float yval = y[ind];
            t += val[j] * yval;
        }
        #pragma unroll 1
        for (unsigned int j = newlb; j < newub; j += 4) {
            uint4 ind = indices4[j / 4];
            float4 value = val4[j / 4];
            float yval = y[ind.x];
            t += value.x * yval;
            yval = y[ind.y];
            t += value.y * yval;
            yval = y[ind.z];
            t += value.z * yval;
            yval = y[ind.w];
            t += value.w * yval;
        }
        // epilogue: the last ub % 4 nonzeros, scalar
        #pragma unroll 1
        for (unsigned int j = newub; j < ub; j++) {
            unsigned int ind = indices[j];
            float yval = y[ind];
            t += val[j] * yval;
        }
        x[myi] = t;
    }
}
