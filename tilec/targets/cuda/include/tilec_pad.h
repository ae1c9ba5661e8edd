// tilec_pad.h -- the pitched copy tilec.runtime runs around a TMA kernel whose tensors' rows are not a multiple of
// 16 bytes (docs/deploy.md, "The fallback rule"): such a tensor is copied into a workspace whose rows are padded to
// 16 bytes before the launch (an output also back out after it), and the kernel's tensor maps describe the
// workspace. The CUDA driver's own pitched copy (cuMemcpy2DAsync) ran at 0.13 TB/s on 2-byte aligned rows on the
// H200 (bench/RESULTS.md), so the artifact carries this one.
//
// Appended to the generated source after tilec_cuda.h only when a kernel reads or writes a tensor through TMA.
// A warp moves a 512-byte span of a row, 16 bytes a thread. `src_unit` and `dst_unit` (16, 8, 4, 2 or 1 bytes) are the
// widest accesses each side's address and pitch allow. Where both are 4 or more, the warp moves the span in units of
// the narrower: in step i, lane l moves unit i * 32 + l, so that every load and store instruction of the warp covers
// contiguous bytes. Narrower rows take tilec_pad_rows_shifted (below): aligned 16-byte loads and stores, the bytes
// shifted in registers. Grid: x over a row's spans (blocks of 32 to 256 threads), y over the rows (in strides of
// gridDim.y). A thread takes TILEC_PAD_ROWS rows, gridDim.y apart, at a time: all their loads, then all their stores,
// so that a multiprocessor keeps that many times the bytes in flight (with one row a thread, 16 bytes and a block's
// start for every 16 bytes moved, the copy ran at 2.7 TB/s on the H200 where torch's copy runs at 4.25). Two rows, not
// four: the shifted path then fits 62 registers, a full multiprocessor of threads, and moved the H200's odd rows 7-15%
// faster than with four (bench/pad_copy.py, bench/RESULTS.md s33).
#define TILEC_PAD_ROWS 2

// One thread's units of a warp's span (lane l: units l, l + 32, ...), and their loads and stores.
template <typename Unit>
struct tilec_pad_units {
  Unit u[16 / sizeof(Unit)];
};

template <typename Unit>
__device__ __forceinline__ void tilec_pad_load(tilec_pad_units<Unit>& v, const unsigned char* s, long long left,
                                               int lane) {
#pragma unroll
  for (int i = 0; i < (int)(16 / sizeof(Unit)); ++i) {
    const int u = i * 32 + lane;
    if ((long long)u * sizeof(Unit) < left) v.u[i] = Unit(reinterpret_cast<const Unit*>(s)[u]);
  }
}

template <typename Unit>
__device__ __forceinline__ void tilec_pad_store(const tilec_pad_units<Unit>& v, unsigned char* d, long long left,
                                                int lane) {
#pragma unroll
  for (int i = 0; i < (int)(16 / sizeof(Unit)); ++i) {
    const int u = i * 32 + lane;
    if ((long long)u * sizeof(Unit) < left) reinterpret_cast<Unit*>(d)[u] = v.u[i];
  }
}

// The warp's span of the rows by, by + gy, ...: TILEC_PAD_ROWS rows' loads, then their stores.
template <typename Unit>
__device__ __forceinline__ void tilec_pad_spans(const unsigned char* src, unsigned char* dst, long long rows,
                                                long long left, long long src_pitch, long long dst_pitch, long long by,
                                                long long gy, int lane) {
  for (long long r0 = by; r0 < rows; r0 += gy * TILEC_PAD_ROWS) {
    tilec_pad_units<Unit> v[TILEC_PAD_ROWS];
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j)
      if (r0 + j * gy < rows) tilec_pad_load(v[j], src + (r0 + j * gy) * src_pitch, left, lane);
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j)
      if (r0 + j * gy < rows) tilec_pad_store(v[j], dst + (r0 + j * gy) * dst_pitch, left, lane);
  }
}

// The 16 bytes at `at` (16-byte aligned).
__device__ __forceinline__ uint4 tilec_pad_load16(const unsigned char* at) { return *reinterpret_cast<const uint4*>(at); }

// The bytes [at, at + 16) of the tensor whose bytes are [lo, hi), `at` 16-byte aligned: one 16-byte load where the
// whole block lies in the tensor, else the block's bytes that do, one by one (the rest read as 0: no caller uses them).
// A tensor's first and last 16-byte blocks may start or end outside it, where another allocation may begin.
__device__ __forceinline__ uint4 tilec_pad_block(const unsigned char* at, const unsigned char* lo,
                                                 const unsigned char* hi) {
  if (at >= lo && at + 16 <= hi) return tilec_pad_load16(at);
  unsigned w[4] = {0, 0, 0, 0};
  for (int i = 0; i < 16; ++i)
    if (at + i >= lo && at + i < hi) w[i >> 2] |= (unsigned)at[i] << (8 * (i & 3));
  return uint4{w[0], w[1], w[2], w[3]};
}

