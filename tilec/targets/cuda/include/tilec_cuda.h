// tilec_cuda.h -- tilec's own device helpers for NVIDIA GPUs (sm_80 and newer).
//
// Everything here is a thin, force-inlined wrapper around one PTX instruction or
// one short idiom, so that generated kernels stay readable and nvcc/NVRTC stay
// fast (no CuTe/CUTLASS).  The header is device-only and self-contained: it
// includes no host C/C++ headers, because NVRTC ships none.
//
// Half precision under NVRTC: NVRTC (13.0) does NOT carry <cuda_fp16.h> or
// <cuda_bf16.h> as built-in headers; they must be found on the include path
// (pass e.g. -I<CUDA toolkit>/include, or the include folder of the pip wheel
// nvidia-cuda-runtime).  When they cannot be found, TILEC_HAS_FP16 is 0 and
// the half/bf16 parts below are left out rather than failing the whole
// compile; float/int kernels still build.  nvcc always finds them.
//
// Fragment layouts for the mma/ldmatrix wrappers are described (and tested)
// in tilec/targets/cuda/mma_layouts.py.

#pragma once

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
#error "tilec_cuda.h needs sm_80 or newer (cp.async, bf16 mma)"
#endif

#ifndef TILEC_HAS_FP16
#if defined(__CUDACC_RTC__) && defined(__has_include)
#if __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>)
#define TILEC_HAS_FP16 1
#else
#define TILEC_HAS_FP16 0
#endif
#else
#define TILEC_HAS_FP16 1
#endif
#endif

#if TILEC_HAS_FP16
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#define TL_DEVICE __device__ __forceinline__
// Pure bit arithmetic that a host program may run too (tests/test_realign_rows.py checks it on a CPU).
#define TL_HOST_DEVICE __host__ __device__ __forceinline__

namespace tl {

#if TILEC_HAS_FP16
using half = __half;
using bf16 = __nv_bfloat16;
#endif

// ---------------------------------------------------------------------------
// Integer index arithmetic.
//
// C++ division truncates toward zero; tile index maps derived from Python-like
// semantics need floor division, which differs whenever the signs of the
// operands differ and the division is inexact.  b must be non-zero.
// ---------------------------------------------------------------------------

// The bits of `from` read as a `To` of the same width (T.reinterpret); the copy compiles to a register move.
template <typename To, typename From>
TL_DEVICE To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs types of one width");
  To to;
#if defined(__CUDACC_RTC__)  // NVRTC has no __builtin_memcpy; its device memcpy compiles to the same move
  memcpy(&to, &from, sizeof(To));
#else
  __builtin_memcpy(&to, &from, sizeof(To));
#endif
  return to;
}

template <typename T>
TL_DEVICE constexpr T ceildiv(T a, T b) {
  // Meant for sizes (a >= 0, b > 0), where this never overflows for the
  // ranges tilec emits and stays a single add + divide.
  return (a + b - 1) / b;
}

