// tilec CPU model of AscendC: data movement, vector, cube and fixpipe operations (see kernel_operator.h).
#pragma once

namespace AscendC {
namespace model {

template <typename T> inline double val(T v) { return double(float(v)); }
template <> inline double val<int32_t>(int32_t v) { return double(v); }
template <typename T> inline T from(double v) { return T(float(v)); }
template <> inline int32_t from<int32_t>(double v) { return int32_t(v); }
template <> inline int16_t from<int16_t>(double v) { return int16_t(v); }
template <> inline int8_t from<int8_t>(double v) { return int8_t(v); }
template <> inline uint8_t from<uint8_t>(double v) { return uint8_t(v); }

template <typename T> constexpr bool vector_type =
    std::is_same<T, half>::value || std::is_same<T, float>::value || std::is_same<T, int32_t>::value ||
    std::is_same<T, int16_t>::value;

template <typename T> inline const char* type_name() {
    if (std::is_same<T, half>::value) return "half";
    if (std::is_same<T, float>::value) return "float";
    if (std::is_same<T, bfloat16_t>::value) return "bfloat16_t";
    if (std::is_same<T, int32_t>::value) return "int32_t";
    if (std::is_same<T, int16_t>::value) return "int16_t";
    if (std::is_same<T, int8_t>::value) return "int8_t";
    if (std::is_same<T, uint8_t>::value) return "uint8_t";
    return "?";
}

// The (destination, source) pairs the 910B's Cast has (asc-devkit v8.5.0, impl/basic_api/dav_c220/
// kernel_operator_vec_vconv_impl.h): any other pair does not compile there.
template <typename D, typename S> inline void cast_pair() {
    using std::is_same;
#define TILEC_PAIR(a, b) (is_same<D, a>::value && is_same<S, b>::value)
    bool ok = TILEC_PAIR(half, int32_t) || TILEC_PAIR(half, int8_t) || TILEC_PAIR(half, uint8_t) ||
              TILEC_PAIR(float, int32_t) || TILEC_PAIR(float, half) || TILEC_PAIR(int32_t, half) ||
              TILEC_PAIR(int8_t, half) || TILEC_PAIR(uint8_t, half) || TILEC_PAIR(half, float) ||
              TILEC_PAIR(int32_t, float) || TILEC_PAIR(int16_t, half) || TILEC_PAIR(uint8_t, int16_t) ||
              TILEC_PAIR(int8_t, int16_t) || TILEC_PAIR(half, int16_t) || TILEC_PAIR(float, float) ||
              TILEC_PAIR(bfloat16_t, float) || TILEC_PAIR(float, bfloat16_t) || TILEC_PAIR(int32_t, bfloat16_t) ||
              TILEC_PAIR(int16_t, float) || TILEC_PAIR(float, int16_t) || TILEC_PAIR(int16_t, int32_t);
#undef TILEC_PAIR
    if (!ok) fail("error", fmt("Cast: the 910B has no conversion from %s to %s", type_name<S>(), type_name<D>()));
}
// NaN gives 0 (a tile's padding lanes, never stored, may hold NaN; converting it is undefined in C++, and
// clang's -fsanitize=undefined reports it)
template <typename T> inline double saturate(double x) {
    if (x != x) return 0.0;
    double lo = double(std::numeric_limits<T>::lowest()), hi = double(std::numeric_limits<T>::max());
    return x < lo ? lo : (x > hi ? hi : x);
}

template <typename T> inline void vec_operand(const char* op, const LocalTensor<T>& t, uint64_t elems) {
    if (t.mem() != UB) fail("error", fmt("%s: vector operands live in UB, not %s", op, mem_name(t.mem())));
    if (t.off % 32) fail("alignment", fmt("%s: UB address %u is not 32-byte aligned", op, t.off));
    if (elems > t.count)
        fail("error", fmt("%s: %llu elements but the tensor at UB+%u holds %u", op, (unsigned long long)elems, t.off,
                          t.count));
}
template <typename T> inline void vec_type(const char* op) {
    if (!vector_type<T>) fail("error", fmt("%s: the 910B vector unit has no %s arithmetic (Cast to float first)", op,
                                           type_name<T>()));
}
inline void check_count(const char* op, int64_t count) {
    if (count < 0) fail("error", fmt("%s: negative count %lld", op, (long long)count));
}

// Count form: dst[i] = f(srcs[i]...) over `count` contiguous elements.
template <typename T, typename F>
inline void map_count(const char* name, const LocalTensor<T>& dst, std::initializer_list<const LocalTensor<T>*> srcs,
                      int64_t count, F f) {
    vec_type<T>(name);
    check_count(name, count);
    vec_operand(name, dst, count);
    for (auto* s : srcs) vec_operand(name, *s, count);
    Op op = issue(PIPE_V, name);
    for (auto* s : srcs) touch_local(UB, s->off, count * sizeof(T), op, false);
    touch_local(UB, dst.off, count * sizeof(T), op, true);
    std::vector<const T*> in;
    for (auto* s : srcs) in.push_back(s->data());
    T* out = dst.data();
    std::vector<double> tmp(count);
    for (int64_t i = 0; i < count; ++i) tmp[i] = f(in, i);
    for (int64_t i = 0; i < count; ++i) out[i] = from<T>(tmp[i]);
}

// Level-0 form: `repeat` repeats of up to 256 bytes; element e of repeat r sits at
// r*repStride*32 + (e / perBlock)*blkStride*32 + (e % perBlock)*sizeof(T) bytes.
inline uint32_t l0_addr(uint32_t r, uint32_t e, uint32_t rep, uint32_t blk, uint32_t elem) {
    uint32_t per_block = 32 / elem;
    return r * rep * 32 + (e / per_block) * blk * 32 + (e % per_block) * elem;
}
template <typename T> inline void l0_check(const char* name, uint64_t mask, uint8_t repeat) {
    vec_type<T>(name);
    if (mask == 0 || mask > 256 / sizeof(T))
        fail("error", fmt("%s: mask %llu outside 1..%zu for %s", name, (unsigned long long)mask, 256 / sizeof(T),
                          type_name<T>()));
    (void)repeat;
}
template <typename T> inline void l0_range(const char* name, const LocalTensor<T>& t, uint32_t last_byte) {
    if (t.mem() != UB) fail("error", fmt("%s: vector operands live in UB", name));
    if (t.off % 32) fail("alignment", fmt("%s: UB address %u is not 32-byte aligned", name, t.off));
    if (last_byte > t.count * sizeof(T))
        fail("error", fmt("%s: the repeats reach byte %u of a %zu-byte tensor", name, last_byte, t.count * sizeof(T)));
}

}  // namespace model

// ---------------------------------------------------------------- vector: element-wise

#define TILEC_MODEL_BINARY(NAME, EXPR)                                                                          \
    template <typename T>                                                                                        \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,              \
                     const int32_t& count) {                                                                    \
        model::map_count(#NAME, dst, {&a, &b}, count, [](const std::vector<const T*>& s, int64_t i) {           \
            double x = model::val(s[0][i]), y = model::val(s[1][i]);                                             \
            return double(EXPR);                                                                                 \
        });                                                                                                      \
    }                                                                                                            \
    template <typename T>                                                                                        \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, uint64_t mask, \
                     uint8_t repeat, const BinaryRepeatParams& p) {                                             \
        const char* name = #NAME " (level 0)";                                                                 \
        model::l0_check<T>(name, mask, repeat);                                                                  \
        uint32_t es = sizeof(T);                                                                                 \
        model::Op op = model::issue(PIPE_V, name);                                                              \
        std::vector<std::pair<uint32_t, double>> out;                                                            \
        for (uint32_t r = 0; r < repeat; ++r)                                                                    \
            for (uint32_t e = 0; e < mask; ++e) {                                                                \
                uint32_t ia = model::l0_addr(r, e, p.src0RepStride, p.src0BlkStride, es);                       \
                uint32_t ib = model::l0_addr(r, e, p.src1RepStride, p.src1BlkStride, es);                       \
                uint32_t id = model::l0_addr(r, e, p.dstRepStride, p.dstBlkStride, es);                         \
                model::l0_range(name, a, ia + es);                                                              \
                model::l0_range(name, b, ib + es);                                                              \
                model::l0_range(name, dst, id + es);                                                            \
                model::touch_local(model::UB, a.off + ia, es, op, false);                                       \
                model::touch_local(model::UB, b.off + ib, es, op, false);                                       \
                double x = model::val(a.data()[ia / es]), y = model::val(b.data()[ib / es]);                     \
                out.push_back({id, double(EXPR)});                                                               \
            }                                                                                                    \
        for (auto& o : out) {                                                                                    \
            model::touch_local(model::UB, dst.off + o.first, es, op, true);                                     \
            dst.data()[o.first / es] = model::from<T>(o.second);                                                 \
        }                                                                                                        \
    }

