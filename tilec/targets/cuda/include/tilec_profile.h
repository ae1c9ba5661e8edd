// tilec_profile.h -- the device half of tilec's intra-kernel timeline profiler (tilec/ir/profile.py).
//
// Appended to the generated source only in a profiled build (`tilec profile`, CompileOptions.profile).
// The runtime (tilec/runtime/profile.py) fills `tilec_profile` before a launch; while its buffer is null
// the marks record nothing. Each warp of each recorded block owns a slot of (4 + capacity) 64-bit words:
//   [0] %globaltimer at kernel entry (ns)  [1] clock64 at kernel entry  [2] %smid  [3] %globaltimer at exit
// then one word per mark: tag << 48 | (clock64 & (2^48 - 1)), tag = 2 * phase + 1 (begin) or + 2 (end).
// Lane 0 of each warp records; a full slot drops further marks.

struct TilecProfileConfig {
  unsigned long long* buffer;  // null: profiling off
  unsigned capacity;           // marks per warp slot
  unsigned blocks;             // blocks recorded (linear block index below this)
};
__device__ TilecProfileConfig tilec_profile;

namespace tl {

struct Prof {
  unsigned long long* slot;  // this warp's slot, or null when this block records nothing
  unsigned n;                // marks so far (lane 0's count is the one that matters)
  unsigned cap;
};

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ Prof prof_init() {
  Prof p{nullptr, 0u, tilec_profile.capacity};
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (tilec_profile.buffer != nullptr && block < tilec_profile.blocks) {
    const unsigned warps = (blockDim.x + 31) / 32;
    unsigned long long* slot =
        tilec_profile.buffer + (static_cast<unsigned long long>(block) * warps + threadIdx.x / 32) * (4ull + p.cap);
    if ((threadIdx.x & 31) == 0) {
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      slot[0] = globaltimer();
      slot[1] = clock64();
      slot[2] = sm;
    }
    p.slot = slot;
  }
  return p;
}

// A branch on the slot and the lane, not a predicated store: measured on the H200 (bench/devprint_gpu.py), the
// branch costs nothing measurable while recording is off (gemm +1.9%) where a predicated clock read and store
// cost +19%; while recording both cost about the same.
__device__ __forceinline__ void prof_mark(Prof& p, unsigned tag) {
  if (p.slot != nullptr && (threadIdx.x & 31) == 0) {
    if (p.n < p.cap) p.slot[4 + p.n] = (static_cast<unsigned long long>(tag) << 48) | (clock64() & 0xffffffffffffull);
    if (tag == 2) p.slot[3] = globaltimer();  // the end of phase 0, the kernel
  }
  ++p.n;
}

}  // namespace tl
