// tilec's C++ model of the CCE intrinsics below CANN's AscendC API (dav-c220 vector core), so that CANN's own API
// code (asc-devkit, compiled in its CPU-debug mode by scripts/ascend_real_api.py --numerics) runs tilec's vector
// kernels on the host with real numbers. Compiled together with the real headers, whose declarations these
// definitions must match; written for tilec from the intrinsics' observable behaviour, not from CANN's library.
//
// What it models: the vector mask and its two modes (normal: a bit per element of each 256-byte repeat; counter:
// the low 64 bits count elements across as many repeats as needed), block and repeat strides in 32-byte units,
// DataCopyPad's aligned copies (GM gaps in bytes, UB gaps in 32-byte blocks, right padding with the pad value),
// and a pipe-hazard checker: each pipe (S, V, MTE2, MTE3, ...) numbers its operations and keeps a vector clock
// advanced only by set_flag/wait_flag and pipe_barrier; each 32-byte granule of UB remembers its last writer and
// readers; an access not ordered after a conflicting one aborts with both named (as tilec's API model does).
// What it does not: scalar-pipe accesses (the CPU-debug LocalTensor reads memory directly), GM hazards, cube
// intrinsics, cross-core flags; an intrinsic tilec's kernels do not reach stays a stub that aborts when called.

#include "kernel_operator.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int NPIPES = 8;  // pipe_t values up to PIPE_ALL
struct Access { int pipe = -1; uint32_t n = 0; const char* op = nullptr; };
struct Granule { Access write; Access reads[NPIPES]; };

struct State {
    bool counter = false;
    uint64_t mask[2] = {~0ull, ~0ull};
    uint64_t pad = 0;
    uint32_t count[NPIPES] = {};
    uint32_t clock[NPIPES][NPIPES] = {};  // clock[p][q]: how far pipe p knows pipe q has completed
    uint32_t flag[NPIPES][NPIPES][8][NPIPES] = {};
    bool flag_set[NPIPES][NPIPES][8] = {};
    std::vector<Granule> ub;
};
State& st() { static State s; return s; }

const char* pipe_name(int p) {
    static const char* n[] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "ALL", "FIX"};
    return p >= 0 && p < NPIPES ? n[p] : "?";
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "tilec-cce: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

uint8_t* ub_base() { return reinterpret_cast<uint8_t*>(AscendC::ConstDefiner::Instance().cpuUB); }
constexpr size_t UB_BYTES = 192 * 1024;

struct Op { int pipe; uint32_t n; const char* name; };
Op issue(int pipe, const char* name) { return Op{pipe, ++st().count[pipe], name}; }

bool ordered(const Op& op, const Access& a) {
    if (a.pipe < 0 || (a.pipe == op.pipe && a.n == op.n)) return true;  // itself
    if (a.pipe == op.pipe) return op.pipe != PIPE_V || st().clock[op.pipe][a.pipe] >= a.n;  // V overlaps itself
    return st().clock[op.pipe][a.pipe] >= a.n;
}

void touch(const void* p, size_t bytes, const Op& op, bool write) {
    auto* b = static_cast<const uint8_t*>(p);
    uint8_t* base = ub_base();
    if (bytes == 0 || b < base || b >= base + UB_BYTES) return;  // GM: not tracked
    State& s = st();
    if (s.ub.empty()) s.ub.resize(UB_BYTES / 32);
    size_t first = size_t(b - base) / 32, last = (size_t(b - base) + bytes - 1) / 32;
    char msg[512];
    for (size_t g = first; g <= last && g < s.ub.size(); ++g) {
        Granule& gr = s.ub[g];
        if (!ordered(op, gr.write)) {
            std::snprintf(msg, sizeof msg, "pipe hazard: pipe %s '%s' %s UB granule %zu, last written by pipe %s '%s' "
                          "(#%u) with no synchronisation between them", pipe_name(op.pipe), op.name,
                          write ? "writes" : "reads", g, pipe_name(gr.write.pipe), gr.write.op, gr.write.n);
            fail(msg);
        }
        if (write) {
            for (const Access& r : gr.reads)
                if (r.pipe >= 0 && r.pipe != op.pipe && !ordered(op, r)) {
                    std::snprintf(msg, sizeof msg, "pipe hazard: pipe %s '%s' overwrites UB granule %zu still being "
                                  "read by pipe %s '%s' (#%u)", pipe_name(op.pipe), op.name, g, pipe_name(r.pipe),
                                  r.op, r.n);
                    fail(msg);
                }
            gr.write = Access{op.pipe, op.n, op.name};
            for (Access& r : gr.reads) r = Access{};
        } else {
            gr.reads[op.pipe] = Access{op.pipe, op.n, op.name};
        }
    }
}