TILEC_MODEL_BINARY(Add, x + y)
TILEC_MODEL_BINARY(Sub, x - y)
TILEC_MODEL_BINARY(Mul, x* y)
TILEC_MODEL_BINARY(Div, x / y)
TILEC_MODEL_BINARY(Max, std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y))
TILEC_MODEL_BINARY(Min, std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y))
#undef TILEC_MODEL_BINARY

// And/Or: bitwise, on int16_t/uint16_t only (asc-devkit's dav_c220 AndImpl/OrImpl), count form.
#define TILEC_MODEL_BITWISE(NAME, OP)                                                                           \
    template <typename T>                                                                                        \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,                \
                     const int32_t& count) {                                                                     \
        if (!std::is_same<T, int16_t>::value && !std::is_same<T, uint16_t>::value)                               \
            model::fail("error", model::fmt("%s: the 910B has it for int16_t and uint16_t only", #NAME));        \
        model::map_count(#NAME, dst, {&a, &b}, count, [](const std::vector<const T*>& s, int64_t i) {            \
            return double(T(s[0][i] OP s[1][i]));                                                                \
        });                                                                                                      \
    }
TILEC_MODEL_BITWISE(And, &)
TILEC_MODEL_BITWISE(Or, |)
#undef TILEC_MODEL_BITWISE

#define TILEC_MODEL_SCALAR(NAME, EXPR)                                                                          \
    template <typename T>                                                                                        \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& scalar, const int32_t& count) { \
        double y = model::val(scalar);                                                                           \
        model::map_count(#NAME, dst, {&a}, count, [y](const std::vector<const T*>& s, int64_t i) {              \
            double x = model::val(s[0][i]);                                                                      \
            return double(EXPR);                                                                                 \
        });                                                                                                      \
    }                                                                                                            \
    template <typename T>                                                                                        \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& scalar, uint64_t mask,       \
                     uint8_t repeat, const UnaryRepeatParams& p) {                                              \
        const char* name = #NAME " (level 0)";                                                                 \
        model::l0_check<T>(name, mask, repeat);                                                                  \
        uint32_t es = sizeof(T);                                                                                 \
        double y = model::val(scalar);                                                                           \
        model::Op op = model::issue(PIPE_V, name);                                                              \
        std::vector<std::pair<uint32_t, double>> out;                                                            \
        for (uint32_t r = 0; r < repeat; ++r)                                                                    \
            for (uint32_t e = 0; e < mask; ++e) {                                                                \
                uint32_t ia = model::l0_addr(r, e, p.srcRepStride, p.srcBlkStride, es);                         \
                uint32_t id = model::l0_addr(r, e, p.dstRepStride, p.dstBlkStride, es);                         \
                model::l0_range(name, a, ia + es);                                                              \
                model::l0_range(name, dst, id + es);                                                            \
                model::touch_local(model::UB, a.off + ia, es, op, false);                                       \
                double x = model::val(a.data()[ia / es]);                                                        \
                out.push_back({id, double(EXPR)});                                                               \
            }                                                                                                    \
        for (auto& o : out) {                                                                                    \
            model::touch_local(model::UB, dst.off + o.first, es, op, true);                                     \
            dst.data()[o.first / es] = model::from<T>(o.second);                                                 \
        }                                                                                                        \
    }

