// tuiprof host runtime for whole programs built by `tuiprof build` (tuiprof/toolchain/wholeprog.py).
//
// Linked into the program with
//     -Wl,--wrap=__cudaLaunchKernel -Wl,--wrap=__cudaLaunchKernel_ptsz -Wl,--wrap=cudaLaunchKernel
// so that every kernel launch (the <<<>>> stub calls __cudaLaunchKernel, or cudaLaunchKernel with
// -D__NV_LEGACY_LAUNCH) passes through `traced`. At the chosen launch it fills the probes' control
// block (__tuiprof_ctl, layout in tuiprof/ptx/instrument.py), launches, synchronises, copies the
// probe buffers back and writes them to a record file (layout in tuiprof/collect/records.py:
// read_record_file). Every other launch runs untouched, with the probes off.
//
// Environment (set by tuiprof; without TUIPROF_MODE the program runs as if not instrumented):
//   TUIPROF_MODE     count | record
//   TUIPROF_OUT      record file to write (written to OUT.part, then renamed)
//   TUIPROF_KERNEL   PTX symbol of the kernel to record (empty: any kernel)
//   TUIPROF_LAUNCH   which launch of it (from 0; default 0)
//   TUIPROF_CTA_LO, TUIPROF_CTA_HI  snapshot CTAs (record mode)
//   TUIPROF_COUNT_LO, TUIPROF_COUNT_HI  the CTAs the counting run counts (count mode; default the
//                    whole grid): those any snapshot tuiprof may choose can take
//   TUIPROF_COUNTS   the counting run's record file (record mode): per-warp words of its CTAs
//
// Nothing here ever aborts the program: a problem is one "[tuiprof]" line on stderr, and the
// missing record file tells tuiprof the rest.

#ifndef TUIPROF_RT_SELFTEST
#include <cuda.h>
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const uint32_t kLaunchMagic = 0x4C41554E;  // "LAUN"
const char kFileMagic[8] = {'T', 'P', 'R', 'E', 'C', 'v', '1', '\0'};
const int kCtlWords = 8;
const int kCtaWords = 3;

struct Header {  // the record file's per-launch header (tuiprof/collect/records.py: _HEAD)
    uint32_t magic, name_len;
    uint64_t index;
    uint32_t grid[3], block[3];
    uint64_t dynamic_shared, cta_lo, cta_hi, warps, words, cta_words, elapsed_ns, reserved;
};
static_assert(sizeof(Header) == 104, "record header layout");

bool read_counts(const char* path, const std::string& kernel, uint64_t warps_per_cta, uint64_t lo, uint64_t hi,
                 std::vector<uint64_t>& out) {
    FILE* f = std::fopen(path, "rb");
    if (!f) return false;
    char magic[8];
    Header h;
    bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, kFileMagic, 8) == 0 &&
              std::fread(&h, sizeof h, 1, f) == 1 && h.magic == kLaunchMagic;
    std::string name(ok ? h.name_len : 0, '\0');
    // the counted CTAs (h.cta_lo .. h.cta_hi) must cover the snapshot's
    ok = ok && std::fread(&name[0], 1, h.name_len, f) == h.name_len && name == kernel && h.cta_lo <= lo &&
         hi <= h.cta_hi && (h.cta_hi - h.cta_lo) * warps_per_cta == h.warps;
    std::vector<uint64_t> used;
    if (ok) {
        used.resize(h.warps);
        ok = std::fseek(f, long(8 * (h.warps + 1)), SEEK_CUR) == 0 &&
             std::fread(used.data(), 8, h.warps, f) == h.warps;
    }
    std::fclose(f);
    if (!ok) return false;
    out.assign(used.begin() + (lo - h.cta_lo) * warps_per_cta, used.begin() + (hi - h.cta_lo) * warps_per_cta);
    return true;
}

