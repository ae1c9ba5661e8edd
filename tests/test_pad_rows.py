"""tilec_pad.h's pitched copy (the copies of tilec.runtime's padded TMA launches), its CUDA source compiled by the
host C++ compiler with the CUDA built-ins stood in for, and every thread of its grid run: the padded rows hold the
tensor's bytes, nothing past a row's width or the last row is written, at every alignment of either side. The same
copies on the H200 run in bench/misaligned_h200.py and the shape sweep (and compute-sanitizer's memcheck)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilec.runtime.launch import _copy_grid, _unit

HEADER = Path(__file__).resolve().parent.parent / "tilec" / "targets" / "cuda" / "include" / "tilec_pad.h"

BATCH_HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct dim3 { unsigned x, y, z; };
static dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#include "tilec_pad.h"
// argv: src dst (files; dst rewritten), threads, blocks, then per copy: src offset, dst offset, rows, width, src
// pitch, dst pitch, src unit, dst unit, blocks x, blocks y, first block
int main(int argc, char** argv) {
  auto slurp = [](const char* path) {
    FILE* f = fopen(path, "rb"); std::vector<unsigned char> b; int c;
    while ((c = fgetc(f)) != EOF) b.push_back((unsigned char)c);
    fclose(f); return b;
  };
  std::vector<unsigned char> src = slurp(argv[1]), dst = slurp(argv[2]);
  tilec_pad_copies copies = {};
  copies.count = (argc - 5) / 11;
  for (int j = 0; j < copies.count; ++j) {
    long long v[11];
    for (int i = 0; i < 11; ++i) v[i] = atoll(argv[5 + 11 * j + i]);
    copies.copy[j] = {src.data() + v[0], dst.data() + v[1], v[2], v[3], v[4], v[5], (int)v[6], (int)v[7],
                      (int)v[8], (int)v[9], v[10]};
  }
  blockDim = {(unsigned)atoi(argv[3]), 1, 1};
  gridDim = {(unsigned)atoi(argv[4]), 1, 1};
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < blockDim.x; ++t) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      tilec_pad_batch(copies);
    }
  FILE* f = fopen(argv[2], "wb");
  fwrite(dst.data(), 1, dst.size(), f);
  fclose(f);
  return 0;
}
"""


