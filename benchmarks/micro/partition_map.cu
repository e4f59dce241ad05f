// Micro-kernel (issue 24): which SMs share an L2 partition (NVIDIA documents no SM-to-partition map).
//
// `touch` reads `lines` 128 B lines of `buf`, one word of each per thread, but only in the CTAs that
// run on SM `sm` (%smid); the others return at once. The launch script has SM 0 read a fresh buffer
// (`warm`), then SM s read it (`probe`), for every s. The probe's lookups that cross the fabric
// (ncu's lts__t_sectors_srcunit_ltcfabric_op_read, caches not flushed between the two) are about
// none when SM s reads through SM 0's partition (its copies hold every line) and about half the
// sectors when it reads through the other (the lines homed in SM 0's partition are looked up there).
__device__ __forceinline__ unsigned sm_id()
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

__device__ __forceinline__ void touch(const unsigned *__restrict__ buf, unsigned *__restrict__ sink,
                                      unsigned lines, unsigned sm)
{
    if (sm_id() != sm)
        return;
    unsigned acc = 0;
    for (unsigned i = threadIdx.x; i < lines; i += blockDim.x)
        acc += buf[(size_t)i * 32];
    if (acc == 0xFFFFFFFFu)  // never: keeps the loads
        sink[blockIdx.x] = acc;
}

extern "C" __global__ void warm(const unsigned *__restrict__ buf, unsigned *__restrict__ sink, unsigned lines,
                                unsigned sm)
{
    touch(buf, sink, lines, sm);
}

extern "C" __global__ void probe(const unsigned *__restrict__ buf, unsigned *__restrict__ sink, unsigned lines,
                                 unsigned sm)
{
    touch(buf, sink, lines, sm);
}
