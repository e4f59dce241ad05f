// The kernel lives in include/heat_step.cuh; this file instantiates it for a 16 x 16 block.
#include "include/heat_step.cuh"

template __global__ void heat::step<16, 16>(const float*, float*, int, int, float);