def _compile(tmp_path_factory, source: str):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    folder = tmp_path_factory.mktemp("pad")
    (folder / "harness.cpp").write_text(source)
    exe = folder / "harness"
    r = subprocess.run([cxx, "-O1", "-std=c++17", "-fno-strict-aliasing", f"-I{HEADER.parent}", "-o", str(exe),
                        str(folder / "harness.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


@pytest.fixture(scope="module")
def batch_harness(tmp_path_factory):
    return _compile(tmp_path_factory, BATCH_HARNESS)


def _launch_shape(width: int, rows: int, rows_per_grid: int) -> tuple[int, int, int]:
    """The grid tilec.runtime launches (launch.py _copy_grid), with grid y capped lower to exercise the row stride."""
    threads, gx, gy = _copy_grid(width, rows)
    return threads, gx, min(gy, rows_per_grid)


# (rows, row bytes, source offset, source pitch, destination offset, destination pitch): into a padded workspace
# (f16 rows of 4099 and 129 elements, fp8 rows of 3003 and 515 bytes, rows past a grid's y), and back out of one
CASES = [(5, 8198, 0, 8198, 0, 8208), (7, 258, 2, 258, 256, 272), (4, 3003, 1, 3003, 0, 3008),
         (9, 515, 3, 515, 0, 528), (6, 40, 4, 40, 0, 48), (3, 24, 8, 24, 0, 32), (70, 34, 0, 34, 0, 48),
         (5, 272, 0, 272, 0, 272),                       # already aligned: 16-byte loads and stores
         (7, 258, 0, 272, 6, 258), (4, 3003, 0, 3008, 1, 3003)]  # out of a workspace into the caller's tensor


def test_pad_rows_copies_every_row_and_nothing_else(checked_harness, tmp_path):
    """Every case above, with the units tilec.runtime works out from the addresses (a 256-byte aligned base) and
    pitches, and grid y capped below the rows so that the blocks stride them: the rows copied, the padding and every
    other byte untouched, every 16-byte access inside the tensors."""
    _run_checked(checked_harness, tmp_path, [(src_off, dst_off, rows, width, src_pitch, dst_pitch)
                                             for rows, width, src_off, src_pitch, dst_off, dst_pitch in CASES])


def test_pad_rows_copies_every_row_in_the_launchs_own_grid(checked_harness, tmp_path):
    """The same cases in the grid tilec.runtime launches (each thread four rows, a quarter of them apart): row counts
    that four does not divide leave some threads fewer rows."""
    _run_checked(checked_harness, tmp_path, [(src_off, dst_off, rows, width, src_pitch, dst_pitch)
                                             for rows, width, src_off, src_pitch, dst_off, dst_pitch in CASES],
                 rows_per_grid=1 << 16)


def test_the_manifest_says_how_many_rows_a_thread_copies():
    """The header's TILEC_PAD_ROWS is what the manifest of a TMA build records and what the runtime sizes grid y by;
    an artifact built before the copy took several rows a thread (no key) gets one row a thread, its own grid."""
    import re

    import tilec
    from tilec.manifest import PAD_ROWS, PAD_ROWS_KEY

    assert re.search(r"#define TILEC_PAD_ROWS (\d+)", HEADER.read_text()).group(1) == str(PAD_ROWS)
    manifest = tilec.compile(str(HEADER.parents[4] / "samples" / "gemm.tile"), target="sm90", emit="cu",
                             tune_db="").manifest
    assert json.loads(manifest)[PAD_ROWS_KEY] == PAD_ROWS
    assert _copy_grid(8198, 4099)[2] == -(-4099 // PAD_ROWS) and _copy_grid(8198, 4099, 1)[2] == 4099


def test_units_are_the_widest_every_row_is_aligned_to():
    assert _unit(0x1000, 8208) == 16 and _unit(0x1000, 8198) == 2 and _unit(0x1001, 3008) == 1
    assert _unit(0x1008, 48) == 8 and _unit(0x1004, 40) == 4 and _unit(0x1000, 3003) == 1


@pytest.mark.parametrize("group", [(0, 1, 2, 3), (4, 8), (6,), (9, 7, 5)])
def test_a_batch_launch_copies_each_of_its_copies_in_its_grid_z(batch_harness, tmp_path, group):
    """tilec_pad_batch (a padded launch's copies in, or out, in one launch): each copy's blocks, laid out in turn on
    one line of blocks as tilec.runtime launches them (launch.py _batch_grid), move its rows alone, every one of
    them, with each copy's grid y capped to stride its rows."""
    from tilec.runtime.launch import _batch_grid

    cases = [CASES[i] for i in group]
    rng = np.random.default_rng(len(group))
    src_at, dst_at, src_size, dst_size = [], [], 0, 0
    for rows, _, src_off, src_pitch, dst_off, dst_pitch in cases:  # each copy's bytes apart, 256-byte aligned
        src_at.append(src_size)
        dst_at.append(dst_size)
        src_size += -(-(src_off + rows * src_pitch + 64) // 256) * 256
        dst_size += -(-(dst_off + rows * dst_pitch + 64) // 256) * 256
    src = rng.integers(0, 256, src_size, dtype=np.uint8)
    dst = rng.integers(0, 256, dst_size, dtype=np.uint8)
    (tmp_path / "src").write_bytes(src.tobytes())
    (tmp_path / "dst").write_bytes(dst.tobytes())
    threads, _, places = _batch_grid([(width, rows) for rows, width, *_ in cases])
    places, first = [(bx, min(by, 3)) for bx, by, _ in places], 0  # (grid y capped: the rows strided)
    argv = []
    for (rows, width, src_off, src_pitch, dst_off, dst_pitch), s0, d0, (bx, by) in zip(cases, src_at, dst_at, places,
                                                                                        strict=True):
        argv += [s0 + src_off, d0 + dst_off, rows, width, src_pitch, dst_pitch,
                 _unit(0x1000 + src_off, src_pitch), _unit(0x1000 + dst_off, dst_pitch), bx, by, first]
        first += bx * by
    subprocess.run([str(batch_harness), str(tmp_path / "src"), str(tmp_path / "dst"), str(threads), str(first),
                    *map(str, argv)], check=True, timeout=60)
    got = np.frombuffer((tmp_path / "dst").read_bytes(), dtype=np.uint8)
    want = dst.copy()
    for (rows, width, src_off, src_pitch, dst_off, dst_pitch), s0, d0 in zip(cases, src_at, dst_at, strict=True):
        for r in range(rows):
            want[d0 + dst_off + r * dst_pitch: d0 + dst_off + r * dst_pitch + width] = \
                src[s0 + src_off + r * src_pitch: s0 + src_off + r * src_pitch + width]
    np.testing.assert_array_equal(got, want)


def test_a_batch_launch_has_no_block_without_work():
    """The flattened grid: a copy of short rows beside one of long rows gets its own blocks, not the long one's grid
    (the first two-dimensional grid gave 127x4099x515 trans_B's three copies 36,891 blocks, most of them empty: 28 us
    on the H200 against 9 us of copies launched apart, bench/RESULTS.md s13)."""
    from tilec.runtime.launch import _batch_grid

    threads, grid, places = _batch_grid([(1030, 127), (1030, 4099), (8198, 127)], 4)
    # (grid y: a block's threads take 4 rows each, so 127 rows are 32 blocks tall and 4099 rows 1025; the 8198-byte
    # rows' 513 chunks share three blocks of 192 threads)
    assert threads == 192 and places == [(1, 32, 0), (1, 1025, 32), (3, 32, 1057)] and grid == (1153, 1, 1)


# Many copies in one process, each into a fresh destination, with every 16-byte access checked: a 16-byte load must lie
# in the source tensor's bytes (another allocation may begin right outside them) and a 16-byte store in one of the
# destination's rows. `uint4`'s copy constructor and assignment see the address of every such access (a load copies
# the block it dereferences; a store assigns to it), and each must be 16-byte aligned (the buffers are, as the GPU's
# are); byte accesses are guarded in the header itself and any stray one shows in the destination's bytes, which the
# test compares whole.
CHECKED_HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
static const unsigned char *buf_lo, *buf_hi, *src_lo, *src_hi;  // the source buffer, and the tensor's bytes in it
static unsigned char *dst_buf_lo, *dst_buf_hi, *dst_first;
static long long dst_rows, dst_width, dst_pitch_;
static void fail(const char* what, const void* at) {
  fprintf(stderr, "%s at %td\n", what, (const unsigned char*)at - buf_lo);
  exit(3);
}
struct uint4 {
  unsigned x, y, z, w;
  uint4() = default;
  uint4(unsigned a, unsigned b, unsigned c, unsigned d) : x(a), y(b), z(c), w(d) {}
  uint4(const uint4& o) : x(o.x), y(o.y), z(o.z), w(o.w) {
    const unsigned char* at = (const unsigned char*)&o;
    if (at >= buf_lo && at < buf_hi && (at < src_lo || at + 16 > src_hi)) fail("16-byte load outside the tensor", at);
    if (at >= buf_lo && at < buf_hi && ((unsigned long long)at & 15)) fail("misaligned 16-byte load", at);
  }
  uint4& operator=(const uint4& o) {
    unsigned char* at = (unsigned char*)this;
    if (at >= dst_buf_lo && at < dst_buf_hi) {
      long long off = at - dst_first, row = off / dst_pitch_;
      if (off < 0 || row >= dst_rows || off - row * dst_pitch_ + 16 > dst_width) fail("16-byte store off a row", at);
      if ((unsigned long long)at & 15) fail("misaligned 16-byte store", at);
    }
    x = o.x; y = o.y; z = o.z; w = o.w;
    return *this;
  }
};
struct uint2 { unsigned x, y; };
struct dim3 { unsigned x, y, z; };
static dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#include "tilec_pad.h"
// argv: source bytes file, cases file (per line: src offset, dst offset, rows, width, src pitch, dst pitch, src unit,
// dst unit, threads, grid x, grid y, dst size, dst fill seed), output file (each case's destination bytes in turn)
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  std::vector<unsigned char> src;
  for (int c; (c = fgetc(f)) != EOF;) src.push_back((unsigned char)c);
  fclose(f);
  FILE* cases = fopen(argv[2], "r");
  FILE* out = fopen(argv[3], "wb");
  long long v[13];
  while (fscanf(cases, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2],
                &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12]) == 13) {
    std::vector<unsigned char> dst(v[11]);
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = (unsigned char)((i * 131 + v[12]) >> 3);
    buf_lo = src.data(); buf_hi = src.data() + src.size();
    src_lo = src.data() + v[0]; src_hi = src_lo + (v[2] - 1) * v[4] + v[3];
    dst_buf_lo = dst.data(); dst_buf_hi = dst.data() + dst.size(); dst_first = dst.data() + v[1];
    dst_rows = v[2]; dst_width = v[3]; dst_pitch_ = v[5];
    blockDim = {(unsigned)v[8], 1, 1};
    gridDim = {(unsigned)v[9], (unsigned)v[10], 1};
    for (unsigned by = 0; by < gridDim.y; ++by)
      for (unsigned bx = 0; bx < gridDim.x; ++bx)
        for (unsigned t = 0; t < blockDim.x; ++t) {
          blockIdx = {bx, by, 0};
          threadIdx = {t, 0, 0};
          tilec_pad_rows(src_lo, dst_first, v[2], v[3], v[4], v[5], (int)v[6], (int)v[7]);
        }
    fwrite(dst.data(), 1, dst.size(), out);
  }
  fclose(out);
  return 0;
}
"""


@pytest.fixture(scope="module")
def checked_harness(tmp_path_factory):
    return _compile(tmp_path_factory, CHECKED_HARNESS)


def _checked_cases(widths, directions=("in", "out")):
    """(src offset, dst offset, rows, width, src pitch, dst pitch): into a 16-byte padded workspace and back out of
    one, the tensor's rows at every offset 0-15 from a 16-byte boundary, packed (pitch = width) or with a gap."""
    cases = []
    for width in widths:
        padded = -(-width // 16) * 16
        for off in range(16):
            for gap in (0, 3):
                pitch = width + gap
                if "in" in directions:
                    cases.append((off, 32, 5, width, pitch, padded))
                if "out" in directions:
                    cases.append((32, off, 5, width, padded, pitch))
    return cases


def _run_checked(harness, tmp_path, cases, threads_cap=None, rows_per_grid=2):
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, 64 + max(so + rows * sp for so, _, rows, _, sp, _ in cases) + 64, dtype=np.uint8)
    lines, wants = [], []
    for i, (src_off, dst_off, rows, width, src_pitch, dst_pitch) in enumerate(cases):
        src_off += 64  # the source buffer's first 64 bytes lie outside every tensor: a load there is caught
        dst_size = dst_off + rows * dst_pitch + 48
        threads, gx, gy = _launch_shape(width, rows, rows_per_grid)
        if threads_cap:
            threads = min(threads, threads_cap)
            gx = -(-width // (16 * threads))
        lines.append(" ".join(map(str, (src_off, dst_off, rows, width, src_pitch, dst_pitch,
                                        _unit(0x1000 + src_off, src_pitch), _unit(0x1000 + dst_off, dst_pitch),
                                        threads, gx, gy, dst_size, i))))
        want = ((np.arange(dst_size, dtype=np.int64) * 131 + i) >> 3).astype(np.uint8)
        for r in range(rows):
            want[dst_off + r * dst_pitch: dst_off + r * dst_pitch + width] = \
                src[src_off + r * src_pitch: src_off + r * src_pitch + width]
        wants.append(want)
    (tmp_path / "src").write_bytes(src.tobytes())
    (tmp_path / "cases").write_text("\n".join(lines) + "\n")
    r = subprocess.run([str(harness), str(tmp_path / "src"), str(tmp_path / "cases"), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = np.frombuffer((tmp_path / "out").read_bytes(), dtype=np.uint8)
    at = 0
    for case, want in zip(cases, wants, strict=True):
        np.testing.assert_array_equal(got[at:at + want.size], want, err_msg=f"case {case}")
        at += want.size


def test_narrow_rows_copy_exactly_at_every_alignment(checked_harness, tmp_path):
    """Rows aligned to 1 or 2 bytes on either side (fp8 rows of any length, odd-length 2-byte rows) take the shifted
    path: aligned 16-byte loads and stores with the bytes moved in registers. At every offset of the source and of
    the destination from a 16-byte boundary, rows shorter than a block, of one block, of a few, and of 515 and 3003
    bytes: every row's bytes arrive, nothing else in the destination changes, and no 16-byte load reaches outside
    the source tensor's bytes."""
    _run_checked(checked_harness, tmp_path, _checked_cases([1, 7, 16, 17, 35, 515, 3003]))


def test_the_shifted_path_with_several_warps_a_row(checked_harness, tmp_path):
    """Long rows over blocks of 32 threads: a row's chunks spread over many warps and blocks (f16 rows of 4099 and
    fp8 rows of 8191)."""
    _run_checked(checked_harness, tmp_path, [(1, 0, 3, 8191, 8191, 8192), (0, 5, 3, 8198, 8208, 8198),
                                             (2, 0, 4, 8198, 8198, 8208)], threads_cap=32)


PLANTED = [("const long long head = (long long)((16 - (reinterpret_cast<unsigned long long>(d) & 15)) & 15);",
            "const long long head = (long long)((16 - (reinterpret_cast<unsigned long long>(d) & 15)) & 7);"),
           ("whole[j] = first[j] >= 0 && at[j] >= lo && at[j] + 32 <= hi;",
            "whole[j] = first[j] >= 0 && at[j] + 32 <= hi;"),
           ("if (first[j] + 16 <= width)", "if (first[j] + 15 <= width)"),
           ("b[j] = tilec_pad_load16(at[j] + 16);", "b[j] = a[j];")]


@pytest.mark.parametrize("planted", range(len(PLANTED)))
def test_the_checked_harness_catches_planted_slips(tmp_path_factory, tmp_path, planted):
    """A head that leaves the stores 8-byte aligned, a load unguarded at the tensor's start, a partial last chunk
    stored whole, the second block's words taken from the first: each fails the alignment test above."""
    old, new = PLANTED[planted]
    text = HEADER.read_text()
    assert old in text
    folder = tmp_path_factory.mktemp("planted")
    (folder / "tilec_pad.h").write_text(text.replace(old, new))
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    (folder / "harness.cpp").write_text(CHECKED_HARNESS)
    exe = folder / "harness"
    subprocess.run([cxx, "-O1", "-std=c++17", "-fno-strict-aliasing", f"-I{folder}", "-o", str(exe),
                    str(folder / "harness.cpp")], check=True, capture_output=True)
    with pytest.raises(AssertionError):
        _run_checked(exe, tmp_path, _checked_cases([1, 7, 17, 35, 515]))