TILEC_MODEL_SCALAR(Adds, x + y)
TILEC_MODEL_SCALAR(Muls, x* y)
TILEC_MODEL_SCALAR(Maxs, std::isnan(x) ? NAN : std::max(x, y))
TILEC_MODEL_SCALAR(Mins, std::isnan(x) ? NAN : std::min(x, y))
#undef TILEC_MODEL_SCALAR

#define TILEC_MODEL_UNARY(NAME, EXPR)                                                                           \
    template <typename T>                                                                                        \
    inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const int32_t& count) {               \
        model::map_count(#NAME, dst, {&a}, count, [](const std::vector<const T*>& s, int64_t i) {               \
            double x = model::val(s[0][i]);                                                                      \
            return double(EXPR);                                                                                 \
        });                                                                                                      \
    }

TILEC_MODEL_UNARY(Exp, std::exp(float(x)))
TILEC_MODEL_UNARY(Ln, std::log(float(x)))
TILEC_MODEL_UNARY(Abs, std::fabs(x))
TILEC_MODEL_UNARY(Sqrt, std::sqrt(float(x)))
TILEC_MODEL_UNARY(Rsqrt, 1.0f / std::sqrt(float(x)))
TILEC_MODEL_UNARY(Reciprocal, 1.0f / float(x))
TILEC_MODEL_UNARY(Relu, std::isnan(x) ? x : std::max(x, 0.0))
#undef TILEC_MODEL_UNARY

template <typename T> inline void Duplicate(const LocalTensor<T>& dst, const T& scalar, const int32_t& count) {
    double v = model::val(scalar);
    model::map_count("Duplicate", dst, {}, count, [v](const std::vector<const T*>&, int64_t) { return v; });
}

template <typename T> inline void CreateVecIndex(const LocalTensor<T>& dst, const T& first, uint32_t count) {
    double v = model::val(first);
    model::map_count("CreateVecIndex", dst, {}, count,
                     [v](const std::vector<const T*>&, int64_t i) { return v + double(i); });
}

template <typename D, typename S>
inline void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t count) {
    const char* name = "Cast";
    model::vec_operand(name, dst, count);
    model::vec_operand(name, src, count);
    model::cast_pair<D, S>();
    bool f2i = std::is_integral<D>::value;
    bool f2f = std::is_same<D, float>::value && std::is_same<S, float>::value;  // rounds to an integral float
    bool narrow = sizeof(D) < sizeof(S) && !f2i;
    if (narrow && mode != RoundMode::CAST_RINT && mode != RoundMode::CAST_NONE && mode != RoundMode::CAST_ROUND)
        model::fail("error", "Cast to a narrower float: use CAST_RINT (nearest even) in tilec's model");
    model::Op op = model::issue(PIPE_V, name);
    model::touch_local(model::UB, src.off, count * sizeof(S), op, false);
    model::touch_local(model::UB, dst.off, count * sizeof(D), op, true);
    std::vector<double> tmp(count);
    for (uint32_t i = 0; i < count; ++i) tmp[i] = model::val(src.data()[i]);
    for (uint32_t i = 0; i < count; ++i) {
        double x = tmp[i];
        if (f2i || f2f) {
            switch (mode) {
            case RoundMode::CAST_FLOOR: x = std::floor(x); break;
            case RoundMode::CAST_CEIL: x = std::ceil(x); break;
            case RoundMode::CAST_TRUNC: x = std::trunc(x); break;
            case RoundMode::CAST_ROUND: x = std::round(x); break;
            default: x = std::nearbyint(x);
            }
        }
        if (f2i) x = model::saturate<D>(x);  // the hardware's integer conversions saturate
        dst.data()[i] = model::from<D>(x);
    }
}

// ---------------------------------------------------------------- vector: compare, select, gather