template <typename T>
TL_DEVICE constexpr T floordiv(T a, T b) {
  T q = a / b;
  // Truncation rounded up exactly when there is a remainder and the true
  // quotient is negative.
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

template <typename T>
TL_DEVICE constexpr T floormod(T a, T b) {
  T r = a % b;
  // Result takes the sign of the divisor, matching Python's a % b.
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// ---------------------------------------------------------------------------
// Addresses and lane id.
// ---------------------------------------------------------------------------

// ldmatrix / cp.async take a 32-bit .shared window address, not a generic
// pointer; converting once here keeps the asm operands narrow ("r").
TL_DEVICE unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

TL_DEVICE unsigned lane_id() {
  unsigned l;
  asm("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

// ---------------------------------------------------------------------------
// Vectorised loads / stores (generic address space: global or shared).
//
// Plain typed accesses through uint2/uint4 let the compiler emit LDG/LDS.64 and
// .128 and still schedule them freely; the caller guarantees the 8/16-byte
// alignment, which is the whole point of calling these.
// ---------------------------------------------------------------------------

TL_DEVICE unsigned ld_32(const void* p) { return *static_cast<const unsigned*>(p); }
TL_DEVICE uint2 ld_64(const void* p) { return *static_cast<const uint2*>(p); }
TL_DEVICE uint4 ld_128(const void* p) { return *static_cast<const uint4*>(p); }

TL_DEVICE void st_32(void* p, unsigned v) { *static_cast<unsigned*>(p) = v; }
TL_DEVICE void st_64(void* p, uint2 v) { *static_cast<uint2*>(p) = v; }
TL_DEVICE void st_128(void* p, uint4 v) { *static_cast<uint4*>(p) = v; }

// Read-only global load through the non-coherent path; only valid when no
// thread of the grid writes that memory during the kernel.
TL_DEVICE uint4 ld_global_nc_128(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

// ---------------------------------------------------------------------------
// Tensor-core MMA: D = A * B + C, m16n8k16, A row-major, B column-major, f32
// accumulators.  a: 4 regs of packed 16-bit pairs, b: 2 regs, c/d: 4 floats.
// d may alias c.  Not volatile: the instruction is pure, so the compiler may
// schedule or drop it like ordinary arithmetic.
// ---------------------------------------------------------------------------

TL_DEVICE void mma_m16n8k16_f16_f32(float (&d)[4], const unsigned (&a)[4],
                                    const unsigned (&b)[2], const float (&c)[4]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

TL_DEVICE void mma_m16n8k16_bf16_f32(float (&d)[4], const unsigned (&a)[4],
                                     const unsigned (&b)[2], const float (&c)[4]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// ---------------------------------------------------------------------------
// ldmatrix: warp-collective load of 8x8 b16 matrices from shared memory.
// Lane l supplies the address of row (l % 8) of matrix (l / 8); for x1/x2 only
// lanes 0-7 / 0-15 are read, but every lane must pass a valid pointer.  Each
// row is 16 contiguous bytes, 16-byte aligned.  volatile: it reads memory the
// compiler cannot see, so it must stay ordered with the barriers around it.
// ---------------------------------------------------------------------------

TL_DEVICE void ldmatrix_x1(unsigned& r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
               : "=r"(r)
               : "r"(smem_addr(smem)));
}

TL_DEVICE void ldmatrix_x2(unsigned (&r)[2], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem)));
}

TL_DEVICE void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// .trans: each 8x8 matrix is delivered transposed, which turns a row-major
// K x N tile in shared memory into the column-major B operand of mma.
TL_DEVICE void ldmatrix_x1_trans(unsigned& r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
               : "=r"(r)
               : "r"(smem_addr(smem)));
}

TL_DEVICE void ldmatrix_x2_trans(unsigned (&r)[2], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem)));
}

TL_DEVICE void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// ---------------------------------------------------------------------------
// cp.async: asynchronous global -> shared copies (sm_80).
//
// The src-size operand is what makes predication cheap: with src-size 0 no
// global bytes are read and the destination is zero-filled, so out-of-bounds
// tile elements need no branch and no separate memset.  The source pointer is
// never dereferenced when pred is false, but it is still converted, so pass
// any pointer (e.g. the tensor base) rather than garbage.
// "memory" clobbers keep the compiler from moving shared-memory accesses
// across the issue/commit/wait points.
// ---------------------------------------------------------------------------

// 16 bytes, bypassing L1 (.cg): the usual choice for streamed tiles.
TL_DEVICE void cp_async_cg_16(void* smem, const void* gmem, bool pred = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :
               : "r"(smem_addr(smem)), "l"(__cvta_generic_to_global(gmem)),
                 "r"(pred ? 16u : 0u)
               : "memory");
}

// .cg only exists for 16-byte copies; narrower ones must go through L1 (.ca).
TL_DEVICE void cp_async_ca_16(void* smem, const void* gmem, bool pred = true) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;"
               :
               : "r"(smem_addr(smem)), "l"(__cvta_generic_to_global(gmem)),
                 "r"(pred ? 16u : 0u)
               : "memory");
}