// The elements one vector instruction visits, as (repeat, index in the repeat): a repeat holds 256 bytes of its
// widest operand. In counter mode the mask's low word counts elements across repeats; in normal mode each
// repeat takes the elements whose mask bit is set.
template <typename F> void for_each_element(uint8_t repeat, int per_repeat, F&& f) {
    State& s = st();
    if (s.counter) {
        for (uint64_t i = 0; i < s.mask[0]; ++i) f(int(i / per_repeat), int(i % per_repeat));
        return;
    }
    for (int r = 0; r < repeat; ++r)
        for (int j = 0; j < per_repeat; ++j)
            if ((j < 64 ? s.mask[0] >> j : s.mask[1] >> (j - 64)) & 1) f(r, j);
}

// Element j of repeat r of an operand: blocks of 32 bytes `block_stride` blocks apart, repeats `repeat_stride`.
template <typename T> T* element(T* base, int r, int j, unsigned block_stride, unsigned repeat_stride) {
    const int per_block = 32 / int(sizeof(T));
    return reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(base) +
                                (size_t(r) * repeat_stride + size_t(j / per_block) * block_stride) * 32) + j % per_block;
}

template <typename D, typename S, typename F>
void unary(const char* name, D* dst, S* src, uint8_t repeat, uint16_t db, uint16_t sb, uint16_t dr, uint16_t sr, F f) {
    Op op = issue(PIPE_V, name);
    int per_repeat = 256 / int(sizeof(D) > sizeof(S) ? sizeof(D) : sizeof(S));
    struct Pair { D* d; S* s; };
    std::vector<Pair> at;
    for_each_element(repeat, per_repeat, [&](int r, int j) {
        at.push_back({element(dst, r, j, db, dr), element(src, r, j, sb, sr)});
    });
    for (auto& p : at) touch(p.s, sizeof(S), op, false);
    for (auto& p : at) touch(p.d, sizeof(D), op, true);
    std::vector<D> out;
    for (auto& p : at) out.push_back(f(*p.s));
    for (size_t i = 0; i < at.size(); ++i) *at[i].d = out[i];
}

template <typename T, typename F>
void binary(const char* name, T* dst, T* a, T* b, uint8_t repeat, uint8_t db, uint8_t ab, uint8_t bb, uint8_t dr,
            uint8_t ar, uint8_t br, F f) {
    Op op = issue(PIPE_V, name);
    struct Triple { T* d; T* a; T* b; };
    std::vector<Triple> at;
    for_each_element(repeat, 256 / int(sizeof(T)), [&](int r, int j) {
        at.push_back({element(dst, r, j, db, dr), element(a, r, j, ab, ar), element(b, r, j, bb, br)});
    });
    for (auto& p : at) { touch(p.a, sizeof(T), op, false); touch(p.b, sizeof(T), op, false); }
    for (auto& p : at) touch(p.d, sizeof(T), op, true);
    std::vector<T> out;
    for (auto& p : at) out.push_back(f(*p.a, *p.b));
    for (size_t i = 0; i < at.size(); ++i) *at[i].d = out[i];
}

// DataCopyPad's aligned copies: nBurst rows of lenBurst bytes; GM rows lenBurst + srcGap bytes apart (to UB) or
// dstGap (to GM); a UB row takes whole 32-byte blocks (left pad + data + right pad), then the UB gap in blocks.
template <int SIZE> void copy_in(void* dst, void* src, uint16_t n, uint32_t len, uint8_t left, uint8_t right,
                                 uint32_t src_gap, uint32_t dst_gap) {
    Op op = issue(PIPE_MTE2, "copy_gm_to_ubuf_align");
    auto* d = static_cast<uint8_t*>(dst);
    auto* s = static_cast<uint8_t*>(src);
    uint32_t row = (uint32_t(left) * SIZE + len + uint32_t(right) * SIZE + 31) / 32 * 32;
    for (uint16_t i = 0; i < n; ++i) {
        uint8_t* to = d + size_t(i) * (row + dst_gap * 32);
        touch(to, row, op, true);
        for (int k = 0; k < left + right; ++k) {
            uint8_t* p = k < left ? to + k * SIZE : to + left * SIZE + len + (k - left) * SIZE;
            std::memcpy(p, &st().pad, SIZE);
        }
        std::memcpy(to + left * SIZE, s + size_t(i) * (len + src_gap), len);
    }
}
void copy_out(void* dst, void* src, uint16_t n, uint32_t len, uint32_t src_gap, uint32_t dst_gap) {
    Op op = issue(PIPE_MTE3, "copy_ubuf_to_gm_align");
    auto* d = static_cast<uint8_t*>(dst);
    auto* s = static_cast<uint8_t*>(src);
    uint32_t row = (len + 31) / 32 * 32;
    for (uint16_t i = 0; i < n; ++i) {
        uint8_t* from = s + size_t(i) * (row + src_gap * 32);
        touch(from, len, op, false);
        std::memcpy(d + size_t(i) * (len + dst_gap), from, len);
    }
}