// One launch's records appended to a new record file, atomically (OUT.part, then renamed).
bool write_records(const std::string& out, Header h, const char* name, const std::vector<uint64_t>& woff,
                   const std::vector<uint64_t>& used, const std::vector<uint64_t>& buf,
                   const std::vector<uint64_t>& cta) {
    h.magic = kLaunchMagic;
    h.name_len = uint32_t(std::strlen(name));
    h.warps = used.size();
    h.words = buf.size();
    h.cta_words = cta.size();
    std::string part = out + ".part";
    FILE* f = std::fopen(part.c_str(), "wb");
    bool written = f && std::fwrite(kFileMagic, 1, 8, f) == 8 && std::fwrite(&h, sizeof h, 1, f) == 1 &&
                   std::fwrite(name, 1, h.name_len, f) == h.name_len &&
                   std::fwrite(woff.data(), 8, woff.size(), f) == woff.size() &&
                   std::fwrite(used.data(), 8, used.size(), f) == used.size() &&
                   std::fwrite(buf.data(), 8, buf.size(), f) == buf.size() &&
                   std::fwrite(cta.data(), 8, cta.size(), f) == cta.size();
    if (f) written = (std::fclose(f) == 0) && written;
    if (!written || std::rename(part.c_str(), out.c_str()) != 0) {
        std::remove(part.c_str());
        return false;
    }
    return true;
}

#ifndef TUIPROF_RT_SELFTEST

typedef CUresult (*KernelGetLibraryFn)(CUlibrary*, CUkernel);
typedef CUresult (*LibraryGetGlobalFn)(CUdeviceptr*, size_t*, CUlibrary, const char*);
typedef CUresult (*KernelGetNameFn)(const char**, CUkernel);
typedef cudaError_t (*LaunchFn)(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);

void say(const char* what, const char* detail = "") {
    std::fprintf(stderr, "[tuiprof] %s%s\n", what, detail);
}

const char* env(const char* name, const char* fallback = "") {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}

thread_local bool g_inside = false;  // a launch made while tracing one passes straight through
long long g_seen = 0;                 // launches of the chosen kernel seen so far
bool g_done = false;

