// tilec CPU model of AscendC: global memory registration and kernel launch (see kernel_operator.h).
//
// A vector-only or cube-only kernel runs its blocks one after another, each on a fresh core (distinct
// clocks, so two blocks touching the same global bytes without ordering is reported as a race). A mixed
// kernel runs each group's AIC and two AIVs as three threads, so cross-core flags block for real. Several
// launches in one process (a multi-launch function through its NAME_launch) run in order, as on one stream.
#pragma once

namespace AscendC {
namespace model {

inline void gm_register(void* p, size_t bytes, const char* name) {
    GmRange r;
    r.base = static_cast<uint8_t*>(p);
    r.bytes = bytes;
    r.shadow.resize(bytes / GM_GRANULE + 1);
    r.name = name;
    world().gm.push_back(std::move(r));
}

inline Core* make_core(int id, bool aic, int64_t block_idx, int64_t block_num, int64_t sub, int kernel_type) {
    Core* c = new Core();
    c->id = id;
    c->is_aic = aic;
    c->block_idx = block_idx;
    c->block_num = block_num;
    c->sub_block_idx = sub;
    c->kernel_type = kernel_type;
    c->label = aic ? fmt("AIC%lld", (long long)block_idx) : fmt("AIV%lld", (long long)block_idx);
    const Mem mems_aiv[] = {UB}, mems_aic[] = {L1, L0A, L0B, L0C};
    auto init = [&](Mem m) {
        c->mem[m].assign(MEM_BYTES[m], 0xff);  // fresh on-chip memory reads as NaN
        c->shadow[m].resize(MEM_BYTES[m] / 32);
    };
    if (aic) for (Mem m : mems_aic) init(m);
    else for (Mem m : mems_aiv) init(m);
    return c;
}

inline void free_core(Core* c) { delete c; }

// Runs `body` as the kernel on `blockDim` blocks of the given kernel type.
inline void launch(int kernel_type, uint32_t blockDim, const std::function<void()>& body) {
    World& w = world();
    if (blockDim < 1 || blockDim > 65535) fail("error", fmt("launch: blockDim %u outside 1..65535", blockDim));
    // Launches on one stream run one after another: what an earlier launch did to global memory is ordered
    // before this one (a multi-launch function's second stage reads what its first wrote), so the shadow starts
    // afresh; the cores (and their clocks) are new.
    for (GmRange& r : w.gm) std::fill(r.shadow.begin(), r.shadow.end(), Granule());
    if (kernel_type != KERNEL_TYPE_MIX_AIC_1_2) {
        bool aic = kernel_type == KERNEL_TYPE_AIC_ONLY;
        std::vector<Core*> cores;
        for (uint32_t b = 0; b < blockDim; ++b) cores.push_back(make_core(int(b), aic, b, blockDim, 0, kernel_type));
        w.cores = cores;
        for (Core* c : cores) {
            tls_core = c;
            body();
            tls_core = nullptr;
            for (int m = 0; m < NMEM; ++m) { c->mem[m].clear(); c->mem[m].shrink_to_fit(); c->shadow[m].clear(); c->shadow[m].shrink_to_fit(); }
        }
        for (Core* c : cores) free_core(c);
        w.cores.clear();
        return;
    }
    std::vector<Core*> cores;
    for (uint32_t g = 0; g < blockDim; ++g) {
        cores.push_back(make_core(int(3 * g), true, g, blockDim, 0, kernel_type));
        for (int v = 0; v < 2; ++v) {
            Core* c = make_core(int(3 * g + 1 + v), false, 2 * g + v, blockDim, v, kernel_type);
            cores.push_back(c);
        }
    }
    w.cores = cores;
    for (uint32_t g = 0; g < blockDim; ++g) {
        Group group;
        {
            std::lock_guard<std::recursive_mutex> lock(w.mu);
            w.running = 3;
            w.blocked = 0;
        }
        std::vector<std::thread> threads;
        for (int i = 0; i < 3; ++i) {
            Core* c = cores[3 * g + i];
            threads.emplace_back([c, &group, &body, &w] {
                tls_core = c;
                tls_group = &group;
                body();
                std::lock_guard<std::recursive_mutex> lock(w.mu);
                w.running--;
                for (int f = 0; f < 16; ++f)
                    if (group.flags[c->is_aic ? 0 : 1 + c->sub_block_idx].pending[f])
                        std::fprintf(stderr, "ascend-model: warning: %s ends with %d unconsumed cross-core sets of flag %d\n",
                                     c->label.c_str(), group.flags[c->is_aic ? 0 : 1 + c->sub_block_idx].pending[f], f);
                report_deadlock_if_stuck();
                w.cv.notify_all();
            });
        }
        for (auto& t : threads) t.join();
    }
    for (Core* c : cores) free_core(c);
    w.cores.clear();
}

}  // namespace model
}  // namespace AscendC
