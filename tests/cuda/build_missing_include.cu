// Does not compile: the header below does not exist.
#include "build_no_such_header.cuh"
extern "C" __global__ void k(float* a) { a[threadIdx.x] = 0.0f; }
