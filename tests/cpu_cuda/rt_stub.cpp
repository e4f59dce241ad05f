// A CUDA runtime stand-in for tuiprof's host runtime (tuiprof/collect/runtime/tuiprof_rt.cpp),
// linked with it into a test program by tests/test_wholeprog.py: host memory stands for device
// memory, and the "kernels" do with the probes' control block (__tuiprof_ctl, layout in
// tuiprof/ptx/instrument.py) what instrumented kernels do. In them every thread makes one 4-byte
// access at (its first argument) + 4 x (its linear thread id in the grid), so each warp of the
// snapshot CTAs leaves one record: counted uncompressed (1 + lanes words) in the counting pass,
// written compressed (2 + ceil(lanes / 2) words) in the recording pass, as the probes write it.
// Every CTA records SM c % 7, start 100 + c, end 200 + c. The records name site
// TUIPROF_STUB_SITE (default 0) of module 0.
//
// The test program's arguments are its launches, in order: KERNEL:CTAS:THREADS, KERNEL one of
// gather, saxpy.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

uint64_t g_ctl[8];

struct FakeKernel {
    const char* name;
};
FakeKernel k_gather{"_Z6gatherPfPKfPKii"}, k_saxpy{"_Z5saxpyPfPKffi"};

CUresult kernel_get_library(CUlibrary* lib, CUkernel) {
    *lib = reinterpret_cast<CUlibrary>(g_ctl);
    return CUDA_SUCCESS;
}

CUresult library_get_global(CUdeviceptr* ptr, size_t* size, CUlibrary, const char* name) {
    if (std::strcmp(name, "__tuiprof_ctl") != 0) return CUDA_ERROR_NOT_FOUND;
    *ptr = reinterpret_cast<CUdeviceptr>(g_ctl);
    *size = sizeof g_ctl;
    return CUDA_SUCCESS;
}

CUresult kernel_get_name(const char** name, CUkernel k) {
    *name = reinterpret_cast<FakeKernel*>(k)->name;
    return CUDA_SUCCESS;
}

cudaError_t fake_kernel(const void* k, dim3 g, dim3 b, void** args) {
    (void)k;
    const uint64_t* ctl = g_ctl;
    uint64_t grid = uint64_t(g.x) * g.y * g.z, threads = uint64_t(b.x) * b.y * b.z, wpc = (threads + 31) / 32;
    uint64_t lo = ctl[1] & 0xffffffffu, hi = ctl[1] >> 32;
    uint64_t base = uint64_t(reinterpret_cast<uintptr_t>(*static_cast<float**>(args[0])));
    const char* site_env = std::getenv("TUIPROF_STUB_SITE");
    uint64_t site = site_env ? std::strtoull(site_env, nullptr, 10) : 0;
    for (uint64_t c = 0; c < grid; ++c) {
        if (ctl[4]) {
            uint64_t* cta = reinterpret_cast<uint64_t*>(ctl[4]) + 3 * c;
            cta[0] = std::min<uint64_t>(cta[0], 100 + c);
            cta[1] = std::max<uint64_t>(cta[1], 200 + c);
            cta[2] = c % 7;
        }
        if (!ctl[0] || c < lo || c >= hi) continue;
        for (uint64_t w = 0; w < wpc; ++w) {
            uint64_t n = std::min<uint64_t>(32, threads - 32 * w), sw = (c - lo) * wpc + w;
            uint32_t mask = n == 32 ? 0xffffffffu : (1u << n) - 1;
            uint64_t* counter = reinterpret_cast<uint64_t*>(ctl[0]) + sw;
            if (!ctl[2]) {  // the counting pass
                *counter += 1 + n;
                continue;
            }
            const uint64_t* woff = reinterpret_cast<const uint64_t*>(ctl[2]);
            uint64_t words = n >= 3 ? 2 + (n + 1) / 2 : 1 + n, at = *counter;
            *counter += words;
            if (at + words > woff[sw + 1] - woff[sw]) continue;  // past the warp's region: not written
            uint64_t* rec = reinterpret_cast<uint64_t*>(ctl[3]) + woff[sw] + at;
            uint64_t first = base + 4 * (c * threads + 32 * w);
            if (n >= 3) {
                rec[0] = mask | ((0x80000000u | site) << 32);
                rec[1] = first;
                uint32_t* off = reinterpret_cast<uint32_t*>(rec + 2);
                for (uint64_t l = 0; l < n; ++l) off[l] = uint32_t(4 * l);
            } else {
                rec[0] = mask | (site << 32);
                for (uint64_t l = 0; l < n; ++l) rec[1 + l] = first + 4 * l;
            }
        }
    }
    return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaMalloc(void** p, size_t n) {
    *p = std::calloc(1, n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t CUDARTAPI cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemset(void* p, int v, size_t n) {
    std::memset(p, v, n);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy(void* d, const void* s, size_t n, enum cudaMemcpyKind) {
    std::memcpy(d, s, n);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* e) {
    *e = nullptr;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
    *ms = 0.25f;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
const char* CUDARTAPI cudaGetErrorString(cudaError_t) { return "stub error"; }
cudaError_t CUDARTAPI cudaGetKernel(cudaKernel_t* k, const void* f) {
    *k = reinterpret_cast<cudaKernel_t>(const_cast<void*>(f));
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int,
                                                       unsigned long long, cudaDriverEntryPointQueryResult* q) {
    std::string s(symbol);
    *fn = s == "cuKernelGetLibrary"   ? reinterpret_cast<void*>(&kernel_get_library)
          : s == "cuLibraryGetGlobal" ? reinterpret_cast<void*>(&library_get_global)
          : s == "cuKernelGetName"    ? reinterpret_cast<void*>(&kernel_get_name)
                                      : nullptr;
    if (q) *q = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

cudaError_t __real___cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t, cudaStream_t) {
    return fake_kernel(k, g, b, a);
}
cudaError_t __real___cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t, cudaStream_t) {
    return fake_kernel(k, g, b, a);
}
cudaError_t __real_cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t, cudaStream_t) {
    return fake_kernel(f, g, b, a);
}
cudaError_t __wrap___cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);

}  // extern "C"

int main(int argc, char** argv) {
    float* data = reinterpret_cast<float*>(uintptr_t(0x7f0000100000));  // a "device" address, never dereferenced
    void* args[] = {&data};
    for (int i = 1; i < argc; ++i) {
        std::string a(argv[i]);
        size_t p = a.find(':'), q = a.rfind(':');
        FakeKernel* k = a.substr(0, p) == "gather" ? &k_gather : &k_saxpy;
        dim3 g(unsigned(std::stoul(a.substr(p + 1, q - p - 1)))), b(unsigned(std::stoul(a.substr(q + 1))));
        if (__wrap___cudaLaunchKernel(reinterpret_cast<cudaKernel_t>(k), g, b, args, 0, nullptr) != cudaSuccess)
            return 1;
    }
    return 0;
}