void* entry(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    // the runtime's own version: cuKernelGetName (12.3) is not found when asking for an older one
    if (cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return nullptr;
    return fn;
}

cudaError_t traced(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t shmem, cudaStream_t s, LaunchFn real) {
    std::string mode = env("TUIPROF_MODE");
    if (g_inside || g_done || (mode != "count" && mode != "record")) return real(k, g, b, a, shmem, s);
    static KernelGetLibraryFn get_library = (KernelGetLibraryFn)entry("cuKernelGetLibrary");
    static LibraryGetGlobalFn get_global = (LibraryGetGlobalFn)entry("cuLibraryGetGlobal");
    static KernelGetNameFn get_name = (KernelGetNameFn)entry("cuKernelGetName");
    const char* name = nullptr;
    if (!get_library || !get_global || !get_name || get_name(&name, (CUkernel)k) != CUDA_SUCCESS || !name) {
        say("no CUDA driver with cuKernelGetName and cuLibraryGetGlobal (none, or older than CUDA 12.3); "
            "nothing recorded");
        g_done = true;
        return real(k, g, b, a, shmem, s);
    }
    std::string want = env("TUIPROF_KERNEL");
    if (!want.empty() && want != name) return real(k, g, b, a, shmem, s);
    if (g_seen++ != std::atoll(env("TUIPROF_LAUNCH", "0"))) return real(k, g, b, a, shmem, s);
    g_done = true;
    g_inside = true;
    CUlibrary lib;
    CUdeviceptr ctl = 0;
    size_t size = 0;
    if (get_library(&lib, (CUkernel)k) != CUDA_SUCCESS ||
        get_global(&ctl, &size, lib, "__tuiprof_ctl") != CUDA_SUCCESS || size != 8 * kCtlWords) {
        say("the chosen kernel was not instrumented (no __tuiprof_ctl); nothing recorded: ", name);
        g_inside = false;
        return real(k, g, b, a, shmem, s);
    }
    uint64_t grid_ctas = uint64_t(g.x) * g.y * g.z;
    uint64_t warps_per_cta = (uint64_t(b.x) * b.y * b.z + 31) / 32;
    uint64_t lo = 0, hi = grid_ctas;
    std::vector<uint64_t> counts;
    bool record = mode == "record";
    if (!record && *env("TUIPROF_COUNT_HI")) {  // only the CTAs a snapshot may take
        hi = std::min<uint64_t>(std::strtoull(env("TUIPROF_COUNT_HI"), nullptr, 10), grid_ctas);
        lo = std::min<uint64_t>(std::strtoull(env("TUIPROF_COUNT_LO", "0"), nullptr, 10), hi);
    }
    if (record) {
        lo = std::strtoull(env("TUIPROF_CTA_LO", "0"), nullptr, 10);
        hi = std::strtoull(env("TUIPROF_CTA_HI", "0"), nullptr, 10);
        if (lo > hi || hi > grid_ctas || !read_counts(env("TUIPROF_COUNTS"), name, warps_per_cta, lo, hi, counts)) {
            say("the counting run's records do not match this launch; nothing recorded: ", name);
            g_inside = false;
            return real(k, g, b, a, shmem, s);
        }
    }
    uint64_t n_w = (hi - lo) * warps_per_cta;
    std::vector<uint64_t> woff(n_w + 1, 0);
    for (uint64_t w = 0; record && w < n_w; ++w) woff[w + 1] = woff[w] + counts[w];
    uint64_t words = record ? woff[n_w] : 0;
    void *d_cnt = nullptr, *d_woff = nullptr, *d_buf = nullptr, *d_cta = nullptr;
    std::vector<uint64_t> cta(grid_ctas * kCtaWords, 0);
    for (uint64_t c = 0; c < grid_ctas; ++c) cta[c * kCtaWords] = ~uint64_t(0);
    bool ok = cudaMalloc(&d_cnt, 8 * (n_w + 1)) == cudaSuccess && cudaMemset(d_cnt, 0, 8 * (n_w + 1)) == cudaSuccess &&
              cudaMalloc(&d_cta, 8 * cta.size() + 8) == cudaSuccess &&
              cudaMemcpy(d_cta, cta.data(), 8 * cta.size(), cudaMemcpyHostToDevice) == cudaSuccess;
    if (ok && record)
        ok = cudaMalloc(&d_woff, 8 * woff.size()) == cudaSuccess &&
             cudaMemcpy(d_woff, woff.data(), 8 * woff.size(), cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMalloc(&d_buf, 8 * words + 8) == cudaSuccess;
    uint64_t control[kCtlWords] = {0};
    control[0] = n_w ? (uint64_t)(uintptr_t)d_cnt : 0;
    control[1] = lo | (hi << 32);
    control[2] = record ? (uint64_t)(uintptr_t)d_woff : 0;
    control[3] = record ? (uint64_t)(uintptr_t)d_buf : 0;
    control[4] = (uint64_t)(uintptr_t)d_cta;
    ok = ok && cudaMemcpy((void*)ctl, control, sizeof control, cudaMemcpyHostToDevice) == cudaSuccess;
    if (!ok) {
        say("no GPU memory for the probe buffers; nothing recorded (profile a smaller snapshot)");
        cudaFree(d_cnt); cudaFree(d_woff); cudaFree(d_buf); cudaFree(d_cta);
        g_inside = false;
        return real(k, g, b, a, shmem, s);
    }
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    cudaEventRecord(t0, s);
    cudaError_t result = real(k, g, b, a, shmem, s);
    cudaEventRecord(t1, s);
    cudaError_t synced = cudaStreamSynchronize(s);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    std::memset(control, 0, sizeof control);
    cudaMemcpy((void*)ctl, control, sizeof control, cudaMemcpyHostToDevice);
    std::vector<uint64_t> used(n_w), buf(words);
    ok = result == cudaSuccess && synced == cudaSuccess &&
         cudaMemcpy(used.data(), d_cnt, 8 * n_w, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(cta.data(), d_cta, 8 * cta.size(), cudaMemcpyDeviceToHost) == cudaSuccess &&
         (!record || cudaMemcpy(buf.data(), d_buf, 8 * words, cudaMemcpyDeviceToHost) == cudaSuccess);
    cudaFree(d_cnt); cudaFree(d_woff); cudaFree(d_buf); cudaFree(d_cta);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (!ok) {
        say("the recorded launch failed: ", cudaGetErrorString(result != cudaSuccess ? result : synced));
        g_inside = false;
        return result;
    }
    Header h;
    std::memset(&h, 0, sizeof h);
    h.index = uint64_t(g_seen - 1);
    h.grid[0] = g.x; h.grid[1] = g.y; h.grid[2] = g.z;
    h.block[0] = b.x; h.block[1] = b.y; h.block[2] = b.z;
    h.dynamic_shared = shmem;
    h.cta_lo = lo;
    h.cta_hi = hi;
    h.elapsed_ns = uint64_t(double(ms) * 1e6);
    if (!record) std::fill(woff.begin(), woff.end(), 0);
    std::string out = env("TUIPROF_OUT", "tuiprof.tprec");
    if (!write_records(out, h, name, woff, used, buf, cta)) say("cannot write the record file ", out.c_str());
    g_inside = false;
    return result;
}

#endif  // TUIPROF_RT_SELFTEST

}  // namespace

#ifndef TUIPROF_RT_SELFTEST

extern "C" cudaError_t __real___cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
extern "C" cudaError_t __real___cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
extern "C" cudaError_t __real_cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t);

extern "C" cudaError_t __wrap___cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t shmem,
                                                 cudaStream_t s) {
    return traced(k, g, b, a, shmem, s, __real___cudaLaunchKernel);
}

