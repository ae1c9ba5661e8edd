#define _POSIX_C_SOURCE 199309L
/* vector_add (f32) through a tilec launcher header built for sm80 only: on an H200 the sm_80 cubin does not run,
 * so the launcher picks the compute_80 PTX (the driver JIT-compiles it). Prints what K_check_device says, the
 * launch's result and the largest error against the host's sum; argv[1] = N. */
#include "va80.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("%s -> %d\n", #x, (int)r_); return 1; } } while (0)

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100003, i;
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr a, b, c;
  char msg[512];
  float *ha = malloc(sizeof(float) * n), *hb = malloc(sizeof(float) * n), *hc = malloc(sizeof(float) * n);
  double worst = 0;
  struct timespec t0, t1;
  CUresult rc;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  rc = vector_add_check_device(dev, msg, sizeof msg);
  printf("check_device rc %d: %s\n", (int)rc, msg);
  for (i = 0; i < n; ++i) { ha[i] = (float)((i * 7919) % 1000) / 37.0f - 13.0f; hb[i] = (float)(i % 613) * 0.25f; }
  CHECK(cuMemAlloc(&a, sizeof(float) * n));
  CHECK(cuMemAlloc(&b, sizeof(float) * n));
  CHECK(cuMemAlloc(&c, sizeof(float) * n));
  CHECK(cuMemcpyHtoD(a, ha, sizeof(float) * n));
  CHECK(cuMemcpyHtoD(b, hb, sizeof(float) * n));
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rc = vector_add_launch(0, a, b, c, n);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("launch rc %d (first launch, module load included: %.1f ms)\n", (int)rc,
         (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
  if (rc != CUDA_SUCCESS) return 2;
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(hc, c, sizeof(float) * n));
  for (i = 0; i < n; ++i) { double e = fabs((double)hc[i] - (double)(ha[i] + hb[i])); /* the f32 sum, as the kernel rounds it */ if (e > worst) worst = e; }
  printf("N %d max |err| %g -> %s\n", n, worst, worst == 0 ? "PASS" : "FAIL");
  return worst == 0 ? 0 : 3;
}
