// tilec_cluster.h -- thread-block clusters on sm90: TMA multicast, arrivals on a peer block's mbarriers, the
// cluster barrier (docs/hopper.md, "Thread-block clusters").
//
// Appended to the generated source after tilec_cuda.h only when a kernel is launched in clusters
// (schedule.cluster), so that every other build's source stays as it was. Inline PTX only.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TL_CLUSTER_DEVICE __device__ __forceinline__

namespace tl {

// The same box into the same shared offset of every block of the cluster whose rank is set in `mask`; each
// block's mbarrier at `bar`'s offset counts the bytes that land in that block's shared memory.
#define TL_TMA_MULTICAST(N, COORDS, ...)                                                              \
  asm volatile("cp.async.bulk.tensor." #N "d.shared::cluster.global.mbarrier::complete_tx::bytes"     \
               ".multicast::cluster [%0], [%1, {" COORDS "}], [%2], %3;" ::"r"(smem_addr(dst)),         \
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_addr(bar)), "h"(mask),         \
               __VA_ARGS__ : "memory")
TL_CLUSTER_DEVICE void tma_load_multicast_1d(const void* map, void* dst, long long* bar, unsigned short mask,
                                             int c0) {
  TL_TMA_MULTICAST(1, "%4", "r"(c0));
}
TL_CLUSTER_DEVICE void tma_load_multicast_2d(const void* map, void* dst, long long* bar, unsigned short mask,
                                             int c0, int c1) {
  TL_TMA_MULTICAST(2, "%4, %5", "r"(c0), "r"(c1));
}
TL_CLUSTER_DEVICE void tma_load_multicast_3d(const void* map, void* dst, long long* bar, unsigned short mask,
                                             int c0, int c1, int c2) {
  TL_TMA_MULTICAST(3, "%4, %5, %6", "r"(c0), "r"(c1), "r"(c2));
}
TL_CLUSTER_DEVICE void tma_load_multicast_4d(const void* map, void* dst, long long* bar, unsigned short mask,
                                             int c0, int c1, int c2, int c3) {
  TL_TMA_MULTICAST(4, "%4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
TL_CLUSTER_DEVICE void tma_load_multicast_5d(const void* map, void* dst, long long* bar, unsigned short mask,
                                             int c0, int c1, int c2, int c3, int c4) {
  TL_TMA_MULTICAST(5, "%4, %5, %6, %7, %8", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}
#undef TL_TMA_MULTICAST

// One arrival of the whole warp on the mbarrier at `bar`'s offset in every block of the cluster whose rank is
// set in `mask` (its own included); mapa gives that block's shared::cluster address. The arrive keeps the
// default release.cta semantics, as CUTLASS's sm90 pipelines release a stage: its readers are wgmma, retired
// by the wgmma.wait_group before it (.release.cluster would put a MEMBAR.ALL.GPU before every arrival).
TL_CLUSTER_DEVICE void mbar_arrive_cluster_warp(long long* bar, unsigned mask) {
  __syncwarp();
  if (lane_id() == 0) {
    for (unsigned rank = 0; mask != 0; ++rank, mask >>= 1) {
      if (mask & 1u) {
        asm volatile(
            "{\n\t.reg .b32 remote;\n\t"
            "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
            "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(smem_addr(bar)),
            "r"(rank)
            : "memory");
      }
    }
  }
}

// Every thread of every block of the cluster: what each block did before (its barriers' initialisation, its
// last arrivals on the others' barriers) is visible to all of them after.
TL_CLUSTER_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

}  // namespace tl

#undef TL_CLUSTER_DEVICE
#endif  // __CUDA_ARCH__ >= 900