namespace model {
inline bool compare(CMPMODE m, double a, double b) {
    switch (m) {
    case CMPMODE::LT: return a < b;
    case CMPMODE::GT: return a > b;
    case CMPMODE::EQ: return a == b;
    case CMPMODE::LE: return a <= b;
    case CMPMODE::GE: return a >= b;
    default: return a != b;
    }
}
template <typename T>
inline void compare_into(const char* name, const LocalTensor<uint8_t>& dst, const LocalTensor<T>& a,
                         const LocalTensor<T>* b, double scalar, CMPMODE mode, uint32_t count) {
    vec_type<T>(name);
    if ((count * sizeof(T)) % 256)
        fail("error", fmt("%s: count %u * %zu bytes is not a multiple of 256", name, count, sizeof(T)));
    vec_operand(name, a, count);
    if (b) vec_operand(name, *b, count);
    vec_operand(name, dst, (count + 7) / 8);
    Op op = issue(PIPE_V, name);
    touch_local(UB, a.off, count * sizeof(T), op, false);
    if (b) touch_local(UB, b->off, count * sizeof(T), op, false);
    touch_local(UB, dst.off, (count + 7) / 8, op, true);
    std::vector<uint8_t> bits((count + 7) / 8, 0);
    for (uint32_t i = 0; i < count; ++i)
        if (compare(mode, val(a.data()[i]), b ? val(b->data()[i]) : scalar)) bits[i / 8] |= uint8_t(1u << (i % 8));
    std::memcpy(dst.data(), bits.data(), bits.size());
}
}  // namespace model

template <typename T>
inline void CompareScalar(const LocalTensor<uint8_t>& dst, const LocalTensor<T>& src, const T scalar, CMPMODE mode,
                          uint32_t count) {
    model::compare_into("CompareScalar", dst, src, (const LocalTensor<T>*)nullptr, model::val(scalar), mode, count);
}
template <typename T>
inline void Compare(const LocalTensor<uint8_t>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, CMPMODE mode,
                    uint32_t count) {
    model::compare_into("Compare", dst, a, &b, 0.0, mode, count);
}

namespace model {
template <typename T>
inline void select_into(const LocalTensor<T>& dst, const LocalTensor<uint8_t>& mask, const LocalTensor<T>& a,
                        const LocalTensor<T>* b, double scalar, uint32_t count) {
    const char* name = "Select";
    vec_type<T>(name);
    vec_operand(name, dst, count);
    vec_operand(name, a, count);
    if (b) vec_operand(name, *b, count);
    vec_operand(name, mask, (count + 7) / 8);
    Op op = issue(PIPE_V, name);
    touch_local(UB, mask.off, (count + 7) / 8, op, false);
    touch_local(UB, a.off, count * sizeof(T), op, false);
    if (b) touch_local(UB, b->off, count * sizeof(T), op, false);
    touch_local(UB, dst.off, count * sizeof(T), op, true);
    std::vector<T> out(count);
    for (uint32_t i = 0; i < count; ++i)
        out[i] = (mask.data()[i / 8] >> (i % 8)) & 1 ? a.data()[i] : (b ? b->data()[i] : from<T>(scalar));
    std::copy(out.begin(), out.end(), dst.data());
}
}  // namespace model

template <typename T>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<uint8_t>& mask, const LocalTensor<T>& a, T scalar,
                   SELMODE mode, uint32_t count) {
    if (mode != SELMODE::VSEL_TENSOR_SCALAR_MODE) model::fail("error", "Select with a scalar needs VSEL_TENSOR_SCALAR_MODE");
    model::select_into(dst, mask, a, (const LocalTensor<T>*)nullptr, model::val(scalar), count);
}
template <typename T>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<uint8_t>& mask, const LocalTensor<T>& a,
                   const LocalTensor<T>& b, SELMODE mode, uint32_t count) {
    if (mode != SELMODE::VSEL_TENSOR_TENSOR_MODE) model::fail("error", "Select of two tensors needs VSEL_TENSOR_TENSOR_MODE");
    model::select_into(dst, mask, a, &b, 0.0, count);
}

// dst[i] = the element at byte srcBaseAddr + offsets[i] of src.
template <typename T>
inline void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<uint32_t>& offsets,
                   const uint32_t srcBaseAddr, const uint32_t count) {
    const char* name = "Gather";
    model::vec_operand(name, dst, count);
    model::vec_operand(name, offsets, count);
    if (src.mem() != model::UB) model::fail("error", "Gather: the source lives in UB");
    model::Op op = model::issue(PIPE_V, name);
    model::touch_local(model::UB, offsets.off, count * 4, op, false);
    std::vector<T> out(count);
    for (uint32_t i = 0; i < count; ++i) {
        uint32_t b = srcBaseAddr + offsets.data()[i];
        if (b % sizeof(T) || b + sizeof(T) > src.count * sizeof(T))
            model::fail("error", model::fmt("Gather: offset %u outside the %zu-byte source (or misaligned)", b,
                                            src.count * sizeof(T)));
        model::touch_local(model::UB, src.off + b, sizeof(T), op, false);
        out[i] = src.data()[b / sizeof(T)];
    }
    model::touch_local(model::UB, dst.off, count * sizeof(T), op, true);
    std::copy(out.begin(), out.end(), dst.data());
}

// ---------------------------------------------------------------- vector: reductions, broadcast

