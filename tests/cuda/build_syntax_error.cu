// Does not compile: an undefined name on line 4 and a missing expression on line 5.
extern "C" __global__ void broken(float* a) {
    int i = threadIdx.x;
    a[i] = undefined_name;
    int x = ;
}