TL_DEVICE void cp_async_ca_8(void* smem, const void* gmem, bool pred = true) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
               :
               : "r"(smem_addr(smem)), "l"(__cvta_generic_to_global(gmem)),
                 "r"(pred ? 8u : 0u)
               : "memory");
}

TL_DEVICE void cp_async_ca_4(void* smem, const void* gmem, bool pred = true) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
               :
               : "r"(smem_addr(smem)), "l"(__cvta_generic_to_global(gmem)),
                 "r"(pred ? 4u : 0u)
               : "memory");
}

// Closes the current group of this thread's cp.async operations.
TL_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight
// (N = stages - 1 in a multi-stage pipeline).  Only covers this thread's own
// copies: a __syncthreads() is still needed before reading other threads' data.
template <int N>
TL_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

TL_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---------------------------------------------------------------------------
// Math.
// ---------------------------------------------------------------------------

// One MUFU op; flushes denormals and is accurate to ~2 ulp, which is what
// online softmax (exp2 of pre-scaled logits) wants.
TL_DEVICE float exp2f_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

TL_DEVICE float rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// max/min map to single min/max instructions.  float follows fmaxf (a NaN
// operand yields the other operand).
TL_DEVICE float max(float a, float b) { return fmaxf(a, b); }
TL_DEVICE float min(float a, float b) { return fminf(a, b); }
TL_DEVICE int max(int a, int b) { return a > b ? a : b; }
TL_DEVICE int min(int a, int b) { return a < b ? a : b; }
TL_DEVICE unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
TL_DEVICE unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
#if TILEC_HAS_FP16
TL_DEVICE half max(half a, half b) { return __hmax(a, b); }
TL_DEVICE half min(half a, half b) { return __hmin(a, b); }
TL_DEVICE bf16 max(bf16 a, bf16 b) { return __hmax(a, b); }
TL_DEVICE bf16 min(bf16 a, bf16 b) { return __hmin(a, b); }
#endif

// ---------------------------------------------------------------------------
// Warp reductions (butterfly via shfl.xor).  After the call every lane holds
// the reduction over its aligned group of `width` lanes (width a power of two,
// <= 32).  All 32 lanes must take part: the mask is the full warp.
// ---------------------------------------------------------------------------

template <typename T>
TL_DEVICE T warp_reduce_sum(T v, int width = 32) {
  for (int off = width >> 1; off > 0; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off, width);
  return v;
}

template <typename T>
TL_DEVICE T warp_reduce_max(T v, int width = 32) {
  for (int off = width >> 1; off > 0; off >>= 1) v = tl::max(v, __shfl_xor_sync(0xffffffffu, v, off, width));
  return v;
}

template <typename T>
TL_DEVICE T warp_reduce_min(T v, int width = 32) {
  for (int off = width >> 1; off > 0; off >>= 1) v = tl::min(v, __shfl_xor_sync(0xffffffffu, v, off, width));
  return v;
}

// ---------------------------------------------------------------------------
// Packing two floats into one 32-bit register of 16-bit values, `lo` in bits
// 0-15.  That is the element order mma/ldmatrix fragments use (lower column
// index in the low half).  cvt's first source goes to the HIGH half, hence the
// swapped operands.  Round to nearest even.
// ---------------------------------------------------------------------------

TL_DEVICE unsigned pack_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

TL_DEVICE unsigned pack_bf162(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#if TILEC_HAS_FP16
// Two 16-bit floats that are already rounded: their bits side by side (lo in the low half), no
// conversion through f32.
TL_DEVICE unsigned pack2(half lo, half hi) {
  return static_cast<unsigned>(__half_as_ushort(lo)) | (static_cast<unsigned>(__half_as_ushort(hi)) << 16);
}
TL_DEVICE unsigned pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<unsigned>(__bfloat16_as_ushort(lo)) | (static_cast<unsigned>(__bfloat16_as_ushort(hi)) << 16);
}
#endif