namespace model {
template <typename T, typename F>
inline void whole_reduce(const char* name, const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t mask,
                         int32_t repeat, int32_t dstRep, int32_t srcBlk, int32_t srcRep, int stride_mul, F combine) {
    l0_check<T>(name, uint64_t(mask), uint8_t(repeat));
    if (repeat < 1 || repeat > 255) fail("error", fmt("%s: repeatTime %d outside 1..255", name, repeat));
    uint32_t es = sizeof(T);
    Op op = issue(PIPE_V, name);
    std::vector<std::pair<uint32_t, double>> out;
    for (int32_t r = 0; r < repeat; ++r) {
        std::vector<double> v;
        for (int32_t e = 0; e < mask; ++e) {
            uint32_t a = l0_addr(r, e, srcRep, srcBlk, es);
            l0_range(name, src, a + es);
            touch_local(UB, src.off + a, es, op, false);
            v.push_back(val(src.data()[a / es]));
        }
        while (v.size() > 1) {  // pairwise tree, as the hardware adds
            std::vector<double> h;
            for (size_t i = 0; i + 1 < v.size(); i += 2) h.push_back(float(combine(v[i], v[i + 1])));
            if (v.size() % 2) h.push_back(v.back());
            v.swap(h);
        }
        out.push_back({uint32_t(r * dstRep * stride_mul) * es, v[0]});
    }
    for (auto& o : out) {
        l0_range(name, dst, o.first + es);
        touch_local(UB, dst.off + o.first, es, op, true);
        dst.data()[o.first / es] = from<T>(o.second);
    }
}
}  // namespace model

template <typename T>
inline void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride) {
    model::whole_reduce("WholeReduceSum", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, 1,
                        [](double a, double b) { return a + b; });
}
template <typename T>
inline void WholeReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
    if (order != ReduceOrder::ORDER_ONLY_VALUE)
        model::fail("error", "WholeReduceMax: tilec's model implements ORDER_ONLY_VALUE (the default writes "
                             "(value, index) pairs)");
    model::whole_reduce("WholeReduceMax", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, 1,
                        [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); });
}
template <typename T>
inline void WholeReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
    if (order != ReduceOrder::ORDER_ONLY_VALUE)
        model::fail("error", "WholeReduceMin: tilec's model implements ORDER_ONLY_VALUE");
    model::whole_reduce("WholeReduceMin", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, 1,
                        [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); });
}

// Each repeat takes 8 elements of src; element i fills the whole 32-byte block i of dst.
template <typename T>
inline void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint8_t repeatTime,
                 const BrcbRepeatParams& p) {
    const char* name = "Brcb";
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb takes 16- or 32-bit elements");
    model::vec_operand(name, src, uint64_t(repeatTime) * 8);
    if (dst.off % 32) model::fail("alignment", "Brcb: destination not 32-byte aligned");
    model::Op op = model::issue(PIPE_V, name);
    model::touch_local(model::UB, src.off, repeatTime * 8 * sizeof(T), op, false);
    uint32_t per_block = 32 / sizeof(T);
    std::vector<T> in(src.data(), src.data() + repeatTime * 8);
    for (uint32_t r = 0; r < repeatTime; ++r)
        for (uint32_t i = 0; i < 8; ++i) {
            uint32_t b = r * p.dstRepStride * 32 + i * p.dstBlkStride * 32;
            model::l0_range(name, dst, b + 32);
            model::touch_local(model::UB, dst.off + b, 32, op, true);
            for (uint32_t e = 0; e < per_block; ++e) dst.data()[b / sizeof(T) + e] = in[r * 8 + i];
        }
}

// ---------------------------------------------------------------- data movement

namespace model {
// GM -> local is MTE2; local -> GM is MTE3.
inline void poison(void* p, size_t bytes) { std::memset(p, 0xff, bytes); }  // NaN in half, bf16 and float
}  // namespace model

template <typename T> inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count) {
    uint64_t bytes = uint64_t(count) * sizeof(T);
    if (bytes % 32)
        std::fprintf(stderr, "ascend-model: warning: DataCopy of %llu bytes is not a multiple of 32: the hardware "
                     "floors it to %llu (use DataCopyPad)\n", (unsigned long long)bytes, (unsigned long long)(bytes / 32 * 32));
    bytes = bytes / 32 * 32;
    if (dst.off % 32) model::fail("alignment", "DataCopy: local address not 32-byte aligned");
    if (bytes > uint64_t(dst.count) * sizeof(T)) model::fail("error", "DataCopy: past the local tensor");
    model::Op op = model::issue(PIPE_MTE2, "DataCopy GM->local");
    model::touch_gm(src.ptr, bytes, op, false);
    model::touch_local(dst.mem(), dst.off, bytes, op, true);
    std::memcpy(dst.data(), src.ptr, bytes);
}
template <typename T> inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
    uint64_t bytes = uint64_t(count) * sizeof(T);
    if (bytes % 32)
        std::fprintf(stderr, "ascend-model: warning: DataCopy of %llu bytes is not a multiple of 32: the hardware "
                     "floors it to %llu (use DataCopyPad)\n", (unsigned long long)bytes, (unsigned long long)(bytes / 32 * 32));
    bytes = bytes / 32 * 32;
    if (src.off % 32) model::fail("alignment", "DataCopy: local address not 32-byte aligned");
    model::Op op = model::issue(PIPE_MTE3, "DataCopy local->GM");
    model::touch_local(src.mem(), src.off, bytes, op, false);
    model::touch_gm(dst.ptr, bytes, op, true, model::atomic_on(op));
    model::gm_write(dst.ptr, src.data(), bytes / sizeof(T), op);
}