extern "C" cudaError_t __wrap___cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t shmem,
                                                      cudaStream_t s) {
    return traced(k, g, b, a, shmem, s, __real___cudaLaunchKernel_ptsz);
}

extern "C" cudaError_t __wrap_cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t shmem,
                                               cudaStream_t s) {
    cudaKernel_t k;
    if (g_inside || cudaGetKernel(&k, f) != cudaSuccess) return __real_cudaLaunchKernel(f, g, b, a, shmem, s);
    return traced(k, g, b, a, shmem, s, __real___cudaLaunchKernel);
}

#else  // the file layout checked from Python without a GPU (tests/toolchain/test_wholeprog.py)

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "write") {  // a known launch: tuiprof decodes it
        Header h;
        std::memset(&h, 0, sizeof h);
        h.index = 2;
        h.grid[0] = 3; h.grid[1] = 1; h.grid[2] = 1;
        h.block[0] = 40; h.block[1] = 1; h.block[2] = 1;
        h.dynamic_shared = 128;
        h.cta_lo = 1;
        h.cta_hi = 2;
        h.elapsed_ns = 4242;
        // snapshot CTA 1, two warps: warp 0 one compressed record (lanes 0-1, site 3), warp 1 none
        std::vector<uint64_t> woff = {0, 4, 4}, used = {3, 0};
        std::vector<uint64_t> buf = {(uint64_t(0x80000003u) << 32) | 3u, 0x1000, uint64_t(8) << 32, 0};
        std::vector<uint64_t> cta = {10, 20, 7, 12, 30, 8, 11, 25, 9};
        return write_records(argv[2], h, "_Z6kernelPf", woff, used, buf, cta) ? 0 : 1;
    }
    if (argc == 7 && std::string(argv[1]) == "counts") {  // a counting run's file, as the recording run reads it
        std::vector<uint64_t> out;
        if (!read_counts(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10), std::strtoull(argv[5], nullptr, 10),
                         std::strtoull(argv[6], nullptr, 10), out))
            return 1;
        for (uint64_t v : out) std::printf("%llu\n", (unsigned long long)v);
        return 0;
    }
    return 2;
}

#endif  // TUIPROF_RT_SELFTEST
