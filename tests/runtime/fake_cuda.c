/* A fake CUDA driver (libcuda.so.1) for CPU tests of the generated launchers: it answers the driver
 * calls cutile makes with plausible values (one sm_90 device), launches nothing, and counts every
 * call by name, so a test can tell which driver calls one launch makes. Not thread safe beyond
 * what the tests need (one launching thread). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMES 256
static const char *names[MAX_NAMES];
static long counts[MAX_NAMES];
static int n_names;

static void hit(const char *name) {
    for (int i = 0; i < n_names; i++)
        if (names[i] == name || strcmp(names[i], name) == 0) { counts[i]++; return; }
    if (n_names < MAX_NAMES) { names[n_names] = name; counts[n_names++] = 1; }
}

long fake_cuda_count(const char *name) {
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], name) == 0) return counts[i];
    return 0;
}

void fake_cuda_reset(void) { for (int i = 0; i < n_names; i++) counts[i] = 0; }

/* "name=count;..." of every call made since the last reset (a static buffer). */
const char *fake_cuda_calls(void) {
    static char buf[8192];
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n_names; i++) {
        if (!counts[i]) continue;
        size_t left = sizeof buf - used;
        int w = snprintf(buf + used, left, "%s=%ld;", names[i], counts[i]);
        if (w < 0 || (size_t)w >= left) break;
        used += (size_t)w;
    }
    return buf;
}

static char handles[4096];  /* distinct non-null addresses handed out as driver handles */
static int next_handle;
static void *handle(void) { return &handles[(next_handle++ % 4095) + 1]; }
static __thread void *current_ctx;

#define OK(name) hit(#name); return 0
typedef int CUresult;

CUresult cuInit(unsigned flags) { (void)flags; OK(cuInit); }
CUresult cuDriverGetVersion(int *v) { *v = 13040; OK(cuDriverGetVersion); }
CUresult cuDeviceGetCount(int *n) { *n = 1; OK(cuDeviceGetCount); }
CUresult cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; OK(cuDeviceGet); }
CUresult cuDeviceGetName(char *name, int len, int dev) {
    (void)dev; strncpy(name, "Fake H200", (size_t)len); OK(cuDeviceGetName);
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : 1024;  /* sm_90, 132 SMs */
    OK(cuDeviceGetAttribute);
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) { (void)dev; *bytes = (size_t)141 << 30; OK(cuDeviceTotalMem_v2); }
CUresult cuDeviceGetUuid_v2(unsigned char *uuid, int dev) { (void)dev; memset(uuid, 7, 16); OK(cuDeviceGetUuid_v2); }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; static char c; *ctx = &c; OK(cuDevicePrimaryCtxRetain); }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; OK(cuDevicePrimaryCtxRelease_v2); }
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    (void)dev; *flags = 0; *active = 1; OK(cuDevicePrimaryCtxGetState);
}
CUresult cuDeviceGetDefaultMemPool(void **pool, int dev) { (void)dev; *pool = handle(); OK(cuDeviceGetDefaultMemPool); }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current_ctx; OK(cuCtxGetCurrent); }
CUresult cuCtxSetCurrent(void *ctx) { current_ctx = ctx; OK(cuCtxSetCurrent); }
CUresult cuCtxGetApiVersion(void *ctx, unsigned *v) { (void)ctx; *v = 13040; OK(cuCtxGetApiVersion); }
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) { *least = 0; *greatest = -5; OK(cuCtxGetStreamPriorityRange); }
CUresult cuCtxSynchronize(void) { OK(cuCtxSynchronize); }
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) { *free_b = *total = (size_t)141 << 30; OK(cuMemGetInfo_v2); }
CUresult cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = handle(); OK(cuStreamCreate); }
CUresult cuStreamCreateWithPriority(void **s, unsigned flags, int prio) { (void)flags; (void)prio; *s = handle(); OK(cuStreamCreateWithPriority); }
CUresult cuStreamDestroy_v2(void *s) { (void)s; OK(cuStreamDestroy_v2); }
CUresult cuStreamGetPriority(void *s, int *prio) { (void)s; *prio = 0; OK(cuStreamGetPriority); }
CUresult cuStreamQuery(void *s) { (void)s; OK(cuStreamQuery); }
CUresult cuStreamSynchronize(void *s) { (void)s; OK(cuStreamSynchronize); }
CUresult cuStreamIsCapturing(void *s, int *status) { (void)s; *status = 0; OK(cuStreamIsCapturing); }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { (void)s; (void)e; (void)f; OK(cuStreamWaitEvent); }
CUresult cuEventCreate(void **e, unsigned flags) { (void)flags; *e = handle(); OK(cuEventCreate); }
CUresult cuEventRecord(void *e, void *s) { (void)e; (void)s; OK(cuEventRecord); }
CUresult cuEventQuery(void *e) { (void)e; OK(cuEventQuery); }
CUresult cuEventSynchronize(void *e) { (void)e; OK(cuEventSynchronize); }
CUresult cuEventDestroy_v2(void *e) { (void)e; OK(cuEventDestroy_v2); }
CUresult cuLaunchHostFunc(void *s, void *fn, void *data) { (void)s; (void)fn; (void)data; OK(cuLaunchHostFunc); }
CUresult cuModuleLoadData(void **m, const void *image) { (void)image; *m = handle(); OK(cuModuleLoadData); }
CUresult cuModuleUnload(void *m) { (void)m; OK(cuModuleUnload); }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { (void)m; (void)name; *f = handle(); OK(cuModuleGetFunction); }
CUresult cuFuncGetAttribute(int *v, int attr, void *f) { (void)attr; (void)f; *v = 0; OK(cuFuncGetAttribute); }
CUresult cuFuncSetAttribute(void *f, int attr, int v) { (void)f; (void)attr; (void)v; OK(cuFuncSetAttribute); }
/* The last launch, as the driver saw it: function, grid, block, shared memory, stream, and the
 * first 8 bytes of each of the first `param_count` parameters (set by the test, which knows the
 * kernel's parameter list: the driver itself cannot tell). */
static int param_count;
static uint64_t last_launch[8 + 256];

void fake_cuda_expect_params(int n) { param_count = n < 256 ? n : 256; }
const uint64_t *fake_cuda_last_launch(void) { return last_launch; }

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *s, void **params, void **extra) {
    uint64_t head[8] = {(uint64_t)(uintptr_t)f, gx, gy, gz, bx, by, bz, ((uint64_t)smem << 32) ^ (uintptr_t)s};
    memcpy(last_launch, head, sizeof head);
    for (int i = 0; i < param_count; i++) memcpy(&last_launch[8 + i], params[i], 8);
    (void)extra; OK(cuLaunchKernel);
}
CUresult cuLaunchKernelEx(const void *cfg, void *f, void **params, void **extra) {
    (void)cfg; (void)f; (void)params; (void)extra; OK(cuLaunchKernelEx);
}
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) { (void)n; *p = 0; hit("cuMemAlloc_v2"); return 2; }
CUresult cuMemAllocAsync(uint64_t *p, size_t n, void *s) { (void)n; (void)s; *p = 0; hit("cuMemAllocAsync"); return 2; }
CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; *s = "fake driver error"; OK(cuGetErrorString); }
CUresult cuGetErrorName(CUresult e, const char **s) { (void)e; *s = "CUDA_ERROR_FAKE"; OK(cuGetErrorName); }
