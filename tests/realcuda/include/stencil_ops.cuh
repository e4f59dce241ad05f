// Device helpers of the header kernel (include/heat_step.cuh): clamped reads of a 2-D field.
#pragma once

namespace heat {

__device__ __forceinline__ int clamp_index(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

__device__ __forceinline__ float field_at(const float* __restrict__ f, int x, int y, int nx, int ny) {
    return f[clamp_index(y, 0, ny - 1) * nx + clamp_index(x, 0, nx - 1)];
}

}  // namespace heat
