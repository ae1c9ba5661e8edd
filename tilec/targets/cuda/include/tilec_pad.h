// tilec_pad.h -- the pitched copy tilec.runtime runs around a TMA kernel whose tensors' rows are not a multiple of
// 16 bytes (docs/deploy.md, "The fallback rule"): such a tensor is copied into a workspace whose rows are padded to
// 16 bytes before the launch (an output also back out after it), and the kernel's tensor maps describe the
// workspace. The CUDA driver's own pitched copy (cuMemcpy2DAsync) ran at 0.13 TB/s on 2-byte aligned rows on the
// H200 (bench/RESULTS.md), so the artifact carries this one.
//
// Appended to the generated source after tilec_cuda.h only when a kernel reads or writes a tensor through TMA.
// One thread moves one 16-byte chunk of a row: loads as wide as the source's alignment allows (`src_unit` bytes:
// 16, 8, 4, 2 or 1, which divides the source's address and pitch), stores as wide as the destination's; a row's
// last, shorter chunk byte by byte. Grid: x over the chunks of a row, y over rows (in strides of gridDim.y).

extern "C" __global__ void __launch_bounds__(256) tilec_pad_rows(const unsigned char* __restrict__ src,
                                                                 unsigned char* __restrict__ dst, long long rows,
                                                                 long long width, long long src_pitch,
                                                                 long long dst_pitch, int src_unit, int dst_unit) {
  const long long col = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 16;
  if (col >= width) return;
  const int n = width - col < 16 ? (int)(width - col) : 16;
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    const unsigned char* s = src + r * src_pitch + col;
    unsigned char* d = dst + r * dst_pitch + col;
    if (n < 16) {
      for (int i = 0; i < n; ++i) d[i] = s[i];
      continue;
    }
    union {
      uint4 v;
      uint2 q[2];
      unsigned int w[4];
      unsigned short h[8];
      unsigned char b[16];
    } chunk;
    switch (src_unit) {
      case 16: chunk.v = *reinterpret_cast<const uint4*>(s); break;
      case 8:
#pragma unroll
        for (int i = 0; i < 2; ++i) chunk.q[i] = reinterpret_cast<const uint2*>(s)[i];
        break;
      case 4:
#pragma unroll
        for (int i = 0; i < 4; ++i) chunk.w[i] = reinterpret_cast<const unsigned int*>(s)[i];
        break;
      case 2:
#pragma unroll
        for (int i = 0; i < 8; ++i) chunk.h[i] = reinterpret_cast<const unsigned short*>(s)[i];
        break;
      default:
#pragma unroll
        for (int i = 0; i < 16; ++i) chunk.b[i] = s[i];
    }
    switch (dst_unit) {
      case 16: *reinterpret_cast<uint4*>(d) = chunk.v; break;
      case 8:
#pragma unroll
        for (int i = 0; i < 2; ++i) reinterpret_cast<uint2*>(d)[i] = chunk.q[i];
        break;
      case 4:
#pragma unroll
        for (int i = 0; i < 4; ++i) reinterpret_cast<unsigned int*>(d)[i] = chunk.w[i];
        break;
      case 2:
#pragma unroll
        for (int i = 0; i < 8; ++i) reinterpret_cast<unsigned short*>(d)[i] = chunk.h[i];
        break;
      default:
#pragma unroll
        for (int i = 0; i < 16; ++i) d[i] = chunk.b[i];
    }
  }
}
