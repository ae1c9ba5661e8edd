// tilec's C++ model of the CCE intrinsics below CANN's AscendC API (dav-c220 vector and cube cores), so that CANN's
// own API code (asc-devkit, compiled in its CPU-debug mode by scripts/ascend_real_api.py --numerics) runs tilec's
// kernels on the host with real numbers. Compiled together with the real headers, whose declarations these
// definitions must match; written for tilec from the intrinsics' observable behaviour, not from CANN's library.
//
// What it models: the vector mask and its two modes (normal: a bit per element of each 256-byte repeat; counter:
// the low 64 bits count elements across as many repeats as needed), block and repeat strides in 32-byte units,
// DataCopyPad's aligned copies (GM gaps in bytes, UB gaps in 32-byte blocks, right padding with the pad value), the
// cube core's Nd2Nz copies, matrix fills, L1 -> L0A/L0B fractal loads, mad and the NZ2ND Fixpipe, the atomic mode,
// mode-2 cross-core flags between the processes of a mixed group, and a pipe-hazard checker: each pipe (S, V, M,
// MTE1-3, FIX) numbers its operations and keeps a vector clock advanced only by set_flag/wait_flag and
// pipe_barrier; each 32-byte granule of UB, L1, L0A, L0B and L0C remembers its last writer and readers; an access
// not ordered after a conflicting one aborts with both named (as tilec's API model does).
// What it does not: scalar-pipe accesses (the CPU-debug LocalTensor reads memory directly), GM hazards; an
// intrinsic tilec's kernels do not reach stays a stub that aborts when called.

#include "kernel_operator.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace {

constexpr int NPIPES = 11;  // pipe_t values up to PIPE_FIX (10)
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
};
State& st() { static State s; return s; }

const char* pipe_name(int p) {
    static const char* n[] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "ALL", "MTE4", "MTE5", "V2", "FIX"};
    return p >= 0 && p < NPIPES ? n[p] : "?";
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "tilec-cce: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

// On-chip memories of the core, as CPU-debug allocates them (ConstDefiner): every 32-byte granule has a shadow.
struct Mem { const char* name; uint8_t* base; size_t bytes; std::vector<Granule> shadow; };
std::vector<Mem>& mems() {
    static std::vector<Mem> m;
    if (m.empty()) {
        auto& c = AscendC::ConstDefiner::Instance();
        m = {{"UB", c.cpuUB, 192 * 1024, {}}, {"L1", c.cpuL1, 512 * 1024, {}}, {"L0A", c.cpuL0A, 64 * 1024, {}},
             {"L0B", c.cpuL0B, 64 * 1024, {}}, {"L0C", c.cpuL0C, 128 * 1024, {}}};
    }
    return m;
}
Mem* mem_of(const void* p) {
    auto* b = static_cast<const uint8_t*>(p);
    for (Mem& m : mems())
        if (m.base && b >= m.base && b < m.base + m.bytes) return &m;
    return nullptr;  // GM: not tracked
}

struct Op { int pipe; uint32_t n; const char* name; };
Op issue(int pipe, const char* name) { return Op{pipe, ++st().count[pipe], name}; }

bool ordered(const Op& op, const Access& a) {
    if (a.pipe < 0 || (a.pipe == op.pipe && a.n == op.n)) return true;  // itself
    if (a.pipe == op.pipe) return op.pipe != PIPE_V || st().clock[op.pipe][a.pipe] >= a.n;  // V overlaps itself
    return st().clock[op.pipe][a.pipe] >= a.n;
}