// ---------------------------------------------------------------------------
// Atomic adds (return the old value; when unused the compiler emits RED).
// On sm_80 the half/bf16 forms become compare-and-swap loops (native 16-bit
// float atomics arrive with sm_90), so hot reductions should accumulate in
// f32 and convert once.
// ---------------------------------------------------------------------------

TL_DEVICE float atomic_add(float* addr, float v) { return atomicAdd(addr, v); }
TL_DEVICE int atomic_add(int* addr, int v) { return atomicAdd(addr, v); }
#if TILEC_HAS_FP16
TL_DEVICE half atomic_add(half* addr, half v) { return atomicAdd(addr, v); }
TL_DEVICE bf16 atomic_add(bf16* addr, bf16 v) { return atomicAdd(addr, v); }
#endif


// atomic max/min: ints have native instructions; floats use the ordering of their bit patterns
// (non-negative floats order like signed ints, negative ones like reversed unsigned ints).
TL_DEVICE int atomic_max(int* addr, int v) { return atomicMax(addr, v); }
TL_DEVICE int atomic_min(int* addr, int v) { return atomicMin(addr, v); }
TL_DEVICE float atomic_max(float* addr, float v) {
  return v >= 0.f ? __int_as_float(atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v)))
                  : __uint_as_float(atomicMin(reinterpret_cast<unsigned*>(addr), __float_as_uint(v)));
}
TL_DEVICE float atomic_min(float* addr, float v) {
  return v >= 0.f ? __int_as_float(atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v)))
                  : __uint_as_float(atomicMax(reinterpret_cast<unsigned*>(addr), __float_as_uint(v)));
}

// ---------------------------------------------------------------------------
// Pointer forms used by generated code: fragments live in flat register arrays
// (always indexed by constants after unrolling), so the code passes &arr[k].
// ---------------------------------------------------------------------------

#if TILEC_HAS_FP16
TL_DEVICE void mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TL_DEVICE void mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
TL_DEVICE void ldmatrix_x2_p(unsigned* r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(smem)) : "memory");
}
TL_DEVICE void ldmatrix_x4_p(unsigned* r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(smem)) : "memory");
}
TL_DEVICE void ldmatrix_x2_trans_p(unsigned* r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(smem)) : "memory");
}
TL_DEVICE void ldmatrix_x4_trans_p(unsigned* r, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(smem)) : "memory");
}

// A 16-byte global read that yields zeros where `pred` is false (outside the tensor).
TL_DEVICE void copy16_or_zero(void* dst, const void* src, bool pred) {
  st_128(dst, pred ? ld_128(src) : make_uint4(0, 0, 0, 0));
}

TL_DEVICE bool aligned(const void* p, unsigned long long bytes) {
  return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}

// Words w[q + i] .. w[q + i + 1] of two 16-byte chunks, shifted right by `bits` (a multiple of 8): the 16 bytes
// that start `q * 4 + bits / 8` bytes into the first chunk, picked by selects (no register array indexed at run time).
TL_HOST_DEVICE uint4 realign_words(const unsigned (&w)[8], unsigned q, unsigned bits) {
  unsigned v[6], u[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) v[i] = (q & 2u) ? w[i + 2] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) u[i] = (q & 1u) ? v[i + 1] : v[i];
  unsigned o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    o[i] = static_cast<unsigned>(((static_cast<unsigned long long>(u[i + 1]) << 32) | u[i]) >> bits);
  return make_uint4(o[0], o[1], o[2], o[3]);
}

template <int Bytes> struct UintOf;
template <> struct UintOf<1> { typedef unsigned char type; };
template <> struct UintOf<2> { typedef unsigned short type; };
template <> struct UintOf<4> { typedef unsigned type; };

// The 16 bytes that start s bytes into chunk lo (s < 16), the rest from the chunk after it, hi.
TL_HOST_DEVICE uint4 shift_chunks(const uint4& lo, const uint4& hi, unsigned s) {
  const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  return realign_words(w, s >> 2, (s & 3u) * 8u);
}