// Rows of blockLen bytes: GM rows blockLen + srcStride bytes apart; UB rows padded to 32 bytes, plus
// dstStride 32-byte blocks. The pad of each UB row is garbage (NaN here) unless isPad, which writes
// rightPadding elements of paddingValue after the data.
template <typename T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                        const DataCopyPadExtParams<T>& pad) {
    const char* name = "DataCopyPad GM->UB";
    if (p.blockCount < 1 || p.blockCount > 4095) model::fail("error", model::fmt("%s: blockCount %u outside 1..4095", name, p.blockCount));
    if (p.blockLen < 1 || p.blockLen >= (1u << 21)) model::fail("error", model::fmt("%s: blockLen %u outside 1..2^21-1", name, p.blockLen));
    if (p.blockLen % sizeof(T)) model::fail("error", model::fmt("%s: blockLen %u is not whole elements", name, p.blockLen));
    if (dst.mem() != model::UB) model::fail("error", model::fmt("%s: destination must be UB", name));
    if (dst.off % 32) model::fail("alignment", model::fmt("%s: UB address %u not 32-byte aligned", name, dst.off));
    if (pad.leftPadding) model::fail("error", model::fmt("%s: tilec's model does not implement leftPadding", name));
    if (pad.rightPadding * sizeof(T) > 32) model::fail("error", model::fmt("%s: rightPadding over 32 bytes", name));
    uint32_t row = (p.blockLen + 31) / 32 * 32;
    uint32_t step = row + p.dstStride * 32;
    if (uint64_t(step) * (p.blockCount - 1) + row > uint64_t(dst.count) * sizeof(T))
        model::fail("error", model::fmt("%s: %u rows of %u bytes do not fit the %zu-byte tensor", name, p.blockCount, step,
                                        dst.count * sizeof(T)));
    model::Op op = model::issue(PIPE_MTE2, name);
    auto* in = reinterpret_cast<const uint8_t*>(src.ptr);
    auto* out = reinterpret_cast<uint8_t*>(dst.data());
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        const uint8_t* s = in + uint64_t(b) * (p.blockLen + p.srcStride);
        model::touch_gm(s, p.blockLen, op, false);
        model::touch_local(model::UB, dst.off + b * step, row, op, true);
        std::memcpy(out + b * step, s, p.blockLen);
        model::poison(out + b * step + p.blockLen, row - p.blockLen);
        if (pad.isPad) {
            T* e = reinterpret_cast<T*>(out + b * step + p.blockLen);
            uint32_t n = std::min<uint32_t>(pad.rightPadding, (row - p.blockLen) / sizeof(T));
            for (uint32_t i = 0; i < n; ++i) e[i] = pad.paddingValue;
        }
    }
}
template <typename T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
    const char* name = "DataCopyPad UB->GM";
    if (p.blockCount < 1 || p.blockCount > 4095) model::fail("error", model::fmt("%s: blockCount %u outside 1..4095", name, p.blockCount));
    if (p.blockLen < 1 || p.blockLen >= (1u << 21)) model::fail("error", model::fmt("%s: blockLen %u outside 1..2^21-1", name, p.blockLen));
    if (src.mem() != model::UB) model::fail("error", model::fmt("%s: source must be UB", name));
    if (src.off % 32) model::fail("alignment", model::fmt("%s: UB address %u not 32-byte aligned", name, src.off));
    uint32_t row = (p.blockLen + 31) / 32 * 32;
    uint32_t step = row + p.srcStride * 32;
    if (uint64_t(step) * (p.blockCount - 1) + p.blockLen > uint64_t(src.count) * sizeof(T))
        model::fail("error", model::fmt("%s: the rows reach past the %zu-byte tensor", name, src.count * sizeof(T)));
    model::Op op = model::issue(PIPE_MTE3, name);
    auto* out = reinterpret_cast<uint8_t*>(dst.ptr);
    auto* in = reinterpret_cast<const uint8_t*>(src.data());
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        uint8_t* d = out + uint64_t(b) * (p.blockLen + p.dstStride);
        model::touch_local(model::UB, src.off + b * step, p.blockLen, op, false);
        model::touch_gm(d, p.blockLen, op, true, model::atomic_on(op));
        model::gm_write(reinterpret_cast<T*>(d), reinterpret_cast<const T*>(in + b * step), p.blockLen / sizeof(T), op);
    }
}

// ---------------------------------------------------------------- atomic mode
// A register of the core, set from the scalar unit; the GM writes of DataCopy/DataCopyPad (MTE3) and Fixpipe (FIX)
// issued while it is set combine with global memory (add, max, min) as the types CANN's SetAtomic* accept.
template <typename T> inline void set_atomic(int op_kind, const char* name) {
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value || std::is_same<T, int16_t>::value ||
                  std::is_same<T, int32_t>::value || std::is_same<T, int8_t>::value ||
                  std::is_same<T, bfloat16_t>::value, "SetAtomic*: half, float, int16_t, int32_t, int8_t, bfloat16_t");
    model::Core& c = model::core();
    model::issue(PIPE_S, name);
    c.atomic_op = op_kind;
    c.atomic_type = model::type_code<T>();
}
template <typename T> inline void SetAtomicAdd() { set_atomic<T>(1, "SetAtomicAdd"); }
template <typename T> inline void SetAtomicMax() { set_atomic<T>(2, "SetAtomicMax"); }
template <typename T> inline void SetAtomicMin() { set_atomic<T>(3, "SetAtomicMin"); }
inline void SetAtomicNone() { model::issue(PIPE_S, "SetAtomicNone"); model::core().atomic_op = 0; }

// ---------------------------------------------------------------- cube: L1, L0A/L0B, Mmad, Fixpipe
//
// Layouts (C0 = 32 bytes of elements: 16 for half/bf16):
//   L1 from Nd2Nz ("NZ"): element (r, c) at (c / C0) * dstNzC0Stride * C0 + r * dstNzNStride * C0 + c % C0;
//   L0A ("zZ"): 16x16 fractals row-major over (m-block, k-block), each fractal row-major;
//   L0B ("nZ"): fractals row-major over (k-block, n-block), each fractal column-major (n major);
//   L0C ("NZ"): fractals column-major over (m-block, n-block): (n-block * M1 + m-block), each row-major.

