"""T.sync_threads(id, count) on AMD: the software named barrier of tilec_hip_named_barrier.h, compiled for the host
with one C++ thread per wave (its target macros swapped for std::atomic_thread_fence and yield), run through many
phases in which one thread arrives late: no thread may leave a phase before every thread of its barrier has
written that phase's value, and two barrier ids used by disjoint groups at once must not mix. A planted bug (the
barrier opening one arrival early) must make the same program fail, so the check can fail. (The gfx942 lowering
of the port that uses it runs in the SIMT model: tests/test_examples_tilelang.py.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HEADER_DIR = Path(__file__).resolve().parent.parent / "tilec" / "targets" / "hip" / "include"

DRIVER = r"""
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#define TL_NB_DEVICE inline
#define TL_NB_FENCE_RELEASE() std::atomic_thread_fence(std::memory_order_release)
#define TL_NB_FENCE_ACQUIRE() std::atomic_thread_fence(std::memory_order_acquire)
#define TL_NB_PAUSE() std::this_thread::yield()
#include "tilec_hip_named_barrier.h"

// threads 0..A-1 synchronise on barrier 3 (count A), threads A..A+B-1 on barrier 5 (count B), at the same time
constexpr int A = 6, B = 3, ROUNDS = 300;
static unsigned words[32];
static std::atomic<int> slot[A + B];

static void work(int t) {
  const bool first = t < A;
  const int id = first ? 3 : 5, count = first ? A : B, lo = first ? 0 : A;
  for (int r = 1; r <= ROUNDS; ++r) {
    if (t == lo + count - 1 && r % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    slot[t].store(r, std::memory_order_relaxed);
    tl::named_barrier_lds(words, id, count);
    for (int u = lo; u < lo + count; ++u) {
      int v = slot[u].load(std::memory_order_relaxed);
      if (v != r) {
        std::printf("thread %d left phase %d of barrier %d early: thread %d's value is %d\n", t, r, id, u, v);
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
    tl::named_barrier_lds(words, id, count);  // nobody writes the next phase's value while a thread still reads
  }
}

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < A + B; ++t) threads.emplace_back(work, t);
  for (auto& th : threads) th.join();
  for (int i = 0; i < 32; i += 2)
    if (words[i] != 0) {
      std::printf("barrier %d's arrival count is %u after the last phase\n", i / 2, words[i]);
      return 1;
    }
  std::printf("ok %u %u\n", words[7], words[11]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("named_barrier")
    (d / "driver.cpp").write_text(DRIVER)

    def make(*defines: str) -> Path:
        exe = d / f"driver{len(list(d.iterdir()))}"
        subprocess.run([cxx, "-std=c++17", "-O2", "-pthread", f"-I{HEADER_DIR}", *defines, str(d / "driver.cpp"),
                        "-o", str(exe)], check=True, capture_output=True, text=True)
        return exe

    return make


def test_no_thread_leaves_a_phase_early(build):
    out = subprocess.run([build()], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    # every phase moved each barrier's generation on once: 2 barriers a round
    assert out.stdout.split() == ["ok", "600", "600"]


def test_a_barrier_opening_early_is_caught(build):
    """The planted bug: the barrier completes at count - 1 arrivals (a thread let through before the late one)."""
    exe = build("-DTL_NB_COMPLETES(arrived,count)=((arrived)+1u==(count))")
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return  # a deadlock also shows the broken barrier
    assert out.returncode != 0 and "early" in out.stdout, out.stdout