// copy_shifted: G = sizeof...(dst) consecutive 16-byte chunks starting at src (a row of a tensor that is not 16-byte
// aligned: src is aligned to its element only) into the shared-memory chunks dst..., from the G + 1 aligned 16-byte
// chunks that cover them (G + 1 loads, not 2G: a neighbouring output's second chunk is the next one's first). The
// caller knows the tensor holds 16 more bytes after them (the last chunk may reach past them; the first may start
// before the tensor: a misaligned base lies inside an allocation, whose start is aligned). The pointer arithmetic
// keeps the tensor's address space, so that the loads are global loads issued ahead of the shared stores.
template <typename T, typename... D>
TL_DEVICE void copy_shifted(const T* src, D*... dst) {
  constexpr int G = int(sizeof...(D));
  const unsigned s = static_cast<unsigned>(reinterpret_cast<unsigned long long>(src)) & 15u;
  const uint4* p = reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(src) - s);
  uint4 raw[G + 1];
#pragma unroll
  for (int i = 0; i < G; ++i) raw[i] = p[i];
  raw[G] = s ? p[G] : raw[G - 1];
  void* out[G] = {static_cast<void*>(dst)...};
#pragma unroll
  for (int i = 0; i < G; ++i) st_128(out[i], shift_chunks(raw[i], raw[i + 1], s));
}

// copy16_realign: the same at a tile's edges: the n elements at src (n <= 16 / sizeof(T)), zeros after them, shifted
// into place where all 16 bytes and the 16 after them lie below `end`, else element by element (no byte at or past
// `end` is read).
template <typename T>
TL_DEVICE void copy16_realign(void* dst, const T* src, int n, const T* end) {
  constexpr int V = 16 / int(sizeof(T));
  if (n == V && end - src >= 2 * V) {
    copy_shifted(src, dst);
    return;
  }
  typedef typename UintOf<int(sizeof(T))>::type U;
  union { U e[V]; uint4 v; } out;
  const U* bits = reinterpret_cast<const U*>(src);
#pragma unroll
  for (int j = 0; j < V; ++j) out.e[j] = j < n ? bits[j] : U(0);
  st_128(dst, out.v);
}

// The N elements that start `shift` elements into the aligned unit lo (N elements, 4, 8 or 16 bytes), the rest
// from the unit after it, hi (0 <= shift < N): a funnel shift of the two units' bits.
template <int Bytes> struct UnitOf;
template <> struct UnitOf<4> { typedef unsigned type; };
template <> struct UnitOf<8> { typedef unsigned long long type; };
template <> struct UnitOf<16> { typedef uint4 type; };

template <typename T>
TL_HOST_DEVICE T shift_units(const T& lo, const T& hi, unsigned shift_bytes) {
  if (shift_bytes == 0) return lo;
  const unsigned bits = shift_bytes * 8u;
  return static_cast<T>((lo >> bits) | (hi << (8u * sizeof(T) - bits)));
}
TL_HOST_DEVICE uint4 shift_units(const uint4& lo, const uint4& hi, unsigned shift_bytes) {
  return shift_chunks(lo, hi, shift_bytes);
}

// load_realign: the N elements at unit + shift (a row that is not aligned to N elements: `unit` is the aligned unit
// of N elements holding the first, 0 <= shift < N), converted to R; only the first `count` are read (0 <= count <= N),
// zeros after them. Two aligned vector loads and a funnel shift where all N are wanted and both units lie below
// `end` (the tensor's end), else element by element, so that no byte at or past `end` is read.
template <int N, typename R, typename T>
TL_DEVICE void load_realign(R* dst, const T* unit, int shift, int count, const T* end) {
  typedef typename UnitOf<N * int(sizeof(T))>::type U;
  typedef typename UintOf<int(sizeof(T))>::type E;
  union { U u; E e[N]; } out;
  if (count == N && (shift == 0 || end - unit >= 2 * N)) {
    const U* p = reinterpret_cast<const U*>(unit);
    const U lo = p[0];
    const U hi = shift ? p[1] : lo;
    out.u = shift_units(lo, hi, static_cast<unsigned>(shift) * unsigned(sizeof(T)));
  } else {
    const E* bits = reinterpret_cast<const E*>(unit);
#pragma unroll
    for (int j = 0; j < N; ++j) out.e[j] = j < count ? bits[shift + j] : E(0);
  }
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = static_cast<R>(static_cast<float>(bit_cast<T>(out.e[i])));
}