template <typename T> inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p) {
    const char* name = "DataCopy Nd2Nz GM->L1";
    if (dst.mem() != model::L1) model::fail("error", model::fmt("%s: destination must be L1 (A1/B1)", name));
    if (p.ndNum != 1) model::fail("error", model::fmt("%s: tilec's model implements ndNum = 1", name));
    if (p.nValue > 16384 || p.dValue > 65535 || p.dstNzC0Stride < 1 || p.dstNzNStride < 1)
        model::fail("error", model::fmt("%s: parameter out of range (nValue %u, dValue %u, dstNzC0Stride %u, dstNzNStride %u)",
                                        name, p.nValue, p.dValue, p.dstNzC0Stride, p.dstNzNStride));
    if (p.srcDValue < p.dValue) model::fail("error", model::fmt("%s: srcDValue %u < dValue %u", name, p.srcDValue, p.dValue));
    const uint32_t c0 = 32 / sizeof(T);
    if (p.dstNzC0Stride < p.nValue)
        model::fail("error", model::fmt("%s: dstNzC0Stride %u < nValue %u: column blocks would overlap", name,
                                        p.dstNzC0Stride, p.nValue));
    model::Op op = model::issue(PIPE_MTE2, name);
    for (uint32_t r = 0; r < p.nValue; ++r) {
        model::touch_gm(src.ptr + uint64_t(r) * p.srcDValue, p.dValue * sizeof(T), op, false);
        for (uint32_t c = 0; c < p.dValue; ++c) {
            uint64_t d = uint64_t(c / c0) * p.dstNzC0Stride * c0 + uint64_t(r) * p.dstNzNStride * c0 + c % c0;
            if ((d + 1) > dst.count) model::fail("error", model::fmt("%s: element (%u, %u) lands past the L1 tensor", name, r, c));
            if (c % c0 == 0) model::touch_local(model::L1, dst.off + d * sizeof(T), 32, op, true);
            dst.data()[d] = src.ptr[uint64_t(r) * p.srcDValue + c];
        }
    }
}

template <typename T> inline void InitConstValue(const LocalTensor<T>& dst, const InitConstValueParams<T>& p) {
    const char* name = "InitConstValue";
    if (dst.mem() != model::L1 && dst.mem() != model::L0A && dst.mem() != model::L0B)
        model::fail("error", model::fmt("%s: destination must be L1, L0A or L0B", name));
    uint64_t step = uint64_t(p.blockNum + p.dstGap) * 32, bytes = uint64_t(p.repeatTimes) * step;
    if (bytes > uint64_t(dst.count) * sizeof(T)) model::fail("error", model::fmt("%s: past the tensor", name));
    model::Op op = model::issue(PIPE_MTE2, name);
    for (uint32_t r = 0; r < p.repeatTimes; ++r) {
        model::touch_local(dst.mem(), dst.off + r * step, p.blockNum * 32, op, true);
        T* d = dst.data() + r * step / sizeof(T);
        for (uint32_t i = 0; i < p.blockNum * 32 / sizeof(T); ++i) d[i] = p.initValue;
    }
}

// Each repeat moves one 512-byte fractal: source fractal startIndex + i * srcStride, destination i * (1 + dstGap);
// ifTranspose transposes the 16x16 fractal (16-bit types).
template <typename T> inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p) {
    const char* name = "LoadData";
    bool ok = (dst.pos == TPosition::A2 && (src.pos == TPosition::A1 || src.pos == TPosition::B1)) ||
              (dst.pos == TPosition::B2 && (src.pos == TPosition::B1 || src.pos == TPosition::A1));
    if (!ok) model::fail("error", model::fmt("%s: moves L1 (A1/B1) to L0A/L0B", name));
    if (p.repeatTimes < 1) model::fail("error", model::fmt("%s: repeatTimes must be 1..255", name));
    if (p.ifTranspose && sizeof(T) != 2) model::fail("error", model::fmt("%s: ifTranspose needs 16-bit elements", name));
    if (src.off % 512 && src.mem() != model::L1) model::fail("alignment", model::fmt("%s: source not 512-byte aligned", name));
    if (src.off % 32) model::fail("alignment", model::fmt("%s: L1 source not 32-byte aligned", name));
    if (dst.off % 512) model::fail("alignment", model::fmt("%s: L0 destination not 512-byte aligned", name));
    const uint32_t fe = 512 / sizeof(T);  // elements per fractal
    model::Op op = model::issue(PIPE_MTE1, name);
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        uint64_t s = uint64_t(p.startIndex + i * p.srcStride) * fe, d = uint64_t(i) * (1 + p.dstGap) * fe;
        if (s + fe > src.count) model::fail("error", model::fmt("%s: fractal %u past the L1 tensor", name, p.startIndex + i * p.srcStride));
        if (d + fe > dst.count) model::fail("error", model::fmt("%s: fractal %u past the L0 tensor", name, i));
        model::touch_local(src.mem(), src.off + s * sizeof(T), 512, op, false);
        model::touch_local(dst.mem(), dst.off + d * sizeof(T), 512, op, true);
        const T* in = src.data() + s;
        T* out = dst.data() + d;
        if (p.ifTranspose) {
            for (int r = 0; r < 16; ++r)
                for (int c = 0; c < 16; ++c) out[c * 16 + r] = in[r * 16 + c];
        } else {
            std::memcpy(out, in, 512);
        }
    }
}

