// tilec_hip_named_barrier.h -- T.sync_threads(id, count) on AMD GPUs, which have no named barriers
// (s_barrier waits for every wave of the work-group). Inlined after tilec_hip.h only where a kernel uses one.
//
// A software barrier in LDS: per barrier id two words, words[2*id] counting the threads that have arrived in
// the current phase and words[2*id+1] the phase's generation. A thread reads the generation, then adds itself
// to the count; the thread that completes the count zeroes it and moves the generation on; every thread
// (the completing one included) waits until the generation differs from the one it read. The generation is
// read before the arrival, so the phase cannot complete between the two; the completing thread zeroes the
// count before the new generation is published, so an early arrival at the next phase counts from zero.
// Fences of work-group scope around it order the threads' LDS and global accesses as __syncthreads() would.
// Counting threads, not waves, keeps it correct for any count of threads in whole or partial waves; the wait
// is a loop with no else branch before it, so a wave whose lanes complete and wait in the same pass cannot
// park the completing lane behind the spinning ones. The kernel zeroes the words at entry (then s_barrier).
//
// The macros below are the only target-specific parts: tests/test_hip_named_barrier.py compiles this file
// for the host with C++ threads standing in for waves, and (-m gpu) for an NVIDIA GPU with CUDA's atomics,
// fences and __nanosleep, whose warps are scheduled independently, and checks that no thread leaves a phase
// early.

#pragma once

#ifndef TL_NB_DEVICE
#define TL_NB_DEVICE TL_DEVICE
#endif
#ifndef TL_NB_FENCE_RELEASE
#define TL_NB_FENCE_RELEASE() __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup")
#endif
#ifndef TL_NB_FENCE_ACQUIRE
#define TL_NB_FENCE_ACQUIRE() __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup")
#endif
#ifndef TL_NB_PAUSE
#define TL_NB_PAUSE() __builtin_amdgcn_s_sleep(1)
#endif
#ifndef TL_NB_LOAD  // relaxed atomic accesses of the words
#define TL_NB_LOAD(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define TL_NB_STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)
#define TL_NB_ADD(p, v) __atomic_fetch_add(p, v, __ATOMIC_RELAXED)
#endif
#ifndef TL_NB_COMPLETES
#define TL_NB_COMPLETES(arrived, count) ((arrived) == (count))
#endif

namespace tl {

TL_NB_DEVICE void named_barrier_lds(unsigned* words, int id, int count) {
  unsigned* arrived = words + 2 * id;
  unsigned* generation = words + 2 * id + 1;
  unsigned gen = TL_NB_LOAD(generation);
  TL_NB_FENCE_RELEASE();  // this thread's earlier accesses (and the read of gen) before its arrival
  unsigned now = TL_NB_ADD(arrived, 1u) + 1u;
  if (TL_NB_COMPLETES(now, static_cast<unsigned>(count))) {
    TL_NB_FENCE_ACQUIRE();  // every arrival's accesses, carried on to the waiting threads by the release below
    TL_NB_STORE(arrived, 0u);
    TL_NB_FENCE_RELEASE();
    TL_NB_ADD(generation, 1u);
  }
  while (TL_NB_LOAD(generation) == gen) TL_NB_PAUSE();
  TL_NB_FENCE_ACQUIRE();
}

}  // namespace tl
