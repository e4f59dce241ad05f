// Micro-kernel (issue 24): a pointer chase, one thread, over a footprint read twice.
//
// `next` links one 4 B word in every 128 B line into a single cycle in shuffled order, so that
// each step depends on the one before (no two loads overlap) and no stride prefetcher helps; the
// launch script walks the cycle twice. The first pass misses everywhere; the second finds the
// footprint in the L2 when it fits. The H100's L2 is two partitions: with a 25 MiB footprint a
// line may be held near each SM's partition, with 50 MiB it cannot, and ncu's ltcfabric counters
// (reads crossing between the partitions) and the L2 hit ratio show where the capacity ends.
extern "C" __global__ void chase(const unsigned *__restrict__ next, unsigned *__restrict__ out, int steps)
{
    unsigned j = 0;
    for (int s = 0; s < steps; ++s)
        j = next[j];
    out[0] = j;
}
