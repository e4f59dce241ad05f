// CPU runtime for prelude.h (tests only, x86-64): the threads of a CTA are fibers on one OS
// thread. A scheduler resumes every live fiber in turn; a fiber runs until it calls
// __syncthreads() or returns, so one round of the scheduler is one barrier interval. CTAs run one
// after another, x fastest. Warps are not modelled: kernels that rely on warp-synchronous
// execution are out of scope.
#include <cstdint>
#include <cstdlib>
#include <vector>

struct dim3 { unsigned x, y, z; };
extern "C" {
dim3 threadIdx, blockIdx, blockDim, gridDim;
char *cpu_cuda_dynamic_shared;
void cpu_cuda_switch(void **save_sp, void *to_sp);
}

// Save the callee-saved registers on the current stack, store its pointer, switch to another.
asm(R"(
.text
.globl cpu_cuda_switch
.type cpu_cuda_switch,@function
cpu_cuda_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
)");

namespace {
struct Fiber { void *sp; bool done; unsigned x, y, z; };
const size_t STACK = 64 * 1024;
std::vector<Fiber> fibers;
std::vector<char *> stacks;
void *scheduler_sp;
int current;
void (*kernel)(void **);
void **kernel_args;

void fiber_main() {
    kernel(kernel_args);
    fibers[current].done = true;
    cpu_cuda_switch(&fibers[current].sp, scheduler_sp);
    abort();  // a finished fiber is never resumed
}
}  // namespace

extern "C" void __syncthreads() { cpu_cuda_switch(&fibers[current].sp, scheduler_sp); }

// Run `trampoline(args)` for every thread of the grid; returns the number of barrier intervals.
extern "C" long cpu_cuda_launch(void (*trampoline)(void **), void **args, unsigned gx, unsigned gy,
                                unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t shared) {
    kernel = trampoline;
    kernel_args = args;
    gridDim = {gx, gy, gz};
    blockDim = {bx, by, bz};
    int threads = bx * by * bz;
    fibers.resize(threads);
    while ((int)stacks.size() < threads) stacks.push_back(static_cast<char *>(aligned_alloc(64, STACK)));
    std::vector<char> dynamic(shared + 64);
    cpu_cuda_dynamic_shared = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(dynamic.data()) + 63) & ~uintptr_t(63));
    long rounds = 0;
    for (unsigned z = 0; z < gz; z++)
        for (unsigned y = 0; y < gy; y++)
            for (unsigned x = 0; x < gx; x++) {
                blockIdx = {x, y, z};
                for (int i = 0; i < threads; i++) {
                    // A fresh stack that "returns" into fiber_main with the ABI's alignment.
                    void **sp = reinterpret_cast<void **>(reinterpret_cast<uintptr_t>(stacks[i] + STACK) & ~uintptr_t(15));
                    *--sp = nullptr;
                    *--sp = reinterpret_cast<void *>(fiber_main);
                    for (int r = 0; r < 6; r++) *--sp = nullptr;
                    fibers[i] = {sp, false, unsigned(i % bx), unsigned(i / bx % by), unsigned(i / (bx * by))};
                }
                for (int alive = threads; alive > 0; rounds++)
                    for (int i = 0; i < threads; i++) {
                        if (fibers[i].done) continue;
                        threadIdx = {fibers[i].x, fibers[i].y, fibers[i].z};
                        current = i;
                        cpu_cuda_switch(&scheduler_sp, fibers[i].sp);
                        if (fibers[i].done) alive--;
                    }
            }
    return rounds;
}