// N consecutive elements as one vector access (8 or 16 bytes), converted between the storage type
// T and the register type R on the way; a false `pred` loads zeros.
template <int N, typename T>
struct alignas(sizeof(T) * N) Vec { T v[N]; };

template <int N, typename R, typename T>
TL_DEVICE void load_cvt(R* dst, const T* src, bool pred) {
  Vec<N, T> x;
  if (pred) x = *reinterpret_cast<const Vec<N, T>*>(src);
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = pred ? static_cast<R>(static_cast<float>(x.v[i])) : static_cast<R>(0.0f);
}

template <int N, typename T, typename R>
TL_DEVICE void store_cvt(T* dst, const R* src) {
  Vec<N, T> x;
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = static_cast<T>(static_cast<float>(src[i]));
  *reinterpret_cast<Vec<N, T>*>(dst) = x;
}

TL_DEVICE bool aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0; }


// ---------------------------------------------------------------- Hopper (sm90): mbarriers, TMA, wgmma
// A CUtensorMap, encoded by the host (cuTensorMapEncodeTiled) and passed by value as a
// __grid_constant__ kernel parameter.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// An mbarrier completes a phase when its expected arrivals and transaction bytes have all come in;
// waiters name the parity of the phase they wait for.
TL_DEVICE void mbar_init(long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Make the initialised barriers visible to the async proxy (TMA) and to the other threads.
TL_DEVICE void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
}