void touch(const void* p, size_t bytes, const Op& op, bool write) {
    Mem* m = mem_of(p);
    if (bytes == 0 || m == nullptr) return;
    auto* b = static_cast<const uint8_t*>(p);
    if (b + bytes > m->base + m->bytes) {
        char msg[256];
        std::snprintf(msg, sizeof msg, "'%s' %s %zu bytes at %s+%zu, past the end of %s (%zu bytes)", op.name,
                      write ? "writes" : "reads", bytes, m->name, size_t(b - m->base), m->name, m->bytes);
        fail(msg);
    }
    if (m->shadow.empty()) m->shadow.resize(m->bytes / 32);
    size_t first = size_t(b - m->base) / 32, last = (size_t(b - m->base) + bytes - 1) / 32;
    char msg[512];
    for (size_t g = first; g <= last && g < m->shadow.size(); ++g) {
        Granule& gr = m->shadow[g];
        if (!ordered(op, gr.write)) {
            std::snprintf(msg, sizeof msg, "pipe hazard: pipe %s '%s' %s %s granule %zu, last written by pipe %s '%s' "
                          "(#%u) with no synchronisation between them", pipe_name(op.pipe), op.name,
                          write ? "writes" : "reads", m->name, g, pipe_name(gr.write.pipe), gr.write.op, gr.write.n);
            fail(msg);
        }
        if (write) {
            for (const Access& r : gr.reads)
                if (r.pipe >= 0 && r.pipe != op.pipe && !ordered(op, r)) {
                    std::snprintf(msg, sizeof msg, "pipe hazard: pipe %s '%s' overwrites %s granule %zu still being "
                                  "read by pipe %s '%s' (#%u)", pipe_name(op.pipe), op.name, m->name, g,
                                  pipe_name(r.pipe), r.op, r.n);
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

float h2f(half h);
half f2h(float v);
float bf2f(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
uint16_t f2bf(float f) {  // nearest even, as the hardware's casts to bf16
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
    return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// The atomic mode (set_atomic_add/max/min with set_atomic_f32/f16/bf16/s32, until set_atomic_none): MTE3 and FIX
// writes to GM combine with what is there. GM is shared by every core's process, so each element is combined with
// a compare-and-swap.
struct Atomic { int op = 0; int type = 0; };  // op: 0 none, 1 add, 2 max, 3 min; type: 1 f32, 2 f16, 3 bf16, 4 s32
Atomic& atomic() { static Atomic a; return a; }
template <typename W, typename F> void cas(uint8_t* p, F combine) {
    W old;
    std::memcpy(&old, p, sizeof(W));
    for (;;) {
        W now = combine(old);
        if (__atomic_compare_exchange_n(reinterpret_cast<W*>(p), &old, now, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            return;
    }
}
template <typename T> T combine_values(int op, T a, T b) {
    return op == 1 ? T(a + b) : op == 2 ? (a > b ? a : b) : (a < b ? a : b);
}
void gm_store(uint8_t* dst, const uint8_t* src, size_t bytes) {
    const Atomic& a = atomic();
    if (a.op == 0) { std::memcpy(dst, src, bytes); return; }
    size_t w = a.type == 1 || a.type == 4 ? 4 : 2;
    if (bytes % w || reinterpret_cast<uintptr_t>(dst) % w) fail("atomic GM write not aligned to its element type");
    for (size_t i = 0; i < bytes; i += w) {
        uint8_t* p = dst + i;
        if (a.type == 1) {
            float v; std::memcpy(&v, src + i, 4);
            cas<uint32_t>(p, [&](uint32_t o) { float f; std::memcpy(&f, &o, 4); f = combine_values(a.op, f, v);
                                               uint32_t u; std::memcpy(&u, &f, 4); return u; });
        } else if (a.type == 4) {
            int32_t v; std::memcpy(&v, src + i, 4);
            cas<uint32_t>(p, [&](uint32_t o) { return uint32_t(combine_values(a.op, int32_t(o), v)); });
        } else if (a.type == 2) {
            half v; std::memcpy(&v.val, src + i, 2);
            cas<uint16_t>(p, [&](uint16_t o) { half h; h.val = o; return f2h(combine_values(a.op, h2f(h), h2f(v))).val; });
        } else {
            uint16_t v; std::memcpy(&v, src + i, 2);
            cas<uint16_t>(p, [&](uint16_t o) { return f2bf(combine_values(a.op, bf2f(o), bf2f(v))); });
        }
    }
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
        gm_store(d + size_t(i) * (len + dst_gap), from, len);
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
    if (src < 0 || src >= NPIPES || dst < 0 || dst >= NPIPES) fail("set_flag: pipe outside the model's pipes");
    if (s.flag_set[src][dst][id]) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "set_flag(%s, %s, %d) twice without a wait_flag between them", pipe_name(src),
                      pipe_name(dst), int(id));
        fail(msg);
    }
    s.flag_set[src][dst][id] = true;
    for (int q = 0; q < NPIPES; ++q) s.flag[src][dst][id][q] = s.clock[src][q];
    s.flag[src][dst][id][src] = s.count[src];
}
void wait_flag(pipe_t src, pipe_t dst, event_t id) {
    State& s = st();
    if (id < 0 || id > 7) fail("wait_flag: event id outside 0..7");
    if (src < 0 || src >= NPIPES || dst < 0 || dst >= NPIPES) fail("wait_flag: pipe outside the model's pipes");
    if (!s.flag_set[src][dst][id]) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "wait_flag(%s, %s, %d) with no set_flag before it: the pipe would hang",
                      pipe_name(src), pipe_name(dst), int(id));
        fail(msg);
    }
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


// ----------------------------------------------------------------------------- atomic mode

void set_atomic_none() { atomic().op = 0; }
void set_atomic_add() { atomic().op = 1; }
void set_atomic_max() { atomic().op = 2; }
void set_atomic_min() { atomic().op = 3; }
void set_atomic_f32() { atomic().type = 1; }
void set_atomic_f16() { atomic().type = 2; }
void set_atomic_bf16() { atomic().type = 3; }
void set_atomic_s32() { atomic().type = 4; }

// ----------------------------------------------------------------------------- cube core
//
// Layouts (C0 = 32 bytes: 16 elements of a 16-bit type, 8 of a 32-bit one):
//   Nd2Nz into L1: element (r, c) of each ND matrix lands at (c / C0) * dstNzC0Stride * C0 + r * dstNzNStride * C0 +
//   c % C0 (strides in 32-byte blocks), matrix i at i * dstNzMatrixStride elements, read from i * srcNdMatrixStride;
//   L1 -> L0A/L0B (load_cbuf_to_ca/cb): one 512-byte fractal per repeat, source fractal baseIdx + i * srcStride,
//   destination fractal i * (1 + dstGap); `transpose` transposes each 16x16 fractal;
//   mad: L0A holds A as 16x16 fractals row-major over (m-block, k-block), each fractal row-major; L0B holds B as
//   fractals row-major over (k-block, n-block), each fractal n-major; L0C (float) fractals over (n-block, m-block),
//   each row-major; init (cmatrixInitVal) replaces L0C, otherwise the products are added to it;
//   copy_matrix_cc_to_gm with NZ2ND: element (r, c) from (c / 16) * srcStride * 16 + r * 16 + c % 16 to r * dstStride
//   + c of the ND destination, converted by QuantPRE, ReLU on request, ndNum matrices (set_nd_para).

namespace {
template <typename T> void nd2nz(const char* name, T* dst, T* src, uint16_t nd, uint16_t n, uint16_t d,
                                 uint16_t src_nd, uint16_t src_d, uint16_t c0_stride, uint16_t n_stride,
                                 uint16_t dst_nd) {
    const uint32_t c0 = 32 / sizeof(T);
    if (nd < 1 || c0_stride < 1 || n_stride < 1 || src_d < d) {
        char msg[256];
        std::snprintf(msg, sizeof msg, "%s: parameters out of range (ndNum %u, dstNzC0Stride %u, dstNzNStride %u, "
                      "srcDValue %u < dValue %u)", name, nd, c0_stride, n_stride, src_d, d);
        fail(msg);
    }
    Op op = issue(PIPE_MTE2, name);
    for (uint32_t m = 0; m < nd; ++m)
        for (uint32_t r = 0; r < n; ++r)
            for (uint32_t c = 0; c < d; c += c0) {
                T* to = dst + size_t(m) * dst_nd + size_t(c / c0) * c0_stride * c0 + size_t(r) * n_stride * c0;
                touch(to, 32, op, true);
                uint32_t k = d - c < c0 ? d - c : c0;
                std::memcpy(to, src + size_t(m) * src_nd + size_t(r) * src_d + c, k * sizeof(T));
            }
}

template <typename T> void create_matrix(const char* name, int pipe, T* dst, int64_t config, const void* value) {
    uint32_t repeat = uint32_t(config & 0x7fff), blocks = uint32_t((config >> 16) & 0x7fff),
             gap = uint32_t((config >> 32) & 0x7fff);
    Op op = issue(pipe, name);
    auto* d = reinterpret_cast<uint8_t*>(dst);
    for (uint32_t r = 0; r < repeat; ++r) {
        uint8_t* row = d + size_t(r) * (blocks + gap) * 32;
        touch(row, size_t(blocks) * 32, op, true);
        for (uint32_t i = 0; i < blocks * 32 / sizeof(T); ++i) std::memcpy(row + i * sizeof(T), value, sizeof(T));
    }
}

template <typename T> void load_2d(const char* name, T* dst, T* src, uint16_t base, uint8_t repeat,
                                   uint16_t src_stride, uint16_t dst_gap, bool transpose) {
    if (repeat < 1) fail("load_cbuf_to_ca/cb: repeat must be 1..255");
    if (transpose && sizeof(T) != 2) fail("load_cbuf_to_ca/cb: transpose needs 16-bit elements here");
    Op op = issue(PIPE_MTE1, name);
    const size_t fe = 512 / sizeof(T);
    for (uint32_t i = 0; i < repeat; ++i) {
        T* in = src + (size_t(base) + size_t(i) * src_stride) * fe;
        T* out = dst + size_t(i) * (1 + dst_gap) * fe;
        touch(in, 512, op, false);
        touch(out, 512, op, true);
        if (transpose) {
            T tmp[256];
            for (int r = 0; r < 16; ++r)
                for (int c = 0; c < 16; ++c) tmp[c * 16 + r] = in[r * 16 + c];
            std::memcpy(out, tmp, 512);
        } else {
            std::memmove(out, in, 512);
        }
    }
}

template <typename T, typename Cvt> void mad_impl(float* c, T* a, T* b, uint16_t m, uint16_t k, uint16_t n, bool init,
                                                  Cvt to_float) {
    if (m > 4095 || n > 4095 || k > 4095) fail("mad: m, n, k are at most 4095");
    if (k % 16) fail("mad: k is not a multiple of 16 for a 16-bit type");
    Op op = issue(PIPE_M, "mad");
    const uint32_t M1 = (m + 15) / 16, N1 = (n + 15) / 16, K1 = k / 16;
    touch(a, size_t(M1) * K1 * 512, op, false);
    touch(b, size_t(K1) * N1 * 512, op, false);
    if (!init) touch(c, size_t(M1) * N1 * 1024, op, false);
    touch(c, size_t(M1) * N1 * 1024, op, true);
    for (uint32_t i = 0; i < M1 * 16; ++i)
        for (uint32_t j = 0; j < N1 * 16; ++j) {
            float acc = 0;
            for (uint32_t x = 0; x < k; ++x)
                acc += to_float(a[(size_t(i / 16) * K1 + x / 16) * 256 + (i % 16) * 16 + x % 16]) *
                       to_float(b[(size_t(x / 16) * N1 + j / 16) * 256 + (j % 16) * 16 + x % 16]);
            float& out = c[(size_t(j / 16) * M1 + i / 16) * 256 + (i % 16) * 16 + j % 16];
            out = init ? acc : out + acc;
        }
}

uint64_t g_nd_para = 1;  // ND_PARA: [15:0] ndNum, [31:16] src nd stride, [47:32] dst nd stride

template <typename D> void fixpipe(D* dst, float* src, uint16_t n, uint16_t m, uint32_t dst_stride,
                                   uint16_t src_stride, QuantMode_t quant, uint8_t relu, bool split, bool nz2nd) {
    if (!nz2nd || split) fail("copy_matrix_cc_to_gm: tilec's CCE model implements NZ2ND without channel split only");
    bool ok = (std::is_same<D, half>::value && quant == QuantMode_t::F322F16) ||
              (std::is_same<D, float>::value && quant == QuantMode_t::NoQuant) ||
              (sizeof(D) == 2 && !std::is_same<D, half>::value && quant == QuantMode_t::F322BF16);
    if (!ok) fail("copy_matrix_cc_to_gm: QuantPRE does not produce the destination type");
    if (src_stride % 16 || src_stride < m) fail("copy_matrix_cc_to_gm: srcStride must be a multiple of 16 and >= mSize");
    if (dst_stride < n) fail("copy_matrix_cc_to_gm: the ND destination stride is below nSize");
    uint32_t nd = uint32_t(g_nd_para & 0xffff), src_nd = uint32_t((g_nd_para >> 16) & 0xffff),
             dst_nd = uint32_t((g_nd_para >> 32) & 0xffff);
    if (nd != 1) fail("copy_matrix_cc_to_gm: tilec's CCE model implements ndNum = 1");
    (void)src_nd; (void)dst_nd;
    Op op = issue(PIPE_FIX, "copy_matrix_cc_to_gm");
    std::vector<D> row(n);
    for (uint32_t r = 0; r < m; ++r) {
        for (uint32_t c = 0; c < n; ++c) {
            float* at = src + size_t(c / 16) * src_stride * 16 + size_t(r) * 16 + c % 16;
            if (c % 8 == 0) touch(at, 32, op, false);
            float v = *at;
            if (relu && v < 0) v = 0;
            if constexpr (std::is_same<D, half>::value) row[c] = f2h(v);
            else if constexpr (std::is_same<D, float>::value) row[c] = v;
            else { uint16_t b = f2bf(v); std::memcpy(&row[c], &b, 2); }
        }
        gm_store(reinterpret_cast<uint8_t*>(dst + size_t(r) * dst_stride), reinterpret_cast<uint8_t*>(row.data()),
                 n * sizeof(D));
    }
}
}  // namespace

void set_nd_para(uint64_t config) { g_nd_para = config; }

void copy_gm_to_cbuf_multi_nd2nz_b16(half* dst, half* src, uint8_t, uint16_t nd, uint16_t n, uint16_t d,
                                     uint16_t src_nd, uint16_t src_d, uint16_t c0s, uint16_t ns, uint16_t dst_nd) {
    nd2nz("copy_gm_to_cbuf_multi_nd2nz_b16", dst, src, nd, n, d, src_nd, src_d, c0s, ns, dst_nd);
}
void copy_gm_to_cbuf_multi_nd2nz_b16(bfloat16_t* dst, bfloat16_t* src, uint8_t, uint16_t nd, uint16_t n, uint16_t d,
                                     uint16_t src_nd, uint16_t src_d, uint16_t c0s, uint16_t ns, uint16_t dst_nd) {
    nd2nz("copy_gm_to_cbuf_multi_nd2nz_b16", reinterpret_cast<uint16_t*>(dst), reinterpret_cast<uint16_t*>(src), nd,
          n, d, src_nd, src_d, c0s, ns, dst_nd);
}
void copy_gm_to_cbuf_multi_nd2nz_b32s(float* dst, float* src, uint8_t, uint16_t nd, uint16_t n, uint16_t d,
                                      uint16_t src_nd, uint16_t src_d, uint16_t c0s, uint16_t ns, uint16_t dst_nd) {
    nd2nz("copy_gm_to_cbuf_multi_nd2nz_b32s", dst, src, nd, n, d, src_nd, src_d, c0s, ns, dst_nd);
}

void create_cbuf_matrix(half* dst, int64_t config, half v) { create_matrix("create_cbuf_matrix", PIPE_MTE2, dst, config, &v.val); }
void create_ca_matrix(half* dst, int64_t config, half v) { create_matrix("create_ca_matrix", PIPE_MTE1, dst, config, &v.val); }
void create_cb_matrix(half* dst, int64_t config, half v) { create_matrix("create_cb_matrix", PIPE_MTE1, dst, config, &v.val); }
void create_cbuf_matrix_bf16(bfloat16_t* dst, int64_t config, bfloat16_t v) {
    create_matrix("create_cbuf_matrix_bf16", PIPE_MTE2, reinterpret_cast<uint16_t*>(dst), config, &v);
}
void create_ca_matrix_bf16(bfloat16_t* dst, int64_t config, bfloat16_t v) {
    create_matrix("create_ca_matrix_bf16", PIPE_MTE1, reinterpret_cast<uint16_t*>(dst), config, &v);
}
void create_cb_matrix_bf16(bfloat16_t* dst, int64_t config, bfloat16_t v) {
    create_matrix("create_cb_matrix_bf16", PIPE_MTE1, reinterpret_cast<uint16_t*>(dst), config, &v);
}

void load_cbuf_to_ca(half* dst, half* src, uint16_t base, uint8_t repeat, uint16_t ss, uint16_t gap, uint8_t, bool t,
                     addr_cal_mode_t) {
    load_2d("load_cbuf_to_ca", dst, src, base, repeat, ss, gap, t);
}
void load_cbuf_to_cb(half* dst, half* src, uint16_t base, uint8_t repeat, uint16_t ss, uint16_t gap, uint8_t, bool t,
                     addr_cal_mode_t) {
    load_2d("load_cbuf_to_cb", dst, src, base, repeat, ss, gap, t);
}
void load_cbuf_to_ca(bfloat16_t* dst, bfloat16_t* src, uint16_t base, uint8_t repeat, uint16_t ss, uint16_t gap,
                     uint8_t, bool t, addr_cal_mode_t) {
    load_2d("load_cbuf_to_ca", reinterpret_cast<uint16_t*>(dst), reinterpret_cast<uint16_t*>(src), base, repeat, ss,
            gap, t);
}
void load_cbuf_to_cb(bfloat16_t* dst, bfloat16_t* src, uint16_t base, uint8_t repeat, uint16_t ss, uint16_t gap,
                     uint8_t, bool t, addr_cal_mode_t) {
    load_2d("load_cbuf_to_cb", reinterpret_cast<uint16_t*>(dst), reinterpret_cast<uint16_t*>(src), base, repeat, ss,
            gap, t);
}

void mad(float* c, half* a, half* b, uint16_t m, uint16_t k, uint16_t n, uint8_t, bool, bool source, bool init) {
    if (source) fail("mad: tilec's CCE model implements cmatrixSource = false (C from L0C)");
    mad_impl(c, a, b, m, k, n, init, [](half h) { return h2f(h); });
}
void mad(float* c, bfloat16_t* a, bfloat16_t* b, uint16_t m, uint16_t k, uint16_t n, uint8_t, bool, bool source,
         bool init) {
    if (source) fail("mad: tilec's CCE model implements cmatrixSource = false (C from L0C)");
    mad_impl(c, reinterpret_cast<uint16_t*>(a), reinterpret_cast<uint16_t*>(b), m, k, n, init,
             [](uint16_t x) { return bf2f(x); });
}

void copy_matrix_cc_to_gm(half* dst, float* src, uint8_t, uint16_t n, uint16_t m, uint32_t ds, uint16_t ss, uint8_t,
                          QuantMode_t q, uint8_t relu, bool split, bool nz2nd) {
    fixpipe(dst, src, n, m, ds, ss, q, relu, split, nz2nd);
}
void copy_matrix_cc_to_gm(bfloat16_t* dst, float* src, uint8_t, uint16_t n, uint16_t m, uint32_t ds, uint16_t ss,
                          uint8_t, QuantMode_t q, uint8_t relu, bool split, bool nz2nd) {
    fixpipe(reinterpret_cast<uint16_t*>(dst), src, n, m, ds, ss, q, relu, split, nz2nd);
}
void copy_matrix_cc_to_gm(float* dst, float* src, uint8_t, uint16_t n, uint16_t m, uint32_t ds, uint16_t ss, uint8_t,
                          QuantMode_t q, uint8_t relu, bool split, bool nz2nd) {
    fixpipe(dst, src, n, m, ds, ss, q, relu, split, nz2nd);
}

// ----------------------------------------------------------------------------- cross-core flags
//
// A mixed group (one AIC, two AIVs: block_idx names the group) exchanges flags through a table in a file every
// core's process maps (TILEC_CCE_XCORE). Mode 2 (AIC <-> its AIVs): the AIC's set counts once for each AIV; an AIV's
// set counts toward the AIC's flag, which moves when both AIVs have set it. wait_flag_dev blocks until the core's
// count of that flag is positive and takes one. A core waiting while every other core of its group is waiting or
// done with nothing pending for it is a deadlock, reported rather than hung.

namespace {
constexpr int XGROUPS = 64, XFLAGS = 16;
struct XGroup {
    int32_t pending[3][XFLAGS];   // per core (0: AIC, 1/2: AIV 0/1)
    int32_t aiv_sets[2][XFLAGS];  // AIV sets not yet matched by the other AIV's
    int32_t state[3];             // 0 not started, 1 running, 2 waiting, 3 done
};
XGroup* xtable() {
    static XGroup* table = nullptr;
    if (!table) {
        const char* path = std::getenv("TILEC_CCE_XCORE");
        if (!path) fail("cross-core flag outside a mixed run (TILEC_CCE_XCORE is not set)");
        int fd = open(path, O_RDWR);
        if (fd < 0 || ftruncate(fd, sizeof(XGroup) * XGROUPS) != 0) fail("cannot map the cross-core flag table");
        table = static_cast<XGroup*>(mmap(nullptr, sizeof(XGroup) * XGROUPS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        close(fd);
    }
    return table;
}
XGroup* xgroup() {
    int64_t b = block_idx;
    if (b < 0 || b >= XGROUPS) fail("cross-core flags: block index out of the table");
    return xtable() + b;
}
int xcore() { return g_coreType == AscendC::AIC ? 0 : 1 + int(sub_block_idx); }
}  // namespace

void ffts_cross_core_sync(pipe_t, uint64_t config) {
    int mode = int((config >> 4) & 3), flag = int((config >> 8) & 15);
    if (mode != 2) fail("ffts_cross_core_sync: tilec's CCE model implements mode 2 (AIC <-> its AIVs) only");
    XGroup* g = xgroup();
    if (xcore() == 0) {
        __atomic_add_fetch(&g->pending[1][flag], 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&g->pending[2][flag], 1, __ATOMIC_SEQ_CST);
        return;
    }
    int me = xcore() - 1, other = 1 - me;
    for (;;) {  // match one set of the other AIV, or leave this one for it to match
        int32_t o = __atomic_load_n(&g->aiv_sets[other][flag], __ATOMIC_SEQ_CST);
        if (o > 0) {
            if (__atomic_compare_exchange_n(&g->aiv_sets[other][flag], &o, o - 1, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST)) {
                __atomic_add_fetch(&g->pending[0][flag], 1, __ATOMIC_SEQ_CST);
                return;
            }
            continue;
        }
        __atomic_add_fetch(&g->aiv_sets[me][flag], 1, __ATOMIC_SEQ_CST);
        // the other AIV may have added its own set meanwhile: if both are now positive, match them here
        int32_t mine = __atomic_load_n(&g->aiv_sets[me][flag], __ATOMIC_SEQ_CST);
        int32_t theirs = __atomic_load_n(&g->aiv_sets[other][flag], __ATOMIC_SEQ_CST);
        if (mine > 0 && theirs > 0 &&
            __atomic_compare_exchange_n(&g->aiv_sets[me][flag], &mine, mine - 1, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            if (__atomic_compare_exchange_n(&g->aiv_sets[other][flag], &theirs, theirs - 1, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST))
                __atomic_add_fetch(&g->pending[0][flag], 1, __ATOMIC_SEQ_CST);
            else
                __atomic_add_fetch(&g->aiv_sets[me][flag], 1, __ATOMIC_SEQ_CST);  // lost the race: put it back
        }
        return;
    }
}

void wait_flag_dev(int64_t flag) {
    if (flag < 0 || flag >= XFLAGS) fail("wait_flag_dev: flag id outside 0..15");
    XGroup* g = xgroup();
    int me = xcore();
    __atomic_store_n(&g->state[me], 2, __ATOMIC_SEQ_CST);
    long stuck = 0;  // consecutive polls in which every other core was waiting or done
    for (long spins = 0;; ++spins) {
        int32_t p = __atomic_load_n(&g->pending[me][flag], __ATOMIC_SEQ_CST);
        if (p > 0 && __atomic_compare_exchange_n(&g->pending[me][flag], &p, p - 1, false, __ATOMIC_SEQ_CST,
                                                 __ATOMIC_SEQ_CST))
            break;
        if (p > 0) continue;
        bool others_stuck = true;
        for (int c = 0; c < 3; ++c)
            if (c != me && __atomic_load_n(&g->state[c], __ATOMIC_SEQ_CST) < 2) others_stuck = false;
        stuck = others_stuck ? stuck + 1 : 0;
        if (stuck > 5000) {
            char msg[200];
            std::snprintf(msg, sizeof msg, "deadlock: %s of group %lld waits for cross-core flag %lld, and every other "
                          "core of the group is waiting or done", me == 0 ? "the AIC" : me == 1 ? "AIV 0" : "AIV 1",
                          (long long)block_idx, (long long)flag);
            fail(msg);
        }
        if (spins > 600000) fail("cross-core flag: no set after 10 minutes");
        usleep(spins < 100 ? 10 : 1000);
    }
    __atomic_store_n(&g->state[me], 1, __ATOMIC_SEQ_CST);
}

}  // namespace AscendC

// A core of a mixed group starts (1) and ends (3): the cross-core deadlock check counts the cores still running.
extern "C" void tilec_cce_core_state(int64_t block, int core, int state) {
    if (std::getenv("TILEC_CCE_XCORE") && block >= 0 && block < AscendC::XGROUPS)
        __atomic_store_n(&AscendC::xtable()[block].state[core], state, __ATOMIC_SEQ_CST);
}

// An intrinsic this model does not implement, reached by the API: stop rather than compute nothing.
extern "C" [[noreturn]] void tilec_cce_unmodelled(const char* symbol) {
    std::fprintf(stderr, "tilec-cce: intrinsic not modelled: %s\n", symbol);
    std::fflush(stderr);
    std::abort();
}
