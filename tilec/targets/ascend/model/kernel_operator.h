// tilec's CPU execution model of the AscendC API (CANN 8.x names, Ascend 910B "dav-c220").
//
// Generated AscendC kernels compile against this header with g++ (-fsanitize=address,undefined) and
// run on the host. The model executes every API call at once, in program order, but keeps the
// bookkeeping real hardware would need: per-core memories with their usable capacities (UB 184 KB: the
// library keeps the 8 KB above TMP_UB_OFFSET for Select's scratch; L1 512 KB - 128 B; L0A/L0B 64 KB, L0C
// 128 KB), start-address alignments and parameter ranges; hardware event ids handed out as CANN's TPipe
// does (one pool of 8 per HardEvent, taken by EnQue/FreeTensor, given back by DeQue/AllocTensor, the cube
// core's M_MTE1 ids 0-2 reserved by the TPipe); DataCopy's 32-byte
// flooring; pads and fresh buffers poisoned with NaN; fractal layouts (Nd2Nz, LoadData, Mmad, Fixpipe);
// and a pipe-hazard checker. Each hardware pipe (S, V, M, MTE1, MTE2, MTE3, FIX) of each core has a
// vector clock, advanced only by what orders pipes on the chip: SetFlag/WaitFlag, PipeBarrier, the
// events TQue inserts on EnQue/DeQue/AllocTensor/FreeTensor, and cross-core flags. Every 32-byte
// granule of every memory remembers its last writer and readers; an access that is not ordered after
// a conflicting one by those clocks is a missing synchronisation, reported with both operations.
// AIC and AIV cores of a mixed kernel run as threads, so cross-core flags block for real, and a group
// whose every core waits is reported as a deadlock instead of hanging.
// What a model cannot see (bisheng-only rules, exact hardware numerics, timing) is in docs/ascend.md.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

#define __global__
#define __aicore__
#define __gm__
#define GM_ADDR uint8_t*
#define KERNEL_TYPE_AIV_ONLY 1
#define KERNEL_TYPE_AIC_ONLY 2
#define KERNEL_TYPE_MIX_AIC_1_2 3
#define KERNEL_TASK_TYPE_DEFAULT(t) ::AscendC::model::declare_kernel_type(t)
#define ASCEND_IS_AIC (::AscendC::model::core().is_aic)
#define ASCEND_IS_AIV (!::AscendC::model::core().is_aic)

using half = _Float16;

