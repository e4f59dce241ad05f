// Level-synchronous breadth-first search, one thread per node: the two kernels of Rodinia's bfs
// (Harish & Narayanan, HiPC'07; the "bfs" of Yen14's Table 2), on a graph in CSR form
// (the edges of node v are edges[row_ptr[v] .. row_ptr[v + 1] - 1]; Rodinia keeps the same two
// numbers per node in a struct). Flags are bytes (0 or 1). The host launches bfs_expand then
// bfs_update once per level until bfs_update raises no `over` flag; bfs_expand's thread 0 clears
// the flag (Rodinia's host clears it with a cudaMemcpy before each level).
// Irregular by design: which lanes have a node in the frontier, how many edges each follows, and
// where the edges point all depend on the graph.

#define MAX_THREADS_PER_BLOCK 512

// Rodinia's Kernel: every node of the frontier marks its unvisited neighbours for the next level.
extern "C" __global__ void bfs_expand(const int *row_ptr, const int *edges, unsigned char *mask,
                                      unsigned char *updating, const unsigned char *visited, int *cost,
                                      unsigned char *over, int n)
{
    int tid = blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x;
    if (tid == 0)
        *over = 0;
    if (tid < n && mask[tid]) {
        mask[tid] = 0;
        for (int i = row_ptr[tid]; i < row_ptr[tid + 1]; i++) {
            int id = edges[i];
            if (!visited[id]) {
                cost[id] = cost[tid] + 1;
                updating[id] = 1;
            }
        }
    }
}

// Rodinia's Kernel2: the marked nodes become the next frontier.
extern "C" __global__ void bfs_update(unsigned char *mask, unsigned char *updating, unsigned char *visited,
                                      unsigned char *over, int n)
{
    int tid = blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x;
    if (tid < n && updating[tid]) {
        mask[tid] = 1;
        visited[tid] = 1;
        *over = 1;
        updating[tid] = 0;
    }
}