float h2f(half h) { _Float16 f; std::memcpy(&f, &h.val, 2); return float(f); }
half f2h(float v) { _Float16 f = _Float16(v); half h; std::memcpy(&h.val, &f, 2); return h; }

}  // namespace

// ----------------------------------------------------------------------------- half (asc-tools' host type)

uint16_t half::FloatToFp16(const float& v) const { _Float16 f = _Float16(v); uint16_t u; std::memcpy(&u, &f, 2); return u; }
uint16_t half::Int32ToFp16(const int32_t& v) const { return FloatToFp16(float(v)); }
uint16_t half::UInt32ToFp16(const uint32_t& v) const { return FloatToFp16(float(v)); }
half::operator float() const { return h2f(*this); }
float half::ToFloat() const { return h2f(*this); }
half& half::operator=(const half& o) { val = o.val; return *this; }
half& half::operator=(const float& v) { val = FloatToFp16(v); return *this; }
half half::operator+(const half o) const { return f2h(h2f(*this) + h2f(o)); }
half half::operator-(const half o) const { return f2h(h2f(*this) - h2f(o)); }
half half::operator*(const half o) const { return f2h(h2f(*this) * h2f(o)); }
half half::operator/(const half o) const { return f2h(h2f(*this) / h2f(o)); }
bool half::operator==(const half& o) const { return h2f(*this) == h2f(o); }
bool half::operator!=(const half& o) const { return h2f(*this) != h2f(o); }
bool half::operator<(const half& o) const { return h2f(*this) < h2f(o); }
bool half::operator>(const half& o) const { return h2f(*this) > h2f(o); }

