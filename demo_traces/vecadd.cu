// Vector addition of Yen14 (Yen, NCTU 2014), Table 3: int arrays of 20480 elements,
// one thread per element, launched with 64 threads (2 warps) per CTA on the GTX 480.
extern "C" __global__ void kernel_vec_add(int *C, const int *A, const int *B)
{
    int id = blockDim.x * blockIdx.x + threadIdx.x;  // per thread id
    C[id] = A[id] + B[id];
}
