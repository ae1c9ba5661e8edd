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
// start for every 16 bytes moved, the copy ran at 2.7 TB/s on the H200 where torch's copy runs at 4.25).
#define TILEC_PAD_ROWS 4

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

// The bytes [at, at + 16) of the tensor whose bytes are [lo, hi), `at` 16-byte aligned: one 16-byte load where the
// whole block lies in the tensor, else the block's bytes that do, one by one (the rest read as 0: no caller uses them).
// A tensor's first and last 16-byte blocks may start or end outside it, where another allocation may begin.
__device__ __forceinline__ uint4 tilec_pad_block(const unsigned char* at, const unsigned char* lo,
                                                 const unsigned char* hi) {
  if (at >= lo && at + 16 <= hi) return *reinterpret_cast<const uint4*>(at);
  unsigned w[4] = {0, 0, 0, 0};
  for (int i = 0; i < 16; ++i)
    if (at + i >= lo && at + i < hi) w[i >> 2] |= (unsigned)at[i] << (8 * (i & 3));
  return uint4{w[0], w[1], w[2], w[3]};
}

// Bytes [shift, shift + 4) of the little-endian pair (lo, hi), shift 0 to 3 bytes.
__device__ __forceinline__ unsigned tilec_pad_funnel(unsigned lo, unsigned hi, int shift) {
  return shift ? (lo >> (8 * shift)) | (hi << (32 - 8 * shift)) : lo;
}

// 16 source bytes from `s` (any alignment) as four words: the two aligned 16-byte blocks around them, shifted.
// `Word` (0 to 3) is where the bytes start in the first block, in words: a template argument, so that the words are
// picked by constant indices (a register array indexed at run time would live in local memory).
template <int Word>
__device__ __forceinline__ uint4 tilec_pad_gather(const unsigned char* s, const unsigned char* lo,
                                                  const unsigned char* hi) {
  const unsigned char* at = reinterpret_cast<const unsigned char*>(reinterpret_cast<unsigned long long>(s) & ~15ull);
  const int shift = (int)(reinterpret_cast<unsigned long long>(s) & 3);
  const uint4 a = tilec_pad_block(at, lo, hi);
  const uint4 b = (Word == 0 && shift == 0) ? a : tilec_pad_block(at + 16, lo, hi);
  const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  return uint4{tilec_pad_funnel(w[Word], w[Word + 1], shift), tilec_pad_funnel(w[Word + 1], w[Word + 2], shift),
               tilec_pad_funnel(w[Word + 2], w[Word + 3], shift), tilec_pad_funnel(w[Word + 3], w[Word + 4], shift)};
}

// 16 source bytes from `s` (any alignment), whichever word of its aligned block they start at.
__device__ __forceinline__ uint4 tilec_pad_gather_any(const unsigned char* s, const unsigned char* lo,
                                                      const unsigned char* hi) {
  switch ((reinterpret_cast<unsigned long long>(s) >> 2) & 3) {  // the same for the whole row: no divergence
    case 0: return tilec_pad_gather<0>(s, lo, hi);
    case 1: return tilec_pad_gather<1>(s, lo, hi);
    case 2: return tilec_pad_gather<2>(s, lo, hi);
    default: return tilec_pad_gather<3>(s, lo, hi);
  }
}

// Rows where either side is aligned to less than 4 bytes (rows of an odd number of 2-byte elements, 1-byte rows of
// any length), which byte and 2-byte accesses moved slowly (fp8 calls with such rows ran 6-23% longer on the H200,
// bench/RESULTS.md s14). Here every thread stores one aligned 16-byte block of each destination row, gathered from two
// aligned 16-byte loads of the source; the bytes before the row's first aligned block (`head`, under 16) and after its
// last whole one go one at a time. Chunk c of a row is its bytes [head + 16c, head + 16c + 16). This copies the bytes a
// row's chunk has that are not such a block and returns where the block starts in the row (-1: none).
__device__ __forceinline__ long long tilec_pad_row_edges(const unsigned char* s, unsigned char* d, long long width,
                                                         long long chunk) {
  const long long head = (long long)((16 - (reinterpret_cast<unsigned long long>(d) & 15)) & 15);
  if (chunk == 0)
    for (long long i = 0; i < head && i < width; ++i) d[i] = s[i];
  const long long first = head + chunk * 16;
  if (first >= width) return -1;
  if (first + 16 > width) {  // the row's last, partial block
    for (long long i = first; i < width; ++i) d[i] = s[i];
    return -1;
  }
  return first;
}

// The thread's chunk of the rows by, by + gy, ...: TILEC_PAD_ROWS rows' gathers, then their stores.
__device__ __forceinline__ void tilec_pad_rows_shifted(const unsigned char* src, unsigned char* dst, long long rows,
                                                       long long width, long long src_pitch, long long dst_pitch,
                                                       long long chunk, long long by, long long gy) {
  const unsigned char* lo = src;
  const unsigned char* hi = src + (rows - 1) * src_pitch + width;
  for (long long r0 = by; r0 < rows; r0 += gy * TILEC_PAD_ROWS) {
    long long at[TILEC_PAD_ROWS];
    uint4 v[TILEC_PAD_ROWS];
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j) {
      const long long r = r0 + j * gy;
      at[j] = r < rows ? tilec_pad_row_edges(src + r * src_pitch, dst + r * dst_pitch, width, chunk) : -1;
      if (at[j] >= 0) v[j] = tilec_pad_gather_any(src + r * src_pitch + at[j], lo, hi);
    }
#pragma unroll
    for (int j = 0; j < TILEC_PAD_ROWS; ++j)
      if (at[j] >= 0) *reinterpret_cast<uint4*>(dst + (r0 + j * gy) * dst_pitch + at[j]) = v[j];
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