template <typename C, typename A, typename B>
inline void Mmad(const LocalTensor<C>& dst, const LocalTensor<A>& a, const LocalTensor<B>& b, const MmadParams& p) {
    const char* name = "Mmad";
    static_assert(std::is_same<C, float>::value, "Mmad: tilec's model accumulates half/bf16 products in float");
    if (dst.pos != TPosition::CO1 || a.pos != TPosition::A2 || b.pos != TPosition::B2)
        model::fail("error", model::fmt("%s: operands must be CO1 (L0C) = A2 (L0A) x B2 (L0B)", name));
    if (p.m > 4095 || p.n > 4095 || p.k > 4095) model::fail("error", model::fmt("%s: m, n, k are at most 4095", name));
    if (p.k % 16) model::fail("error", model::fmt("%s: k = %u is not a multiple of 16 (zero-fill the K tail)", name, p.k));
    if (dst.off % 1024) model::fail("alignment", model::fmt("%s: L0C address %u is not 256-element aligned", name, dst.off));
    uint32_t M1 = (p.m + 15) / 16, N1 = (p.n + 15) / 16, K1 = p.k / 16;
    if (uint64_t(M1) * K1 * 256 > a.count || uint64_t(K1) * N1 * 256 > b.count || uint64_t(M1) * N1 * 256 > dst.count)
        model::fail("error", model::fmt("%s: m %u n %u k %u exceed the operands", name, p.m, p.n, p.k));
    model::Op op = model::issue(PIPE_M, name);
    model::touch_local(model::L0A, a.off, uint64_t(M1) * K1 * 256 * sizeof(A), op, false);
    model::touch_local(model::L0B, b.off, uint64_t(K1) * N1 * 256 * sizeof(B), op, false);
    if (!p.cmatrixInitVal) model::touch_local(model::L0C, dst.off, uint64_t(M1) * N1 * 256 * 4, op, false);
    model::touch_local(model::L0C, dst.off, uint64_t(M1) * N1 * 256 * 4, op, true);
    for (uint32_t m = 0; m < M1 * 16; ++m)
        for (uint32_t n = 0; n < N1 * 16; ++n) {
            float acc = 0;
            for (uint32_t k = 0; k < p.k; ++k) {
                float x = float(a.data()[((m / 16) * K1 + k / 16) * 256 + (m % 16) * 16 + k % 16]);
                float y = float(b.data()[((k / 16) * N1 + n / 16) * 256 + (n % 16) * 16 + k % 16]);
                acc += x * y;
            }
            float& c = dst.data()[((n / 16) * M1 + m / 16) * 256 + (m % 16) * 16 + n % 16];
            c = p.cmatrixInitVal ? acc : c + acc;
        }
}

// L0C (NZ, float) -> GM row-major: element (r, c) from (c / 16) * srcStride * 16 + r * 16 + c % 16, to
// r * dstStride + c, cast by quantPre (F322F16 / F322BF16 / NoQuant for float), relu on request.
template <typename D, typename S, const FixpipeConfig& CFG = CFG_ROW_MAJOR>
inline void Fixpipe(const GlobalTensor<D>& dst, const LocalTensor<S>& src, const FixpipeParamsV220& p) {
    const char* name = "Fixpipe";
    static_assert(std::is_same<S, float>::value, "Fixpipe: tilec's model reads a float L0C");
    if (CFG.format != CO2Layout::ROW_MAJOR) model::fail("error", "Fixpipe: tilec's model implements CFG_ROW_MAJOR");
    if (src.pos != TPosition::CO1) model::fail("error", "Fixpipe: the source is L0C (CO1)");
    bool want_half = std::is_same<D, half>::value, want_bf16 = std::is_same<D, bfloat16_t>::value;
    if ((want_half && p.quantPre != F322F16) || (want_bf16 && p.quantPre != F322BF16) ||
        (std::is_same<D, float>::value && p.quantPre != NoQuant))
        model::fail("error", model::fmt("Fixpipe: quantPre %d does not produce the destination type", int(p.quantPre)));
    if (p.srcStride % 16 || p.srcStride < p.mSize)
        model::fail("error", model::fmt("Fixpipe: srcStride %u must be a multiple of 16 and >= mSize %u", p.srcStride, p.mSize));
    if (p.dstStride < p.nSize) model::fail("error", model::fmt("Fixpipe: dstStride %u < nSize %u", p.dstStride, p.nSize));
    model::Op op = model::issue(PIPE_FIX, name);
    for (uint32_t r = 0; r < p.mSize; ++r) {
        model::touch_gm(dst.ptr + uint64_t(r) * p.dstStride, p.nSize * sizeof(D), op, true, model::atomic_on(op));
        for (uint32_t c = 0; c < p.nSize; ++c) {
            uint64_t s = uint64_t(c / 16) * p.srcStride * 16 + r * 16 + c % 16;
            if (s >= src.count) model::fail("error", "Fixpipe: reads past the L0C tensor");
            if (c % 8 == 0) model::touch_local(model::L0C, src.off + s * 4, 32, op, false);
            float v = src.data()[s];
            if (p.reluEn && v < 0) v = 0;
            D out = D(v);
            model::gm_write(dst.ptr + uint64_t(r) * p.dstStride + c, &out, 1, op);
        }
    }
}

}  // namespace AscendC
