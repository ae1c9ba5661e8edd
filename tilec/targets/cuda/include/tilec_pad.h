// tilec_pad.h -- the pitched copy tilec.runtime runs around a TMA kernel whose tensors' rows are not a multiple of
// 16 bytes (docs/deploy.md, "The fallback rule"): such a tensor is copied into a workspace whose rows are padded to
// 16 bytes before the launch (an output also back out after it), and the kernel's tensor maps describe the
// workspace. The CUDA driver's own pitched copy (cuMemcpy2DAsync) ran at 0.13 TB/s on 2-byte aligned rows on the
// H200 (bench/RESULTS.md), so the artifact carries this one.
//
// Appended to the generated source after tilec_cuda.h only when a kernel reads or writes a tensor through TMA.
// A warp moves a 512-byte span of a row in units as wide as both sides' alignment allows (`src_unit`, `dst_unit`:
// 16, 8, 4, 2 or 1 bytes, each dividing its side's address and pitch, and so the row's width): in step i, lane l
// moves unit i * 32 + l, so that every load and store instruction of the warp covers contiguous bytes. Grid: x over
// a row's spans (blocks of 32 to 256 threads, 16 bytes a thread), y over the rows (in strides of gridDim.y).

template <typename Unit>
__device__ __forceinline__ void tilec_pad_span(const unsigned char* s, unsigned char* d, long long left, int lane) {
  constexpr int kSteps = 16 / sizeof(Unit);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int u = i * 32 + lane;
    if ((long long)u * sizeof(Unit) < left) reinterpret_cast<Unit*>(d)[u] = reinterpret_cast<const Unit*>(s)[u];
  }
}

// The copy's block (bx, by) of a grid gy blocks tall: its warps' spans of the rows by, by + gy, ...
__device__ __forceinline__ void tilec_pad_rows_body(const unsigned char* __restrict__ src,
                                                    unsigned char* __restrict__ dst, long long rows, long long width,
                                                    long long src_pitch, long long dst_pitch, int src_unit,
                                                    int dst_unit, long long bx, long long by, long long gy) {
  const int unit = src_unit < dst_unit ? src_unit : dst_unit;
  const int lane = threadIdx.x & 31;
  const long long span = (bx * blockDim.x + (threadIdx.x & ~31)) * 16;  // the warp's first byte
  if (span >= width) return;
  for (long long r = by; r < rows; r += gy) {
    const unsigned char* s = src + r * src_pitch + span;
    unsigned char* d = dst + r * dst_pitch + span;
    switch (unit) {
      case 16: tilec_pad_span<uint4>(s, d, width - span, lane); break;
      case 8: tilec_pad_span<uint2>(s, d, width - span, lane); break;
      case 4: tilec_pad_span<unsigned int>(s, d, width - span, lane); break;
      case 2: tilec_pad_span<unsigned short>(s, d, width - span, lane); break;
      default: tilec_pad_span<unsigned char>(s, d, width - span, lane);
    }
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
