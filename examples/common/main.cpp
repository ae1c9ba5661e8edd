// tilec example: run samples/gemm.tile and samples/softmax.tile through their generated C launchers
// (headers gemm.h and softmax.h, or objects gemm.o and softmax.o), with the CUDA driver API only, and check
// the results on the CPU.
//
// Built by examples/cmake (tilec_add_kernel, headers) and examples/make (the tilec.mk pattern rule,
// objects); run it on a machine with an NVIDIA GPU. Prints PASS and exits 0 when both kernels are right.

#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#if defined(TILEC_EXAMPLE_OBJECTS)
// examples/make: the launchers live in gemm.o and softmax.o (tilec -c: relocatable objects with the cubins
// inside, linked like nvcc objects); their C prototypes are the "prototypes" of gemm.o.json and softmax.o.json.
extern "C" {
CUresult gemm_launch(CUstream stream, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, int M, int K, int N);
CUresult gemm_check_device(CUdevice dev, char* message, size_t message_size);
CUresult softmax_launch(CUstream stream, CUdeviceptr X, CUdeviceptr Y, int M, int N);
}
#else
// examples/cmake: the launcher headers (tilec -o x.h), each with its cubins embedded
#include "gemm.h"     // gemm_launch(stream, A, B, C, M, K, N)
#include "softmax.h"  // softmax_launch(stream, X, Y, M, N)
#endif

#define CHECK(call)                                                                     \
  do {                                                                                  \
    CUresult rc_ = (call);                                                              \
    if (rc_ != CUDA_SUCCESS) {                                                          \
      const char* name_ = "?";                                                          \
      cuGetErrorName(rc_, &name_);                                                      \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, name_); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// IEEE binary16 <-> float on the host (round to nearest even), so that the example needs no
// CUDA runtime headers.
static uint16_t f2h(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0u));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e), half = man >> shift, rest = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (man >> 13), rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | half);
}

static float h2f(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {  // subnormal
      int e = -1;
      do {
        man <<= 1;
        ++e;
      } while (!(man & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (man << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

static bool check_close(const char* what, const std::vector<uint16_t>& got, const std::vector<float>& want, float atol,
                  float rtol) {
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = h2f(got[i]), err = std::fabs(g - want[i]);
    worst = std::fmax(worst, err);
    if (!(err <= atol + rtol * std::fabs(want[i]))) {
      if (bad < 5) std::fprintf(stderr, "%s[%zu] = %g, expected %g\n", what, i, g, want[i]);
      ++bad;
    }
  }
  std::printf("%-8s %zu values, max abs error %.3g, %zu outside tolerance\n", what, want.size(), worst, bad);
  return bad == 0;
}

int main() {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  char msg[512];
  CUresult fits = gemm_check_device(dev, msg, sizeof msg);  // which embedded image this GPU runs
  std::printf("%s\n", msg);
  if (fits != CUDA_SUCCESS) return 1;
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);

  // C[M, N] = A[M, K] @ B[K, N] in f16 with f32 accumulation; ragged sizes (not multiples of the tiles).
  // On sm90 the kernel loads tiles with TMA when every row pitch is a multiple of 16 bytes (K=336, N=712);
  // otherwise (K=333, N=700) the launcher runs its no-TMA twin. Both must match the CPU.
  auto gemm_case = [&](int M, int N, int K, CUdeviceptr* keep) -> bool {
    std::vector<uint16_t> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N);
    for (auto& v : A) v = f2h(uni(rng));
    for (auto& v : B) v = f2h(uni(rng));
    CUdeviceptr dA, dB, dC;
    CHECK(cuMemAlloc(&dA, A.size() * 2));
    CHECK(cuMemAlloc(&dB, B.size() * 2));
    CHECK(cuMemAlloc(&dC, C.size() * 2));
    CHECK(cuMemcpyHtoD(dA, A.data(), A.size() * 2));
    CHECK(cuMemcpyHtoD(dB, B.data(), B.size() * 2));
    CHECK(cuMemsetD16(dC, 0x7e00, C.size()));  // NaN: an element the kernel fails to write shows up
    CHECK(gemm_launch(stream, dA, dB, dC, M, K, N));
    CHECK(cuStreamSynchronize(stream));
    CHECK(cuMemcpyDtoH(C.data(), dC, C.size() * 2));
    std::vector<float> Cref(size_t(M) * N, 0.0f), Bf(B.size());
    for (size_t i = 0; i < B.size(); ++i) Bf[i] = h2f(B[i]);
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k) {
        float a = h2f(A[size_t(i) * K + k]);
        for (int j = 0; j < N; ++j) Cref[size_t(i) * N + j] += a * Bf[size_t(k) * N + j];
      }
    keep[0] = dA, keep[1] = dB, keep[2] = dC;
    char label[64];
    std::snprintf(label, sizeof label, "gemm %dx%dx%d", M, N, K);
    return check_close(label, C, Cref, 2e-2f, 1e-2f);
  };
  CUdeviceptr aligned[3], dA, dB, dC, bufs[3];
  const int K = 333, N = 700;
  bool ok = gemm_case(1000, 712, 336, aligned);
  ok = gemm_case(1000, N, K, bufs) && ok;
  dA = bufs[0], dB = bufs[1], dC = bufs[2];
  for (CUdeviceptr p : aligned) CHECK(cuMemFree(p));

  // Y = softmax(X) along rows.
  const int SM = 333, SN = 1500;
  std::vector<uint16_t> X(size_t(SM) * SN), Y(X.size());
  std::uniform_real_distribution<float> wide(-8.0f, 8.0f);
  for (auto& v : X) v = f2h(wide(rng));
  CUdeviceptr dX, dY;
  CHECK(cuMemAlloc(&dX, X.size() * 2));
  CHECK(cuMemAlloc(&dY, Y.size() * 2));
  CHECK(cuMemcpyHtoD(dX, X.data(), X.size() * 2));
  CHECK(cuMemsetD16(dY, 0x7e00, Y.size()));
  CHECK(softmax_launch(stream, dX, dY, SM, SN));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyDtoH(Y.data(), dY, Y.size() * 2));
  std::vector<float> Yref(Y.size());
  for (int i = 0; i < SM; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < SN; ++j) mx = std::fmax(mx, h2f(X[size_t(i) * SN + j]));
    for (int j = 0; j < SN; ++j) sum += std::exp(h2f(X[size_t(i) * SN + j]) - mx);
    for (int j = 0; j < SN; ++j) Yref[size_t(i) * SN + j] = float(std::exp(h2f(X[size_t(i) * SN + j]) - mx) / sum);
  }
  ok = check_close("softmax", Y, Yref, 1e-4f, 1e-2f) && ok;

  // Sizes of zero launch nothing; a negative size is refused.
  CHECK(gemm_launch(stream, dA, dB, dC, 0, K, N));
  if (gemm_launch(stream, dA, dB, dC, -1, K, N) != CUDA_ERROR_INVALID_VALUE) {
    std::fprintf(stderr, "a negative size was not refused\n");
    ok = false;
  }
  cuMemFree(dA);
  cuMemFree(dB);
  cuMemFree(dC);
  cuMemFree(dX);
  cuMemFree(dY);
  cuStreamDestroy(stream);
  cuDevicePrimaryCtxRelease(dev);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