namespace AscendC {

// ----------------------------------------------------------------------------- modes, flags, barriers

void set_mask_count() { st().counter = true; }
void set_mask_norm() { st().counter = false; }
void set_vector_mask(uint64_t hi, uint64_t lo) { st().mask[1] = hi; st().mask[0] = lo; }
void set_mov_pad_val(uint64_t v) { st().pad = v; }

void set_flag(pipe_t src, pipe_t dst, event_t id) {
    State& s = st();
    if (id < 0 || id > 7) fail("set_flag: event id outside 0..7");
    if (s.flag_set[src][dst][id]) fail("set_flag twice on one event without a wait_flag");
    s.flag_set[src][dst][id] = true;
    for (int q = 0; q < NPIPES; ++q) s.flag[src][dst][id][q] = s.clock[src][q];
    s.flag[src][dst][id][src] = s.count[src];
}
void wait_flag(pipe_t src, pipe_t dst, event_t id) {
    State& s = st();
    if (id < 0 || id > 7) fail("wait_flag: event id outside 0..7");
    if (!s.flag_set[src][dst][id]) fail("wait_flag with no set_flag before it: the pipe would hang");
    s.flag_set[src][dst][id] = false;
    for (int q = 0; q < NPIPES; ++q)
        if (s.flag[src][dst][id][q] > s.clock[dst][q]) s.clock[dst][q] = s.flag[src][dst][id][q];
}
void pipe_barrier(pipe_t p) {
    State& s = st();
    if (p == PIPE_ALL) {
        for (int a = 0; a < NPIPES; ++a)
            for (int q = 0; q < NPIPES; ++q) s.clock[a][q] = s.count[q];
    } else {
        s.clock[p][p] = s.count[p];
    }
}

// ----------------------------------------------------------------------------- data movement

void copy_gm_to_ubuf_align_b16(void* dst, void* src, uint8_t, uint16_t n, uint32_t len, uint8_t left, uint8_t right,
                               uint32_t src_gap, uint32_t dst_gap) {
    copy_in<2>(dst, src, n, len, left, right, src_gap, dst_gap);
}
void copy_gm_to_ubuf_align_b32(void* dst, void* src, uint8_t, uint16_t n, uint32_t len, uint8_t left, uint8_t right,
                               uint32_t src_gap, uint32_t dst_gap) {
    copy_in<4>(dst, src, n, len, left, right, src_gap, dst_gap);
}
void copy_ubuf_to_gm_align_b16(void* dst, void* src, uint8_t, uint16_t n, uint32_t len, uint8_t, uint8_t,
                               uint32_t src_gap, uint32_t dst_gap) {
    copy_out(dst, src, n, len, src_gap, dst_gap);
}
void copy_ubuf_to_gm_align_b32(void* dst, void* src, uint8_t, uint16_t n, uint32_t len, uint8_t, uint8_t,
                               uint32_t src_gap, uint32_t dst_gap) {
    copy_out(dst, src, n, len, src_gap, dst_gap);
}

// ----------------------------------------------------------------------------- vector compute

void vector_dup(half* dst, half v, uint8_t repeat, uint16_t db, uint16_t, uint8_t dr, uint8_t) {
    unary("vector_dup", dst, dst, repeat, db, db, dr, dr, [&](half) { return v; });
}
void vector_dup(float* dst, float v, uint8_t repeat, uint16_t db, uint16_t, uint8_t dr, uint8_t) {
    unary("vector_dup", dst, dst, repeat, db, db, dr, dr, [&](float) { return v; });
}
void vconv_f162f32(float* dst, half* src, uint8_t repeat, uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr) {
    unary("vconv_f162f32", dst, src, repeat, db, sb, dr, sr, [](half h) { return h2f(h); });
}
void vconv_f322f16r(half* dst, float* src, uint8_t repeat, uint16_t db, uint16_t sb, uint16_t dr, uint16_t sr) {
    unary("vconv_f322f16r", dst, src, repeat, db, sb, dr, sr, [](float v) { return f2h(v); });  // nearest even
}
#define TILEC_CCE_BINARY(NAME, EXPR)                                                                              \
    void NAME(float* dst, float* a, float* b, uint8_t repeat, uint8_t db, uint8_t ab, uint8_t bb, uint8_t dr,     \
              uint8_t ar, uint8_t br) {                                                                           \
        binary(#NAME, dst, a, b, repeat, db, ab, bb, dr, ar, br, [](float x, float y) { return EXPR; });          \
    }
TILEC_CCE_BINARY(vadd, x + y)
TILEC_CCE_BINARY(vsub, x - y)
TILEC_CCE_BINARY(vmul, x * y)
TILEC_CCE_BINARY(vdiv, x / y)
TILEC_CCE_BINARY(vmax, std::isnan(x) || std::isnan(y) ? NAN : (x > y ? x : y))
TILEC_CCE_BINARY(vmin, std::isnan(x) || std::isnan(y) ? NAN : (x < y ? x : y))
#undef TILEC_CCE_BINARY

#define TILEC_CCE_SCALAR(NAME, EXPR)                                                                              \
    void NAME(float* dst, float* src, float y, uint8_t repeat, uint16_t db, uint16_t sb, uint16_t dr, uint16_t sr) { \
        unary(#NAME, dst, src, repeat, db, sb, dr, sr, [&](float x) { return EXPR; });                            \
    }
TILEC_CCE_SCALAR(vadds, x + y)
TILEC_CCE_SCALAR(vmuls, x * y)
TILEC_CCE_SCALAR(vmaxs, std::isnan(x) ? NAN : (x > y ? x : y))
TILEC_CCE_SCALAR(vmins, std::isnan(x) ? NAN : (x < y ? x : y))
#undef TILEC_CCE_SCALAR
// Maxs/Mins reach the form with 8-bit repeat strides and the two stride-mode flags (tilec leaves both off).
void vmaxs(float* dst, float* src, float y, uint8_t repeat, uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr, bool,
           bool) {
    unary("vmaxs", dst, src, repeat, db, sb, dr, sr, [&](float x) { return std::isnan(x) ? NAN : (x > y ? x : y); });
}
void vmins(float* dst, float* src, float y, uint8_t repeat, uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr, bool,
           bool) {
    unary("vmins", dst, src, repeat, db, sb, dr, sr, [&](float x) { return std::isnan(x) ? NAN : (x < y ? x : y); });
}

#define TILEC_CCE_UNARY(NAME, EXPR)                                                                               \
    void NAME(float* dst, float* src, uint8_t repeat, uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr) {          \
        unary(#NAME, dst, src, repeat, db, sb, dr, sr, [](float x) { return EXPR; });                             \
    }
TILEC_CCE_UNARY(vexp, std::exp(x))
TILEC_CCE_UNARY(vln, std::log(x))
TILEC_CCE_UNARY(vsqrt, std::sqrt(x))
TILEC_CCE_UNARY(vrsqrt, 1.0f / std::sqrt(x))
TILEC_CCE_UNARY(vabs, std::fabs(x))
#undef TILEC_CCE_UNARY

void vconv_f322s32r(int32_t* dst, float* src, uint8_t repeat, uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr) {
    unary("vconv_f322s32r", dst, src, repeat, db, sb, dr, sr, [](float v) { return int32_t(std::nearbyint(v)); });
}
void vconv_f322f16(half* dst, float* src, uint8_t repeat, uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr) {
    unary("vconv_f322f16", dst, src, repeat, db, sb, dr, sr, [](float v) { return f2h(v); });
}

// One sum per repeat of the active elements (a pairwise tree, as the hardware folds), written to element
// r * dstRepStride of dst.
void vcadd(float* dst, float* src, uint8_t repeat, uint16_t dst_rep, uint16_t sb, uint16_t sr, bool) {
    Op op = issue(PIPE_V, "vcadd");
    std::vector<std::vector<float*>> rows(st().counter ? 1 : repeat);
    for_each_element(repeat, 64, [&](int r, int j) {
        if (size_t(r) >= rows.size()) rows.resize(r + 1);
        rows[r].push_back(element(src, r, j, sb, sr));
    });
    std::vector<float> sums;
    for (auto& row : rows) {
        for (float* x : row) touch(x, 4, op, false);
        std::vector<double> v;
        for (float* x : row) v.push_back(*x);
        while (v.size() > 1) {
            std::vector<double> next;
            for (size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(v[i] + v[i + 1]);
            if (v.size() % 2) next.push_back(v.back());
            v = next;
        }
        sums.push_back(v.empty() ? 0.0f : float(v[0]));
    }
    for (size_t r = 0; r < sums.size(); ++r) {
        touch(dst + r * dst_rep, 4, op, true);
        dst[r * dst_rep] = sums[r];
    }
}

// One maximum per repeat; tilec asks for values only (ReduceOrder::ORDER_ONLY_VALUE), at r * dstRepStride.
void vcmax(float* dst, float* src, uint8_t repeat, uint16_t dst_rep, uint16_t sb, uint16_t sr, Order_t order) {
    if (order != Order_t::ONLY_VALUE) fail("vcmax: tilec's CCE model implements Order_t::ONLY_VALUE only");
    Op op = issue(PIPE_V, "vcmax");
    std::vector<float> best(st().counter ? 1 : repeat, -INFINITY);
    std::vector<bool> nan(best.size(), false);
    for_each_element(repeat, 64, [&](int r, int j) {
        if (size_t(r) >= best.size()) { best.resize(r + 1, -INFINITY); nan.resize(r + 1, false); }
        float* x = element(src, r, j, sb, sr);
        touch(x, 4, op, false);
        if (std::isnan(*x)) nan[r] = true;
        else if (*x > best[r]) best[r] = *x;
    });
    for (size_t r = 0; r < best.size(); ++r) {
        touch(dst + r * dst_rep, 4, op, true);
        dst[r * dst_rep] = nan[r] ? NAN : best[r];
    }
}

// CompareScalar: one bit per element, the bits of consecutive repeats packed one after another.
template <typename F> void compare_scalar(const char* name, uint8_t* dst, float* src, uint8_t repeat, uint16_t sb,
                                          uint16_t sr, F test) {
    Op op = issue(PIPE_V, name);
    std::vector<std::pair<size_t, bool>> bits;
    for_each_element(repeat, 64, [&](int r, int j) {
        float* x = element(src, r, j, sb, sr);
        touch(x, 4, op, false);
        bits.push_back({size_t(r) * 64 + j, test(*x)});
    });
    for (auto& [i, on] : bits) {
        touch(dst + i / 8, 1, op, true);
        dst[i / 8] = uint8_t(on ? dst[i / 8] | (1u << (i % 8)) : dst[i / 8] & ~(1u << (i % 8)));
    }
}
#define TILEC_CCE_CMP(NAME, OP)                                                                                   \
    void NAME(uint8_t* dst, float* src, float y, uint8_t repeat, uint16_t, uint16_t sb, uint16_t, uint16_t sr) {   \
        compare_scalar(#NAME, dst, src, repeat, sb, sr, [&](float x) { return x OP y; });                         \
    }
TILEC_CCE_CMP(vcmpvs_lt, <)
TILEC_CCE_CMP(vcmpvs_gt, >)
TILEC_CCE_CMP(vcmpvs_le, <=)
TILEC_CCE_CMP(vcmpvs_ge, >=)
TILEC_CCE_CMP(vcmpvs_eq, ==)
TILEC_CCE_CMP(vcmpvs_ne, !=)
#undef TILEC_CCE_CMP

// Select in tensor-scalar mode (1): the scalar is the first element of the buffer set_cmpmask names; a set bit of
// `sel` takes src0, a clear one the scalar.
void* g_cmpmask = nullptr;
void set_cmpmask(void* p) { g_cmpmask = p; }
void vsel(float* dst, float* src0, void* sel, uint8_t repeat, uint8_t db, uint8_t s0b, uint8_t, uint8_t dr,
          uint8_t s0r, uint8_t, uint8_t mode) {
    if (mode != 1) fail("vsel: tilec's CCE model implements the tensor-scalar mode only");
    Op op = issue(PIPE_V, "vsel");
    touch(g_cmpmask, 4, op, false);
    float scalar = *static_cast<float*>(g_cmpmask);
    auto* bits = static_cast<uint8_t*>(sel);
    struct Slot { float* d; float v; };
    std::vector<Slot> out;
    for_each_element(repeat, 64, [&](int r, int j) {
        size_t i = size_t(r) * 64 + j;
        float* a = element(src0, r, j, s0b, s0r);
        touch(a, 4, op, false);
        touch(bits + i / 8, 1, op, false);
        out.push_back({element(dst, r, j, db, dr), (bits[i / 8] >> (i % 8)) & 1 ? *a : scalar});
    });
    for (auto& o : out) { touch(o.d, 4, op, true); *o.d = o.v; }
}

// Gather: the 32-bit byte offsets of `offsets` address the source, whose host address CPU-debug code hands over
// separately (the intrinsic's own operand is a 32-bit UB address).
uint8_t* g_gather_src = nullptr;
void SetModelGatherbSrc0Tensor(uint64_t src, const uint32_t) { g_gather_src = reinterpret_cast<uint8_t*>(src); }
template <typename T> void gather(T* dst, uint32_t* offsets, uint16_t dst_rep, uint8_t repeat) {
    Op op = issue(PIPE_V, "vgather");
    struct Slot { T* d; T v; };
    std::vector<Slot> out;
    for_each_element(repeat, 256 / int(sizeof(T)), [&](int r, int j) {
        uint32_t* off = offsets + size_t(r) * (256 / sizeof(T)) + j;
        touch(off, 4, op, false);
        uint8_t* from = g_gather_src + *off;
        touch(from, sizeof(T), op, false);
        T v;
        std::memcpy(&v, from, sizeof(T));
        out.push_back({element(dst, r, j, 1, dst_rep), v});
    });
    for (auto& o : out) { touch(o.d, sizeof(T), op, true); *o.d = o.v; }
}
void vgather(uint32_t* dst, uint32_t* offsets, uint32_t, uint16_t dst_rep, uint8_t repeat) {
    gather(dst, offsets, dst_rep, repeat);
}
void vgather(uint16_t* dst, uint32_t* offsets, uint32_t, uint16_t dst_rep, uint8_t repeat) {
    gather(dst, offsets, dst_rep, repeat);
}

// Each of a repeat's 8 source elements fills one 32-byte block of dst.
void vbrcb(uint32_t* dst, uint32_t* src, uint16_t db, uint16_t dr, uint8_t repeat) {
    Op op = issue(PIPE_V, "vbrcb");
    for (int r = 0; r < repeat; ++r)
        for (int i = 0; i < 8; ++i) {
            uint32_t v = src[r * 8 + i];
            touch(src + r * 8 + i, 4, op, false);
            uint32_t* block = reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(dst) + (size_t(r) * dr + size_t(i) * db) * 32);
            touch(block, 32, op, true);
            for (int k = 0; k < 8; ++k) block[k] = v;
        }
}

}  // namespace AscendC

// An intrinsic this model does not implement, reached by the API: stop rather than compute nothing.
extern "C" [[noreturn]] void tilec_cce_unmodelled(const char* symbol) {
    std::fprintf(stderr, "tilec-cce: intrinsic not modelled: %s\n", symbol);
    std::fflush(stderr);
    std::abort();
}