// bfloat16: storage only on the vector unit of 910B (Cast to/from f32), as on the chip.
struct bfloat16_t {
    uint16_t bits;
    bfloat16_t() = default;
    bfloat16_t(float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) { bits = 0x7fc0; return; }
        u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
        bits = uint16_t(u >> 16);
    }
    operator float() const {
        uint32_t u = uint32_t(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

namespace AscendC {

enum class TPosition : uint8_t { GM, VECIN, VECOUT, VECCALC, A1, B1, C1, A2, B2, CO1, CO2 };
using QuePosition = TPosition;
enum pipe_t : uint8_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_FIX, PIPE_ALL };
enum class HardEvent : uint8_t {
    MTE2_V, V_MTE2, V_MTE3, MTE3_V, MTE2_MTE3, MTE3_MTE2, S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S,
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, M_FIX, FIX_M, FIX_MTE2, MTE2_FIX, MTE3_MTE1, FIX_S, S_FIX, COUNT
};
using event_t = int32_t;
enum class RoundMode : uint8_t { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class ReduceOrder : uint8_t { ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };
enum class CMPMODE : uint8_t { LT, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
enum QuantMode_t : uint8_t { NoQuant, F322F16, F322BF16 };
enum class CO2Layout : uint8_t { NZ, ROW_MAJOR };
struct FixpipeConfig { CO2Layout format; };
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};

struct DataCopyExtParams { uint16_t blockCount = 1; uint32_t blockLen = 0; uint32_t srcStride = 0;
                           uint32_t dstStride = 0; uint32_t rsv = 0; };
template <typename T> struct DataCopyPadExtParams { bool isPad = false; uint8_t leftPadding = 0;
                                                    uint8_t rightPadding = 0; T paddingValue = T(0); };
// Defaults as asc-devkit 8.5's kernel_struct_*.h: a field the generated code forgets is zero there too.
struct Nd2NzParams { uint16_t ndNum = 0; uint16_t nValue = 0; uint16_t dValue = 0; uint16_t srcNdMatrixStride = 0;
                     uint16_t srcDValue = 0; uint16_t dstNzC0Stride = 0; uint16_t dstNzNStride = 0;
                     uint16_t dstNzMatrixStride = 0; };
struct LoadData2DParams { uint16_t startIndex = 0; uint8_t repeatTimes = 0; uint16_t srcStride = 0; uint8_t sid = 0;
                          uint16_t dstGap = 0; bool ifTranspose = false; uint8_t addrMode = 0; };
template <typename T> struct InitConstValueParams { uint16_t repeatTimes = 0; uint16_t blockNum = 0;
                                                    uint16_t dstGap = 0; T initValue = T(0); };
struct MmadParams { uint16_t m = 0; uint16_t n = 0; uint16_t k = 0; bool isBias = false; int32_t fmOffset = 0;
                    bool enSsparse = false; bool enWinogradA = false; bool enWinogradB = false;
                    uint8_t unitFlag = 0; bool kDirectionAlign = false; bool cmatrixSource = false;
                    bool cmatrixInitVal = true; };
struct FixpipeParamsV220 { uint16_t nSize = 0; uint16_t mSize = 0; uint16_t srcStride = 0; uint32_t dstStride = 0;
                           QuantMode_t quantPre = NoQuant; uint64_t deqScalar = 0; uint16_t ndNum = 1;
                           uint16_t srcNdStride = 0; uint16_t dstNdStride = 0; bool reluEn = false;
                           uint8_t unitFlag = 0; bool isChannelSplit = false; };
struct BinaryRepeatParams {
    uint8_t dstBlkStride = 1, src0BlkStride = 1, src1BlkStride = 1, dstRepStride = 8, src0RepStride = 8, src1RepStride = 8;
    BinaryRepeatParams() = default;
    BinaryRepeatParams(uint8_t db, uint8_t s0b, uint8_t s1b, uint8_t dr, uint8_t s0r, uint8_t s1r)
        : dstBlkStride(db), src0BlkStride(s0b), src1BlkStride(s1b), dstRepStride(dr), src0RepStride(s0r), src1RepStride(s1r) {}
};
struct UnaryRepeatParams {
    uint16_t dstBlkStride = 1, srcBlkStride = 1;
    uint8_t dstRepStride = 8, srcRepStride = 8;
    UnaryRepeatParams() = default;
    UnaryRepeatParams(uint16_t db, uint16_t sb, uint8_t dr, uint8_t sr)
        : dstBlkStride(db), srcBlkStride(sb), dstRepStride(dr), srcRepStride(sr) {}
};
struct BrcbRepeatParams {
    uint16_t dstBlkStride = 1, dstRepStride = 8;
    BrcbRepeatParams() = default;
    BrcbRepeatParams(uint16_t db, uint16_t dr) : dstBlkStride(db), dstRepStride(dr) {}
};

namespace model {

[[noreturn]] inline void fail(const char* kind, const std::string& msg) {
    std::fprintf(stderr, "ascend-model: %s: %s\n", kind, msg.c_str());
    std::fflush(stderr);
    _exit(kind[0] == 'd' ? 71 : 70);  // "deadlock" / any other error; _exit: other cores may hold locks
}
inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

constexpr int NPIPES = 7;
inline const char* pipe_name(int p) {
    static const char* n[] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX", "ALL"};
    return n[p];
}
struct EventPipes { int src, dst; const char* name; };
inline EventPipes event_pipes(HardEvent e) {
    static const EventPipes t[] = {
        {PIPE_MTE2, PIPE_V, "MTE2_V"}, {PIPE_V, PIPE_MTE2, "V_MTE2"}, {PIPE_V, PIPE_MTE3, "V_MTE3"},
        {PIPE_MTE3, PIPE_V, "MTE3_V"}, {PIPE_MTE2, PIPE_MTE3, "MTE2_MTE3"}, {PIPE_MTE3, PIPE_MTE2, "MTE3_MTE2"},
        {PIPE_S, PIPE_V, "S_V"}, {PIPE_V, PIPE_S, "V_S"}, {PIPE_S, PIPE_MTE2, "S_MTE2"}, {PIPE_MTE2, PIPE_S, "MTE2_S"},
        {PIPE_S, PIPE_MTE3, "S_MTE3"}, {PIPE_MTE3, PIPE_S, "MTE3_S"}, {PIPE_MTE2, PIPE_MTE1, "MTE2_MTE1"},
        {PIPE_MTE1, PIPE_MTE2, "MTE1_MTE2"}, {PIPE_MTE1, PIPE_M, "MTE1_M"}, {PIPE_M, PIPE_MTE1, "M_MTE1"},
        {PIPE_M, PIPE_FIX, "M_FIX"}, {PIPE_FIX, PIPE_M, "FIX_M"}, {PIPE_FIX, PIPE_MTE2, "FIX_MTE2"},
        {PIPE_MTE2, PIPE_FIX, "MTE2_FIX"}, {PIPE_MTE3, PIPE_MTE1, "MTE3_MTE1"}, {PIPE_FIX, PIPE_S, "FIX_S"},
        {PIPE_S, PIPE_FIX, "S_FIX"}};
    return t[int(e)];
}

// ---------------------------------------------------------------- clocks, shadows, cores

using Clock = std::vector<uint32_t>;  // indexed by core * NPIPES + pipe
inline void join(Clock& a, const Clock& b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); ++i) a[i] = std::max(a[i], b[i]);
}

struct Access { int32_t clock = -1; uint32_t n = 0; const char* op = nullptr; bool atomic = false; };
struct Granule { Access write; std::vector<Access> reads; };  // reads: the last one per (core, pipe)

enum Mem { UB, L1, L0A, L0B, L0C, NMEM };
inline const char* mem_name(int m) { static const char* n[] = {"UB", "L1", "L0A", "L0B", "L0C"}; return n[m]; }
constexpr uint32_t MEM_BYTES[NMEM] = {184 * 1024, 512 * 1024 - 128, 64 * 1024, 64 * 1024, 128 * 1024};
constexpr uint32_t MEM_ALIGN[NMEM] = {32, 32, 512, 512, 64};
inline Mem mem_of(TPosition p) {
    switch (p) {
    case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC: return UB;
    case TPosition::A1: case TPosition::B1: case TPosition::C1: return L1;
    case TPosition::A2: return L0A;
    case TPosition::B2: return L0B;
    case TPosition::CO1: return L0C;
    default: fail("error", "a local tensor cannot live in GM/CO2");
    }
}

struct Core {
    int id = 0;             // index into the launch's cores (clock index base = id * NPIPES)
    bool is_aic = false;
    int64_t block_idx = 0, block_num = 1, sub_block_idx = 0;
    std::string label;
    std::vector<uint8_t> mem[NMEM];
    std::vector<Granule> shadow[NMEM];
    Clock clock[NPIPES];
    uint32_t count[NPIPES] = {};
    struct Flag { bool set = false; Clock snap; };
    Flag flags[int(HardEvent::COUNT)][8];
    uint8_t events_taken[int(HardEvent::COUNT)] = {};  // TPipe's event pools: bit i = id i taken
    int kernel_type = 0;
    bool pipe_made = false;
    int waiting_flag = -1;  // the cross-core flag this core is blocked on
    const int* waiting_count = nullptr;  // its pending-set counter
    // The atomic mode (SetAtomicAdd/Max/Min<T> .. SetAtomicNone): GM writes of MTE3 and FIX combine with GM.
    int atomic_op = 0;  // 0 none, 1 add, 2 max, 3 min
    int atomic_type = 0;  // type_code<T>()
};

constexpr size_t GM_GRANULE = 2;
struct GmRange { uint8_t* base; size_t bytes; std::vector<Granule> shadow; std::string name; };

struct World {
    std::recursive_mutex mu;
    std::condition_variable_any cv;
    std::vector<GmRange> gm;
    std::vector<Core*> cores;
    int blocked = 0, running = 0;
    int kernel_type = 0;
};
inline World& world() { static World w; return w; }
inline thread_local Core* tls_core = nullptr;
inline Core& core() {
    if (!tls_core) fail("error", "an AscendC call outside a kernel launch");
    return *tls_core;
}
inline void declare_kernel_type(int t) {
    Core& c = core();
    if (c.kernel_type != t) fail("error", fmt("kernel declares type %d but was launched as %d", t, c.kernel_type));
}

inline int clock_id(const Core& c, int pipe) { return c.id * NPIPES + pipe; }
inline std::string who(int clock) {
    World& w = world();
    int ci = clock / NPIPES;
    return fmt("%s pipe %s", ci < int(w.cores.size()) ? w.cores[ci]->label.c_str() : "?", pipe_name(clock % NPIPES));
}

// One operation on `pipe`: its number on the pipe. A pipe's clock holds what it knows to have completed,
// its own entry included (advanced by PipeBarrier, or by a flag whose setter had seen it).
struct Op { Core* c; int pipe; uint32_t n; const char* name; };
inline Op issue(int pipe, const char* name) {
    Core& c = core();
    uint32_t n = ++c.count[pipe];
    size_t need = world().cores.size() * NPIPES;
    if (c.clock[pipe].size() < need) c.clock[pipe].resize(need, 0);
    return Op{&c, pipe, n, name};
}
// What a pipe's later operations are ordered after once its earlier ones complete (a flag's, an event's value).
inline Clock snapshot(Core& c, int pipe) {
    Clock k = c.clock[pipe];
    size_t need = world().cores.size() * NPIPES;
    if (k.size() < need) k.resize(need, 0);
    k[clock_id(c, pipe)] = c.count[pipe];
    return k;
}

inline bool ordered(const Op& op, const Access& a) {
    if (a.clock < 0 || a.n == op.n && a.clock == clock_id(*op.c, op.pipe)) return true;
    int me = clock_id(*op.c, op.pipe);
    const Clock& k = op.c->clock[op.pipe];
    bool known = size_t(a.clock) < k.size() && k[a.clock] >= a.n;
    // Issue is in order within a pipe, but the vector pipe overlaps consecutive instructions: a dependent
    // vector instruction needs PipeBarrier<PIPE_V> in between.
    if (a.clock == me) return op.pipe != PIPE_V || known;
    return known;
}

inline std::string advice(const Op& op, const Access& a) {
    int src = a.clock % NPIPES;
    if (a.clock == clock_id(*op.c, op.pipe)) return "PipeBarrier<PIPE_V>() between them";
    if (a.clock / NPIPES != op.c->id) return "a cross-core flag (CrossCoreSetFlag/CrossCoreWaitFlag)";
    return fmt("SetFlag/WaitFlag<HardEvent::%s_%s>", pipe_name(src), pipe_name(op.pipe));
}

inline void touch(std::vector<Granule>& sh, size_t first, size_t last, const Op& op, bool write,
                  const char* where, size_t byte_off, bool atomic = false) {
    for (size_t g = first; g <= last && g < sh.size(); ++g) {
        Granule& gr = sh[g];
        // Two atomic-mode writes (of any cores) commute: no order between them is needed.
        bool both_atomic = write && atomic && gr.write.atomic;
        if (!both_atomic && !ordered(op, gr.write))
            fail("pipe hazard", fmt("%s: %s %s %s+%zu (granule %zu), last written by %s '%s' (#%u), with no "
                                    "synchronisation between them: need %s", who(clock_id(*op.c, op.pipe)).c_str(),
                                    op.name, write ? "writes" : "reads", where, byte_off, g, who(gr.write.clock).c_str(),
                                    gr.write.op, gr.write.n, advice(op, gr.write).c_str()));
        int me = clock_id(*op.c, op.pipe);
        if (write) {
            for (const Access& r : gr.reads)
                if (r.clock != me && r.clock >= 0 && !ordered(op, r))
                    fail("pipe hazard", fmt("%s: %s overwrites %s+%zu, still being read by %s '%s' (#%u): need %s",
                                            who(me).c_str(), op.name, where, byte_off, who(r.clock).c_str(), r.op, r.n,
                                            advice(op, r).c_str()));
            gr.write = Access{me, op.n, op.name, atomic};
            gr.reads.clear();
        } else {
            bool found = false;
            for (Access& r : gr.reads)
                if (r.clock == me) { r = Access{me, op.n, op.name}; found = true; }
            if (!found) gr.reads.push_back(Access{me, op.n, op.name});
        }
    }
}

inline void touch_local(Mem m, uint32_t off, size_t bytes, const Op& op, bool write) {
    if (bytes == 0) return;
    Core& c = *op.c;
    if (size_t(off) + bytes > MEM_BYTES[m])
        fail("error", fmt("%s: access %s[%u, +%zu) past the end of %s (%u bytes)", op.name, mem_name(m), off, bytes,
                          mem_name(m), MEM_BYTES[m]));
    touch(c.shadow[m], off / 32, (off + bytes - 1) / 32, op, write, mem_name(m), off);
}

inline void touch_gm(const void* p, size_t bytes, const Op& op, bool write, bool atomic = false) {
    if (bytes == 0) return;
    World& w = world();
    std::lock_guard<std::recursive_mutex> lock(w.mu);
    auto* b = static_cast<const uint8_t*>(p);
    for (GmRange& r : w.gm) {
        if (b >= r.base && b + bytes <= r.base + r.bytes) {
            // Global memory is shadowed per 2 bytes: cores may write neighbouring elements of one 32-byte
            // block (ragged tiles), which is not a race.
            size_t off = size_t(b - r.base);
            touch(r.shadow, off / GM_GRANULE, (off + bytes - 1) / GM_GRANULE, op, write, ("GM " + r.name).c_str(), off,
                  atomic);
            return;
        }
    }
    fail("error", fmt("%s: %s %zu bytes of global memory outside every tensor the kernel was given", op.name,
                      write ? "writes" : "reads", bytes));
}

// The element types the atomic mode distinguishes (0: another type).
template <typename T> constexpr int type_code() {
    return std::is_same<T, half>::value ? 1 : std::is_same<T, float>::value ? 2 : std::is_same<T, int16_t>::value ? 3
         : std::is_same<T, int32_t>::value ? 4 : std::is_same<T, int8_t>::value ? 5
         : std::is_same<T, bfloat16_t>::value ? 6 : 0;
}

// GM writes by MTE3 / FIX: plain, or combined with what is there in the core's atomic mode (whose type must be
// the written type: the hardware would combine the bits as another type).
inline bool atomic_on(const Op& op) { return op.c->atomic_op != 0; }
template <typename T> inline void gm_write(T* dst, const T* src, size_t n, const Op& op) {
    Core& c = *op.c;
    if (!c.atomic_op) { std::memcpy(static_cast<void*>(dst), src, n * sizeof(T)); return; }
    if (c.atomic_type != type_code<T>())
        fail("error", fmt("%s: writes %zu-byte elements in an atomic mode set for another type", op.name, sizeof(T)));
    std::lock_guard<std::recursive_mutex> lock(world().mu);  // the AIVs of a mixed group run as threads
    for (size_t i = 0; i < n; ++i) {
        float a = float(dst[i]), b = float(src[i]);
        if (std::is_integral<T>::value) {
            int64_t x = int64_t(dst[i]), y = int64_t(src[i]);
            dst[i] = T(c.atomic_op == 1 ? x + y : c.atomic_op == 2 ? std::max(x, y) : std::min(x, y));
        } else {
            dst[i] = T(c.atomic_op == 1 ? a + b : c.atomic_op == 2 ? std::max(a, b) : std::min(a, b));
        }
    }
}

// A pipe waits for what `snap` has seen (a flag, a queue event, a barrier).
inline void wait_on(Core& c, int pipe, const Clock& snap) { join(c.clock[pipe], snap); }

}  // namespace model

// ---------------------------------------------------------------- tensors

template <typename T> class GlobalTensor {
public:
    T* ptr = nullptr;
    uint64_t size_ = 0;
    void SetGlobalBuffer(__gm__ T* p, uint64_t n = 0) { ptr = p; size_ = n; }
    GlobalTensor operator[](uint64_t off) const { GlobalTensor g; g.ptr = ptr + off; g.size_ = size_ > off ? size_ - off : 0; return g; }
    T GetValue(uint64_t i) const {
        model::Op op = model::issue(PIPE_S, "GlobalTensor::GetValue");
        model::touch_gm(ptr + i, sizeof(T), op, false);
        return ptr[i];
    }
    void SetValue(uint64_t i, T v) {
        model::Op op = model::issue(PIPE_S, "GlobalTensor::SetValue");
        model::touch_gm(ptr + i, sizeof(T), op, true);
        ptr[i] = v;
    }
    __gm__ T* GetPhyAddr() const { return ptr; }
};

template <typename T> class LocalTensor {
public:
    model::Core* c = nullptr;
    TPosition pos = TPosition::VECCALC;
    uint32_t off = 0;   // byte offset in its memory
    uint32_t count = 0; // elements
    model::Mem mem() const { return model::mem_of(pos); }
    T* data() const { return reinterpret_cast<T*>(c->mem[mem()].data() + off); }
    LocalTensor operator[](uint32_t i) const {
        if (i > count) model::fail("error", model::fmt("LocalTensor[%u] past its %u elements", i, count));
        LocalTensor t = *this;
        t.off += i * sizeof(T);
        t.count -= i;
        return t;
    }
    uint32_t GetSize() const { return count; }
    template <typename U> LocalTensor<U> ReinterpretCast() const {
        LocalTensor<U> t;
        t.c = c; t.pos = pos; t.off = off; t.count = uint32_t(uint64_t(count) * sizeof(T) / sizeof(U));
        return t;
    }
    T GetValue(uint32_t i) const {
        model::Op op = model::issue(PIPE_S, "LocalTensor::GetValue");
        model::touch_local(mem(), off + i * sizeof(T), sizeof(T), op, false);
        return data()[i];
    }
    void SetValue(uint32_t i, T v) const {
        model::Op op = model::issue(PIPE_S, "LocalTensor::SetValue");
        model::touch_local(mem(), off + i * sizeof(T), sizeof(T), op, true);
        data()[i] = v;
    }
};

// ---------------------------------------------------------------- event ids, flags

namespace model {
constexpr int QUE_MAX_EVENT = 8;
// The lowest id of `e` no queue and no AllocEventID holds (CANN's FetchEventID: sff0 of the pool).
inline int lowest_free_event(const Core& c, HardEvent e) {
    for (int i = 0; i < QUE_MAX_EVENT; ++i)
        if (!(c.events_taken[int(e)] >> i & 1)) return i;
    return QUE_MAX_EVENT;
}
inline int take_event(Core& c, HardEvent e, const char* by) {
    int id = lowest_free_event(c, e);
    if (id == QUE_MAX_EVENT)
        fail("event ids", fmt("%s: every one of the 8 %s event ids is held (by queue buffers that are enqueued or "
                              "freed and not yet reallocated, or by AllocEventID); CANN aborts here (\"eventID should "
                              "be in range [0, 8)\"): fewer queue buffers of the positions that use %s",
                              by, event_pipes(e).name, event_pipes(e).name));
    c.events_taken[int(e)] |= uint8_t(1u << id);
    return id;
}
inline void give_event(Core& c, HardEvent e, int id) {
    if (id < 0 || id >= QUE_MAX_EVENT) fail("error", fmt("ReleaseEventID<%s>(%d): ids are 0..7", event_pipes(e).name, id));
    c.events_taken[int(e)] &= uint8_t(~(1u << id));
}
inline void set_flag(Core& c, HardEvent e, int32_t id) {
    auto ev = event_pipes(e);
    if (id < 0 || id > 7) fail("error", fmt("SetFlag<%s>(%d): eventID should be in range [0, 8)", ev.name, id));
    auto& f = c.flags[int(e)][id];
    if (f.set) fail("error", fmt("SetFlag<%s>(%d) twice without a WaitFlag", ev.name, id));
    f.set = true;
    f.snap = snapshot(c, ev.src);
}
inline void wait_flag(Core& c, HardEvent e, int32_t id) {
    auto ev = event_pipes(e);
    if (id < 0 || id > 7) fail("error", fmt("WaitFlag<%s>(%d): eventID should be in range [0, 8)", ev.name, id));
    auto& f = c.flags[int(e)][id];
    if (!f.set) fail("error", fmt("WaitFlag<%s>(%d) with no SetFlag before it: the %s pipe would hang",
                                  ev.name, id, pipe_name(ev.dst)));
    f.set = false;
    wait_on(c, ev.dst, f.snap);
}
}  // namespace model

// ---------------------------------------------------------------- TPipe, TQue, TBuf

template <TPosition P, int32_t DEPTH> class TQue;
template <TPosition P> class TBuf;

namespace model {
// 0 free, 1 owned, 2 queued; the event id the buffer holds (-1: none): the EnQue event while queued, the
// FreeTensor event from its release until it is allocated again.
struct QueSlot { uint32_t off = 0; int state = 0; int event = -1; uint64_t order = 0; };
// The events a queue of position p sets: at EnQue (producer -> consumer) and at FreeTensor (consumer -> producer),
// as CANN's GetQueEvt maps them on dav-c220.
inline bool queue_events(TPosition p, HardEvent& enque, HardEvent& free) {
    switch (p) {
    case TPosition::VECIN: enque = HardEvent::MTE2_V; free = HardEvent::V_MTE2; return true;
    case TPosition::VECOUT: enque = HardEvent::V_MTE3; free = HardEvent::MTE3_V; return true;
    case TPosition::A1: case TPosition::B1: case TPosition::C1:
        enque = HardEvent::MTE2_MTE1; free = HardEvent::MTE1_MTE2; return true;
    case TPosition::A2: case TPosition::B2: enque = HardEvent::MTE1_M; free = HardEvent::M_MTE1; return true;
    case TPosition::CO1: enque = HardEvent::M_FIX; free = HardEvent::FIX_M; return true;
    default: return false;
    }
}
inline const char* position_name(TPosition p) {
    static const char* n[] = {"GM", "VECIN", "VECOUT", "VECCALC", "A1", "B1", "C1", "A2", "B2", "CO1", "CO2"};
    return n[int(p)];
}
}  // namespace model

class TPipe {
public:
    uint32_t used[model::NMEM] = {};
    TPipe() {
        model::Core& c = model::core();
        if (c.pipe_made) model::fail("error", "a second TPipe in one kernel");
        c.pipe_made = true;
        current() = this;
        // On the cube core CANN's TPipe takes M_MTE1 ids 0, 1, 2 (the Matmul macro's and the bias load's) and
        // sets them; they are waited for and given back only when the pipe is destroyed.
        if (c.is_aic)
            for (int i = 0; i < 3; ++i) model::set_flag(c, HardEvent::M_MTE1, model::take_event(c, HardEvent::M_MTE1, "TPipe"));
    }
    static TPipe*& current() { static thread_local TPipe* p = nullptr; return p; }
    uint32_t place(TPosition pos, uint32_t bytes, const char* what) {
        model::Mem m = model::mem_of(pos);
        uint32_t a = model::MEM_ALIGN[m];
        uint32_t start = (used[m] + a - 1) / a * a;
        if (uint64_t(start) + bytes > model::MEM_BYTES[m])
            model::fail("capacity", model::fmt("InitBuffer(%s): %s needs %llu bytes > %u", what, model::mem_name(m),
                                               (unsigned long long)start + bytes, model::MEM_BYTES[m]));
        used[m] = start + bytes;
        return start;
    }
    template <TPosition P, int32_t D> void InitBuffer(TQue<P, D>& q, uint8_t num, uint32_t len);
    template <TPosition P> void InitBuffer(TBuf<P>& b, uint32_t len);
    // The lowest id free of queues and AllocEventID; it stays free (the caller sets and waits it at once).
    event_t FetchEventID(HardEvent e) { return event_t(model::lowest_free_event(model::core(), e)); }
    template <HardEvent E> event_t FetchEventID() { return FetchEventID(E); }
    template <HardEvent E> event_t AllocEventID() { return event_t(model::take_event(model::core(), E, "AllocEventID")); }
    template <HardEvent E> void ReleaseEventID(event_t id) { model::give_event(model::core(), E, id); }
    void Destroy() {}
};
inline TPipe* GetTPipePtr() { return TPipe::current(); }

template <TPosition P, int32_t DEPTH> class TQue {
public:
    std::vector<model::QueSlot> slots;
    uint32_t len = 0, cursor = 0;
    uint64_t order = 0;
    model::Core* c = nullptr;
    HardEvent enque_event = HardEvent::COUNT, free_event = HardEvent::COUNT;
    bool evented = false;
    std::string what(const char* op) const { return model::fmt("TQue<%s>::%s", model::position_name(P), op); }
    // As CANN: the next buffer in turn that is free; it waits for (and gives back) its FreeTensor event.
    template <typename T> LocalTensor<T> AllocTensor() {
        for (size_t tried = 0; tried < slots.size(); ++tried) {
            auto& s = slots[cursor];
            cursor = (cursor + 1) % slots.size();
            if (s.state != 0) continue;
            s.state = 1;
            if (s.event >= 0) {
                model::wait_flag(*c, free_event, s.event);
                model::give_event(*c, free_event, s.event);
                s.event = -1;
            }
            LocalTensor<T> t;
            t.c = c; t.pos = P; t.off = s.off; t.count = len / sizeof(T);
            return t;
        }
        model::fail("error", what("AllocTensor") + " with every buffer of the queue in use (the core would hang)");
    }
    model::QueSlot& slot_of(uint32_t off) {
        for (auto& s : slots) if (s.off == off) return s;
        model::fail("error", "a tensor that does not belong to this queue");
    }
    template <typename T> bool EnQue(const LocalTensor<T>& t) {
        auto& s = slot_of(t.off);
        if (s.state != 1) model::fail("error", what("EnQue") + " of a tensor that was not allocated");
        s.state = 2;
        s.order = ++order;
        if (evented) {
            s.event = model::take_event(*c, enque_event, what("EnQue").c_str());
            model::set_flag(*c, enque_event, s.event);
        }
        return true;
    }
    template <typename T> LocalTensor<T> DeQue() {
        model::QueSlot* best = nullptr;
        for (auto& s : slots) if (s.state == 2 && (!best || s.order < best->order)) best = &s;
        if (!best) model::fail("error", what("DeQue") + " on an empty queue (the core would hang)");
        best->state = 1;
        if (best->event >= 0) {
            model::wait_flag(*c, enque_event, best->event);
            model::give_event(*c, enque_event, best->event);
            best->event = -1;
        }
        LocalTensor<T> t;
        t.c = c; t.pos = P; t.off = best->off; t.count = len / sizeof(T);
        return t;
    }
    template <typename T> void FreeTensor(const LocalTensor<T>& t) {
        auto& s = slot_of(t.off);
        if (s.state == 0) model::fail("error", what("FreeTensor") + " of a free buffer");
        if (s.state == 2) model::fail("error", what("FreeTensor") + " of an enqueued buffer (DeQue it first)");
        s.state = 0;
        if (evented) {
            s.event = model::take_event(*c, free_event, what("FreeTensor").c_str());
            model::set_flag(*c, free_event, s.event);
        }
    }
};

template <TPosition P> class TBuf {
public:
    uint32_t off = 0, len = 0;
    model::Core* c = nullptr;
    template <typename T> LocalTensor<T> Get(uint32_t n = 0) const {
        if (!c) model::fail("error", "TBuf::Get before InitBuffer");
        LocalTensor<T> t;
        t.c = c; t.pos = P; t.off = off; t.count = n ? n : len / sizeof(T);
        if (uint64_t(t.count) * sizeof(T) > len) model::fail("error", "TBuf::Get past the buffer");
        return t;
    }
    template <typename T> LocalTensor<T> GetWithOffset(uint32_t n, uint32_t byteOffset) const {
        if (byteOffset % 32) model::fail("alignment", model::fmt("TBuf::GetWithOffset offset %u is not 32-byte aligned", byteOffset));
        if (uint64_t(byteOffset) + uint64_t(n) * sizeof(T) > len) model::fail("error", "TBuf::GetWithOffset past the buffer");
        LocalTensor<T> t;
        t.c = c; t.pos = P; t.off = off + byteOffset; t.count = n;
        return t;
    }
};

template <TPosition P, int32_t D> void TPipe::InitBuffer(TQue<P, D>& q, uint8_t num, uint32_t len) {
    if (num < 1) model::fail("error", "InitBuffer: a queue needs at least one buffer");
    len = (len + 31) / 32 * 32;
    q.c = &model::core();
    q.evented = model::queue_events(P, q.enque_event, q.free_event);
    q.len = len;
    for (int i = 0; i < num; ++i) {
        model::QueSlot s;
        s.off = place(P, len, "TQue");
        q.slots.push_back(s);
    }
}
template <TPosition P> void TPipe::InitBuffer(TBuf<P>& b, uint32_t len) {
    len = (len + 31) / 32 * 32;
    b.c = &model::core();
    b.len = len;
    b.off = place(P, len, "TBuf");
}

// ---------------------------------------------------------------- synchronisation

template <HardEvent E> inline void SetFlag(int32_t id) { model::set_flag(model::core(), E, id); }
template <HardEvent E> inline void WaitFlag(int32_t id) { model::wait_flag(model::core(), E, id); }
template <pipe_t P> inline void PipeBarrier() {
    model::Core& c = model::core();
    if (P == PIPE_ALL) {
        model::Clock all;
        for (int p = 0; p < model::NPIPES; ++p) model::join(all, model::snapshot(c, p));
        for (int p = 0; p < model::NPIPES; ++p) model::join(c.clock[p], all);
    } else {
        model::join(c.clock[P], model::snapshot(c, P));
    }
}

namespace model {
struct CrossFlags { int pending[16] = {}; Clock snap[16]; };
// Per mixed group: the counters each core waits on. Index 0: the AIC; 1, 2: its AIVs.
struct Group { CrossFlags flags[3]; int aiv_sets[2][16] = {}; Clock aiv_snap[2][16]; };
inline thread_local Group* tls_group = nullptr;
}  // namespace model

namespace model {
// Called with the world lock held, when a core blocks or finishes: if every core still running is
// blocked on a cross-core flag, none of them can ever be woken.
inline void report_deadlock_if_stuck() {
    World& w = world();
    int stuck = 0;  // blocked with nothing pending (a woken core may not have run yet)
    for (Core* other : w.cores)
        if (other->waiting_flag >= 0 && other->waiting_count && *other->waiting_count == 0) stuck++;
    if (w.running == 0 || stuck < w.running) return;
    std::string waits;
    for (Core* other : w.cores)
        if (other->waiting_flag >= 0) waits += fmt(" %s waits for flag %d;", other->label.c_str(), other->waiting_flag);
    fail("deadlock", "every running core waits for a cross-core flag that no core will set:" + waits +
                     " a CrossCoreSetFlag is missing");
}
}  // namespace model

template <uint8_t MODE, pipe_t P> inline void CrossCoreSetFlag(uint16_t flagId) {
    using namespace model;
    Core& c = core();
    if (MODE != 2) fail("error", "CrossCoreSetFlag: tilec's model supports mode 2 (AIC <-> its AIVs) only");
    if (flagId > 10) fail("error", fmt("CrossCoreSetFlag(%u): flag ids are 0..10 on 910B", flagId));
    if (!tls_group) fail("error", "CrossCoreSetFlag outside a mixed (MIX_AIC_1_2) kernel");
    World& w = world();
    std::lock_guard<std::recursive_mutex> lock(w.mu);
    Group& g = *tls_group;
    const Clock snap = snapshot(c, P);
    auto bump = [&](int who, const Clock& s) {
        if (++g.flags[who].pending[flagId] > 15)
            fail("error", fmt("CrossCoreSetFlag(%u): more than 15 pending sets", flagId));
        join(g.flags[who].snap[flagId], s);
    };
    if (c.is_aic) {
        bump(1, snap);
        bump(2, snap);
    } else {
        int v = int(c.sub_block_idx);
        g.aiv_sets[v][flagId]++;
        join(g.aiv_snap[v][flagId], snap);
        if (g.aiv_sets[0][flagId] > 0 && g.aiv_sets[1][flagId] > 0) {  // both AIVs have set: the AIC counter moves
            g.aiv_sets[0][flagId]--;
            g.aiv_sets[1][flagId]--;
            Clock s = g.aiv_snap[0][flagId];
            join(s, g.aiv_snap[1][flagId]);
            bump(0, s);
        }
    }
    w.cv.notify_all();
}

template <uint8_t MODE, pipe_t P> inline void CrossCoreWaitFlag(uint16_t flagId) {
    using namespace model;
    Core& c = core();
    if (flagId > 10) fail("error", fmt("CrossCoreWaitFlag(%u): flag ids are 0..10 on 910B", flagId));
    if (!tls_group) fail("error", "CrossCoreWaitFlag outside a mixed (MIX_AIC_1_2) kernel");
    World& w = world();
    std::unique_lock<std::recursive_mutex> lock(w.mu);
    int me = c.is_aic ? 0 : 1 + int(c.sub_block_idx);
    CrossFlags& f = tls_group->flags[me];
    while (f.pending[flagId] == 0) {
        w.blocked++;
        c.waiting_flag = flagId;
        c.waiting_count = &f.pending[flagId];
        report_deadlock_if_stuck();
        w.cv.wait(lock);
        w.blocked--;
        c.waiting_flag = -1;
        c.waiting_count = nullptr;
    }
    f.pending[flagId]--;
    for (int p = 0; p < NPIPES; ++p) join(c.clock[p], f.snap[flagId]);  // the whole core stalls on the wait
}

inline int64_t GetBlockIdx() { return model::core().block_idx; }
inline int64_t GetBlockNum() { return model::core().block_num; }
inline int64_t GetSubBlockIdx() { return model::core().sub_block_idx; }
inline int64_t GetSubBlockNum() { return model::core().is_aic ? 1 : 2; }

}  // namespace AscendC

#include "kernel_operator_ops.h"
#include "kernel_operator_launch.h"
