/* The driver's own cost of a launch on this host, with no Python anywhere (issue #31: "where does the time go").
 *
 *     cc -O2 -std=c11 bench/deploy/launch_floor.c -o launch_floor -ldl && ./launch_floor [calls] [repeats]
 *
 * Needs only libcuda.so.1 (dlopen'ed; no CUDA header, no toolkit). The kernels are PTX written below (JIT-compiled
 * once when the module loads): `empty` with no parameters, and `args5` with the parameters of a 4-tensor kernel
 * (four pointers and an int), whose body does nothing. Each row is host nanoseconds per call: the best of
 * `repeats` loops of `calls` back-to-back launches (synchronized between loops, so the launch queue never fills),
 * and the median of single calls timed one by one. Rows: a trivial driver call (cuCtxGetCurrent: the price of
 * entering the driver), cuLaunchKernel of `empty` on the legacy default stream (handle 0, torch's default
 * current stream), on the per-thread default stream, on a created blocking and a non-blocking stream; `args5`
 * with kernelParams and with one packed buffer (`extra`); cuLaunchKernelEx with a config made once; and the
 * legacy-stream launch at other loop lengths (10, 1000, 10000) to show where the queue starts to push back.
 * Prints one JSON object. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;

typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    void* attrs;
    unsigned numAttrs;
} CUlaunchConfig;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(CUdevice*, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuCtxGetCurrent)(CUcontext*);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuModuleLoadData)(CUmodule*, const void*);
static CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
static CUresult (*cuStreamCreate)(CUstream*, unsigned);
static CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);
static CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
static CUresult (*cuDeviceGetName)(char*, int, CUdevice);
static CUresult (*cuDriverGetVersion)(int*);

static const char PTX[] =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".visible .entry empty()\n{\n  ret;\n}\n"
    ".visible .entry args5(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d, .param .u32 n)\n{\n  ret;\n}\n";

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#define CHECK(x)                                                                  \
    do {                                                                          \
        CUresult rc_ = (x);                                                       \
        if (rc_) { fprintf(stderr, "%s failed: %d\n", #x, rc_); exit(1); }        \
    } while (0)

static void* sym(void* lib, const char* name) {
    void* p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "libcuda has no %s\n", name); exit(1); }
    return p;
}

enum { K_CTX, K_LAUNCH, K_EXTRA, K_EX };
typedef struct {
    int kind;
    CUfunction f;
    CUstream s;
    void** params;
    void** extra;
    const CUlaunchConfig* cfg;
} job;

static inline CUresult one(const job* j) {
    CUcontext c;
    switch (j->kind) {
    case K_CTX: return cuCtxGetCurrent(&c);
    case K_LAUNCH: return cuLaunchKernel(j->f, 1, 1, 1, 32, 1, 1, 0, j->s, j->params, NULL);
    case K_EXTRA: return cuLaunchKernel(j->f, 1, 1, 1, 32, 1, 1, 0, j->s, NULL, j->extra);
    default: return cuLaunchKernelEx(j->cfg, j->f, j->params, NULL);
    }
}

static int cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static int first = 1;
static void row(const char* name, const job* j, int calls, int repeats, int print) {
    double best = 1e300;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_ns();
        for (int i = 0; i < calls; i++) CHECK(one(j));
        double t1 = now_ns();
        CHECK(cuCtxSynchronize());
        if ((t1 - t0) / calls < best) best = (t1 - t0) / calls;
    }
    double* single = malloc(sizeof(double) * calls);
    for (int i = 0; i < calls; i++) {
        double t0 = now_ns();
        CHECK(one(j));
        single[i] = now_ns() - t0;
    }
    CHECK(cuCtxSynchronize());
    qsort(single, calls, sizeof(double), cmp);
    if (print) printf("%s\n  \"%s\": {\"best_loop_ns\": %.1f, \"median_single_ns\": %.1f, \"calls\": %d}", first ? "" : ",", name,
           best, single[calls / 2], calls);
    if (print) first = 0;
    free(single);
}

int main(int argc, char** argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 100, repeats = argc > 2 ? atoi(argv[2]) : 30;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "no libcuda.so.1: %s\n", dlerror()); return 1; }
    cuInit = sym(lib, "cuInit");
    cuDeviceGet = sym(lib, "cuDeviceGet");
    cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
    cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent");
    cuCtxGetCurrent = sym(lib, "cuCtxGetCurrent");
    cuCtxSynchronize = sym(lib, "cuCtxSynchronize");
    cuModuleLoadData = sym(lib, "cuModuleLoadData");
    cuModuleGetFunction = sym(lib, "cuModuleGetFunction");
    cuStreamCreate = sym(lib, "cuStreamCreate");
    cuLaunchKernel = sym(lib, "cuLaunchKernel");
    cuLaunchKernelEx = sym(lib, "cuLaunchKernelEx");
    cuDeviceGetName = sym(lib, "cuDeviceGetName");
    cuDriverGetVersion = sym(lib, "cuDriverGetVersion");

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction empty, args5;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, PTX));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuModuleGetFunction(&args5, mod, "args5"));
    CUstream blocking, nonblocking;
    CHECK(cuStreamCreate(&blocking, 0));
    CHECK(cuStreamCreate(&nonblocking, 1)); /* CU_STREAM_NON_BLOCKING */
    char name[256] = {0};
    int version = 0;
    cuDeviceGetName(name, sizeof name, dev);
    cuDriverGetVersion(&version);

    uint64_t a = 0x1000, b = 0x2000, c = 0x3000, d = 0x4000;
    uint32_t n = 4096;
    void* params[5] = {&a, &b, &c, &d, &n};
    struct { uint64_t a, b, c, d; uint32_t n; uint32_t pad; } packed = {a, b, c, d, n, 0};
    size_t packed_size = 36; /* four 8-byte pointers and a 4-byte int, as the kernel lays them out */
    void* extra[5] = {(void*)(uintptr_t)1 /* CU_LAUNCH_PARAM_BUFFER_POINTER */, &packed,
                      (void*)(uintptr_t)2 /* CU_LAUNCH_PARAM_BUFFER_SIZE */, &packed_size, (void*)0};
    CUlaunchConfig cfg = {1, 1, 1, 32, 1, 1, 0, nonblocking, NULL, 0};
    CUlaunchConfig cfg0 = {1, 1, 1, 32, 1, 1, 0, NULL, NULL, 0};

    job jobs[] = {
        {K_CTX, NULL, NULL, NULL, NULL, NULL},
        {K_LAUNCH, empty, NULL, NULL, NULL, NULL},
        {K_LAUNCH, empty, (CUstream)(uintptr_t)2 /* CU_STREAM_PER_THREAD */, NULL, NULL, NULL},
        {K_LAUNCH, empty, blocking, NULL, NULL, NULL},
        {K_LAUNCH, empty, nonblocking, NULL, NULL, NULL},
        {K_LAUNCH, args5, NULL, params, NULL, NULL},
        {K_LAUNCH, args5, nonblocking, params, NULL, NULL},
        {K_EXTRA, args5, NULL, NULL, extra, NULL},
        {K_EXTRA, args5, nonblocking, NULL, extra, NULL},
        {K_EX, args5, NULL, params, NULL, &cfg0},
        {K_EX, args5, NULL, params, NULL, &cfg},
    };
    const char* names[] = {
        "cuCtxGetCurrent (entering the driver)",
        "empty kernel, legacy default stream (0)",
        "empty kernel, per-thread default stream",
        "empty kernel, created blocking stream",
        "empty kernel, created non-blocking stream",
        "4 pointers + int, kernelParams, legacy stream",
        "4 pointers + int, kernelParams, non-blocking stream",
        "4 pointers + int, packed extra buffer, legacy stream",
        "4 pointers + int, packed extra buffer, non-blocking stream",
        "4 pointers + int, cuLaunchKernelEx preset config, legacy stream",
        "4 pointers + int, cuLaunchKernelEx preset config, non-blocking stream",
    };
    for (int i = 0; i < 3; i++) /* warm up every path */
        for (size_t k = 0; k < sizeof jobs / sizeof *jobs; k++) row("warm-up", &jobs[k], calls, 1, 0);
    printf("{\n  \"device\": \"%s\", \"driver\": %d", name, version);
    first = 0;
    for (size_t k = 0; k < sizeof jobs / sizeof *jobs; k++) row(names[k], &jobs[k], calls, repeats, 1);
    int lengths[] = {10, 1000, 10000};
    for (int i = 0; i < 3; i++) {
        char label[96];
        snprintf(label, sizeof label, "empty kernel, legacy default stream, loops of %d", lengths[i]);
        row(label, &jobs[1], lengths[i], lengths[i] >= 10000 ? 5 : repeats, 1);
    }
    printf("\n}\n");
    return 0;
}
