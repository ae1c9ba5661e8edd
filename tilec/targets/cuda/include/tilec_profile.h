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
    if ((threadIdx.x & 31) == 0) {  // lane 0 records; the other lanes keep a null slot
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      slot[0] = globaltimer();
      slot[1] = clock64();
      slot[2] = sm;
      p.slot = slot + 4;
    }
  }
  return p;
}

// One predicated store, no branch: a mark adds no divergence (lane 0 alone records) and does not split the
// code around it into basic blocks, which would keep the compiler from scheduling across it.
__device__ __forceinline__ void prof_mark(Prof& p, unsigned tag) {
  const unsigned on = p.slot != nullptr && p.n < p.cap;
  asm volatile(
      "{\n\t.reg .pred q;\n\t.reg .u64 c;\n\t"
      "setp.ne.u32 q, %2, 0;\n\t"
      "mov.u64 c, %%clock64;\n\t"
      "and.b64 c, c, 0xffffffffffff;\n\t"
      "or.b64 c, c, %1;\n\t"
      "@q st.global.u64 [%0], c;\n\t}"
      :: "l"(reinterpret_cast<unsigned long long>(p.slot) + 8ull * p.n), "l"(static_cast<unsigned long long>(tag) << 48),
         "r"(on));
  if (tag == 2 && p.slot != nullptr) p.slot[-1] = globaltimer();  // the kernel's end (tag 2: a constant)
  ++p.n;
}

}  // namespace tl