TL_DEVICE void mbar_expect_tx(long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

TL_DEVICE void mbar_arrive(long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// One arrival for the whole warp: its lanes are done (__syncwarp orders their accesses before lane 0's
// release-arrive).
TL_DEVICE void mbar_arrive_warp(long long* bar) {
  __syncwarp();
  if (lane_id() == 0) mbar_arrive(bar);
}

TL_DEVICE void mbar_wait(long long* bar, int parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// stmatrix (sm90): the warp-collective store of 8x8 b16 matrices to shared memory, ldmatrix's inverse. Lane l
// gives the address of row (l % 8) of matrix (l / 8) (16 contiguous bytes, 16-byte aligned); register i of
// every lane holds its two elements of matrix i, in the mma/wgmma accumulator's arrangement (row l / 4, columns
// 2 * (l % 4) and the next), so one instruction stores four registers of packed halves per lane.
TL_DEVICE void stmatrix_x4(void* smem, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(smem_addr(smem)), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

TL_DEVICE void stmatrix_x2(void* smem, unsigned r0, unsigned r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(smem_addr(smem)), "r"(r0), "r"(r1)
               : "memory");
}

// TMA: one box of the tensor map `map` (a __grid_constant__ kernel parameter) at element coordinates
// (innermost first) into shared memory; completion is counted in bytes on `bar`. Out-of-bounds
// elements arrive as zeros.
#define TL_TMA_LOAD(N, COORDS, ...)                                                                  \
  asm volatile("cp.async.bulk.tensor." #N "d.shared::cluster.global.mbarrier::complete_tx::bytes"    \
               " [%0], [%1, {" COORDS "}], [%2];" ::"r"(smem_addr(dst)),                              \
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_addr(bar)), __VA_ARGS__ : "memory")
TL_DEVICE void tma_load_1d(const void* map, void* dst, long long* bar, int c0) {
  TL_TMA_LOAD(1, "%3", "r"(c0));
}
TL_DEVICE void tma_load_2d(const void* map, void* dst, long long* bar, int c0, int c1) {
  TL_TMA_LOAD(2, "%3, %4", "r"(c0), "r"(c1));
}
TL_DEVICE void tma_load_3d(const void* map, void* dst, long long* bar, int c0, int c1, int c2) {
  TL_TMA_LOAD(3, "%3, %4, %5", "r"(c0), "r"(c1), "r"(c2));
}
TL_DEVICE void tma_load_4d(const void* map, void* dst, long long* bar, int c0, int c1, int c2, int c3) {
  TL_TMA_LOAD(4, "%3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
TL_DEVICE void tma_load_5d(const void* map, void* dst, long long* bar, int c0, int c1, int c2, int c3, int c4) {
  TL_TMA_LOAD(5, "%3, %4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}
#undef TL_TMA_LOAD

// TMA store of one box from shared memory (the tensor map clips what falls outside the tensor);
// stores are committed as a bulk group, and the shared tile may be reused once the group has read it.
#define TL_TMA_STORE(N, COORDS, ...)                                                               \
  asm volatile("cp.async.bulk.tensor." #N "d.global.shared::cta.bulk_group [%0, {" COORDS "}], [%1];" \
               ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_addr(src)), __VA_ARGS__ : "memory")
TL_DEVICE void tma_store_1d(const void* map, const void* src, int c0) { TL_TMA_STORE(1, "%2", "r"(c0)); }
TL_DEVICE void tma_store_2d(const void* map, const void* src, int c0, int c1) {
  TL_TMA_STORE(2, "%2, %3", "r"(c0), "r"(c1));
}
TL_DEVICE void tma_store_3d(const void* map, const void* src, int c0, int c1, int c2) {
  TL_TMA_STORE(3, "%2, %3, %4", "r"(c0), "r"(c1), "r"(c2));
}
TL_DEVICE void tma_store_4d(const void* map, const void* src, int c0, int c1, int c2, int c3) {
  TL_TMA_STORE(4, "%2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
TL_DEVICE void tma_store_5d(const void* map, const void* src, int c0, int c1, int c2, int c3, int c4) {
  TL_TMA_STORE(5, "%2, %3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}
#undef TL_TMA_STORE
TL_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
TL_DEVICE void tma_store_wait() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

// Order this thread's generic-proxy shared-memory accesses before later async-proxy ones (wgmma, TMA).
TL_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// T.fence_global's fence, between two block barriers: after the first it is cumulative over every write of the block,
// and an atomic after it releases them; after an atomic it acquires what that atomic saw released. acq_rel is all
// the pattern needs (PTX ISA, memory consistency model); __threadfence() would be a sequentially consistent fence.
TL_DEVICE void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

TL_DEVICE void named_barrier(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

TL_DEVICE void named_barrier_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

template <int N>
TL_DEVICE void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N>
TL_DEVICE void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }

// A wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (16-byte
// units) and the swizzle mode (1: 128 B, 2: 64 B, 3: 32 B).
TL_DEVICE unsigned long long wgmma_desc(const void* smem, unsigned lbo, unsigned sbo, unsigned swizzle) {
  unsigned long long d = (smem_addr(smem) & 0x3FFFFu) >> 4;
  d |= static_cast<unsigned long long>((lbo >> 4) & 0x3FFFu) << 16;
  d |= static_cast<unsigned long long>((sbo >> 4) & 0x3FFFu) << 32;
  d |= static_cast<unsigned long long>(swizzle) << 62;
  return d;
}

// `desc` advanced by `bytes` (a multiple of 16). The start address field counts 16-byte units, and a shared address
// (under 228 KiB) never carries out of its 14 bits; int arithmetic (an offset never overflows) lets nvcc fold the
// constant parts, and the add is 32-bit, so the fields above the address stay as they are.
TL_DEVICE unsigned long long wgmma_desc_advance(unsigned long long desc, int bytes) {
  unsigned lo = static_cast<unsigned>(desc) + static_cast<unsigned>(bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

TL_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
TL_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
TL_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// Pin accumulator registers in program order around asynchronous wgmma (the compiler must not move
// their reads before wgmma.wait_group or their writes after the wgmma that reads them).
template <int N>
TL_DEVICE void fence_regs(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

#endif  // __CUDA_ARCH__ >= 900

}  // namespace tl

#undef TL_DEVICE
