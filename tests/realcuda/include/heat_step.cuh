// One explicit step of the 2-D heat equation, defined in a header as libraries do; the .cu file
// that includes it only instantiates it.
#pragma once
#include "stencil_ops.cuh"

namespace heat {

template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY) step(const float* __restrict__ u, float* __restrict__ u_next,
                                                int nx, int ny, float alpha) {
    const int x = blockIdx.x * BX + threadIdx.x;
    const int y = blockIdx.y * BY + threadIdx.y;
    if (x >= nx || y >= ny) return;
    const float c = u[y * nx + x];
    const float lap = field_at(u, x - 1, y, nx, ny) + field_at(u, x + 1, y, nx, ny)
                    + field_at(u, x, y - 1, nx, ny) + field_at(u, x, y + 1, nx, ny) - 4.0f * c;
    u_next[y * nx + x] = c + alpha * lap;
}

}  // namespace heat