// Bytes [shift, shift + 4) of the little-endian pair (lo, hi), shift 0 to 3 bytes.
__device__ __forceinline__ unsigned tilec_pad_funnel(unsigned lo, unsigned hi, int shift) {
  return shift ? (lo >> (8 * shift)) | (hi << (32 - 8 * shift)) : lo;
}

// Bytes [off, off + 16) of the 32 in the aligned blocks a, b (off 0 to 15). The words are picked by selects: a register
// array indexed at run time would live in local memory.
__device__ __forceinline__ uint4 tilec_pad_shift(const uint4& a, const uint4& b, unsigned off) {
  const unsigned q = off >> 2;
  const int shift = (int)(off & 3);
  const unsigned x0 = q == 0 ? a.x : q == 1 ? a.y : q == 2 ? a.z : a.w;
  const unsigned x1 = q == 0 ? a.y : q == 1 ? a.z : q == 2 ? a.w : b.x;
  const unsigned x2 = q == 0 ? a.z : q == 1 ? a.w : q == 2 ? b.x : b.y;
  const unsigned x3 = q == 0 ? a.w : q == 1 ? b.x : q == 2 ? b.y : b.z;
  const unsigned x4 = q == 0 ? b.x : q == 1 ? b.y : q == 2 ? b.z : b.w;
  return uint4{tilec_pad_funnel(x0, x1, shift), tilec_pad_funnel(x1, x2, shift), tilec_pad_funnel(x2, x3, shift),
               tilec_pad_funnel(x3, x4, shift)};
}

// 16 source bytes from `s` (any alignment): the two aligned 16-byte blocks around them, each read whole where it lies
// in the tensor's bytes [lo, hi) and byte by byte where it does not.
__device__ __forceinline__ uint4 tilec_pad_gather(const unsigned char* s, const unsigned char* lo,
                                                  const unsigned char* hi) {
  const unsigned char* at = reinterpret_cast<const unsigned char*>(reinterpret_cast<unsigned long long>(s) & ~15ull);
  return tilec_pad_shift(tilec_pad_block(at, lo, hi), tilec_pad_block(at + 16, lo, hi),
                         (unsigned)(reinterpret_cast<unsigned long long>(s) & 15));
}

// Bytes [0, n) of the 16 in `v` to d (n under 16), one at a time, from registers.
__device__ __forceinline__ void tilec_pad_store_bytes(unsigned char* d, const uint4& v, long long n) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 15; ++i)
    if (i < n) d[i] = (unsigned char)(w[i >> 2] >> (8 * (i & 3)));
}

// Rows where either side is aligned to less than 4 bytes (rows of an odd number of 2-byte elements, 1-byte rows of
// any length), which byte and 2-byte accesses moved slowly (fp8 calls with such rows ran 6-23% longer on the H200,
// bench/RESULTS.md s14). A destination row is cut at its 16-byte boundaries: `head` bytes (under 16) up to the first,
// then chunk c, the bytes [head + 16c, head + 16c + 16) (the last one may be shorter). Every thread moves one chunk of
// TILEC_PAD_ROWS rows: for each, the two aligned 16-byte source blocks that hold its bytes, all the rows' loads first
// (no branch among them: the memory system sees them together), then the bytes shifted in registers and stored, one
// aligned 16-byte store a chunk (a short last chunk, and the head, byte by byte from registers). Loads of blocks that
// are not wholly in the tensor's bytes [lo, hi) (its first and last 16-byte blocks may start or end outside it,
// where another allocation may begin) are redone byte by byte after the others.
__device__ __forceinline__ void tilec_pad_rows_shifted(const unsigned char* src, unsigned char* dst, long long rows,
                                                       long long width, long long src_pitch, long long dst_pitch,
                                                       long long chunk, long long by, long long gy) {
  const unsigned char* lo = src;
  const unsigned char* hi = src + (rows - 1) * src_pitch + width;
  for (long long r0 = by; r0 < rows; r0 += gy * TILEC_PAD_ROWS) {
    long long first[TILEC_PAD_ROWS];
    const unsigned char* at[TILEC_PAD_ROWS];
    uint4 a[TILEC_PAD_ROWS], b[TILEC_PAD_ROWS];
    bool whole[TILEC_PAD_ROWS];
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j) {
      const long long r = r0 + j * gy;
      const unsigned char* d = dst + r * dst_pitch;
      first[j] = (long long)((16 - (reinterpret_cast<unsigned long long>(d) & 15)) & 15) + chunk * 16;
      if (r >= rows || first[j] >= width) first[j] = -1;
      at[j] = reinterpret_cast<const unsigned char*>(
          reinterpret_cast<unsigned long long>(src + r * src_pitch + first[j]) & ~15ull);
      whole[j] = first[j] >= 0 && at[j] >= lo && at[j] + 32 <= hi;
      if (whole[j]) {
        a[j] = tilec_pad_load16(at[j]);
        b[j] = tilec_pad_load16(at[j] + 16);
      }
    }
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j)
      if (first[j] >= 0 && !whole[j]) {
        a[j] = tilec_pad_block(at[j], lo, hi);
        b[j] = tilec_pad_block(at[j] + 16, lo, hi);
      }
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j) {
      if (first[j] < 0) continue;
      const long long r = r0 + j * gy;
      const unsigned char* s = src + r * src_pitch + first[j];
      const uint4 v = tilec_pad_shift(a[j], b[j], (unsigned)(reinterpret_cast<unsigned long long>(s) & 15));
      unsigned char* d = dst + r * dst_pitch + first[j];
      if (first[j] + 16 <= width)
        *reinterpret_cast<uint4*>(d) = v;
      else
        tilec_pad_store_bytes(d, v, width - first[j]);
    }
    if (chunk == 0)  // the heads (a destination row that does not start at a 16-byte boundary: a copy out)
