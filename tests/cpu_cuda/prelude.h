// Just enough CUDA for the demo kernels to compile as C++ and run on the CPU (tests only):
// runtime.cpp runs each CUDA thread of a CTA as a fiber and __syncthreads() yields to the next.
#include <cstddef>
#include <cstdint>
#include <cmath>

struct dim3 { unsigned x, y, z; };
typedef dim3 uint3;
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };

extern "C" {
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
extern char *cpu_cuda_dynamic_shared;
void __syncthreads();
}

static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

#define __global__
#define __device__
#define __forceinline__ inline
// CTAs run one after another, so a function-level static is the CTA's shared memory.
#define __shared__ static