#pragma unroll
      for (int j = 0; j < TILEC_PAD_ROWS; ++j) {
        const long long r = r0 + j * gy;
        unsigned char* d = dst + r * dst_pitch;
        const long long head = (long long)((16 - (reinterpret_cast<unsigned long long>(d) & 15)) & 15);
        if (r < rows && head > 0) tilec_pad_store_bytes(d, tilec_pad_gather(src + r * src_pitch, lo, hi),
                                                        head < width ? head : width);
      }
  }
}

// The copy's block (bx, by) of a grid gy blocks tall: its warps' spans of the rows by, by + gy, ...
__device__ __forceinline__ void tilec_pad_rows_body(const unsigned char* __restrict__ src,
                                                    unsigned char* __restrict__ dst, long long rows, long long width,
                                                    long long src_pitch, long long dst_pitch, int src_unit,
                                                    int dst_unit, long long bx, long long by, long long gy) {
  // the units also divide the width: a strided row (pitch 8200, width 8198) moved in 8-byte units would overwrite
  // the two bytes after it, which belong to the caller
  const int width_unit = (int)((width | 16) & -(width | 16));
  int unit = src_unit < dst_unit ? src_unit : dst_unit;
  unit = unit < width_unit ? unit : width_unit;
  const int lane = threadIdx.x & 31;
  const long long span = (bx * blockDim.x + (threadIdx.x & ~31)) * 16;  // the warp's first byte
  if (span >= width) return;
  if (unit < 4) {
    tilec_pad_rows_shifted(src, dst, rows, width, src_pitch, dst_pitch, span / 16 + lane, by, gy);
    return;
  }
  const long long left = width - span;
  switch (unit) {
    case 16: tilec_pad_spans<uint4>(src + span, dst + span, rows, left, src_pitch, dst_pitch, by, gy, lane); break;
    case 8: tilec_pad_spans<uint2>(src + span, dst + span, rows, left, src_pitch, dst_pitch, by, gy, lane); break;
    default: tilec_pad_spans<unsigned int>(src + span, dst + span, rows, left, src_pitch, dst_pitch, by, gy, lane);
  }
}

extern "C" __global__ void __launch_bounds__(256) tilec_pad_rows(const unsigned char* __restrict__ src,
                                                                 unsigned char* __restrict__ dst, long long rows,
                                                                 long long width, long long src_pitch,
                                                                 long long dst_pitch, int src_unit, int dst_unit) {
  tilec_pad_rows_body(src, dst, rows, width, src_pitch, dst_pitch, src_unit, dst_unit, blockIdx.x, blockIdx.y,
                      gridDim.y);
}

// Several copies in one launch (a padded launch's copies in, or out): every launch costs the GPU a few microseconds
// beside its work, which small padded launches felt. The grid is one line of blocks, each copy's own grid (x over a
// row's spans, y over its rows, as tilec_pad_rows's) laid out in turn from its `first_block`: no block is launched
// that has nothing to copy (a shared two-dimensional grid's empty blocks, for copies of unlike shapes, cost more than
// the launches saved). Passed by value (kernel parameters), so nothing is written to the device before the launch.
#define TILEC_PAD_BATCH 4
struct tilec_pad_copy {
  const unsigned char* src;
  unsigned char* dst;
  long long rows, width, src_pitch, dst_pitch;
  int src_unit, dst_unit;
  int blocks_x, blocks_y;  // this copy's grid
  long long first_block;   // where it starts in the launch's grid
};
struct tilec_pad_copies {
  tilec_pad_copy copy[TILEC_PAD_BATCH];
  int count;
};

extern "C" __global__ void __launch_bounds__(256) tilec_pad_batch(const tilec_pad_copies copies) {
  const long long b = blockIdx.x;
  int z = 0;
  while (z + 1 < copies.count && b >= copies.copy[z + 1].first_block) ++z;
  const tilec_pad_copy& c = copies.copy[z];
  const long long local = b - c.first_block;
  tilec_pad_rows_body(c.src, c.dst, c.rows, c.width, c.src_pitch, c.dst_pitch, c.src_unit, c.dst_unit,
                      local % c.blocks_x, local / c.blocks_x, c.blocks_y);
}
