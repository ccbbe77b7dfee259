// Randomized stress test of the caching allocator against the fake backend: threads allocate,
// free, record_stream, capture into private pools (some shared between captures through the same
// id), release pools, empty the cache and run out of memory. An independent model checks every
// allocation as it is handed out, and the allocator's stats and invariants at quiescent points:
//  - no two live blocks overlap;
//  - no block is handed out again, on another stream, before the work queued on a stream it was
//    recorded on (record_stream) completed;
//  - a device segment only ever serves one stream and one pool until it is freed, so nothing in a
//    capture's pool is handed outside it;
//  - stats equal the sums over live blocks and the fake device's segments;
//  - the fake device saw no misuse (no event query or segment free during a capture, ...).
// MEMGUARD_STRESS_SEED and MEMGUARD_STRESS_OPS (operations per thread) override the defaults.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alloc/caching_allocator.h"
#include "alloc/testing/fake_backend.h"

namespace memguard::alloc {
namespace {

using testing::FakeBackend;

constexpr size_t MiB = 1024 * 1024;
constexpr int kNormalStreams = 4;
constexpr Stream kFirstStream = 0x100;
constexpr Stream kFirstCaptureStream = 0x1000;
constexpr size_t kMaxSegment = 128 * MiB;

uint64_t env_u64(const char* name, uint64_t dflt) {
    const char* v = std::getenv(name);
    if (!v || !*v) return dflt;
    return std::strtoull(v, nullptr, 0);
}

class Barrier {
public:
    explicit Barrier(int n) : n_(n) {}
    // The last thread to arrive runs fn while the others wait.
    void arrive_and_wait(const std::function<void()>& fn) {
        std::unique_lock<std::mutex> lock(mu_);
        const uint64_t gen = gen_;
        if (++count_ == n_) {
            fn();
            count_ = 0;
            ++gen_;
            cv_.notify_all();
            return;
        }
        cv_.wait(lock, [&] { return gen_ != gen; });
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    int n_;
    int count_ = 0;
    uint64_t gen_ = 0;
};

// The independent model of what the allocator handed out.
class Model {
public:
    Model(FakeBackend& fake, bool expandable) : fake_(fake), expandable_(expandable) {}

    void on_alloc(void* ptr, size_t size, size_t requested, Stream stream, MempoolId pool) {
        const auto p = reinterpret_cast<uintptr_t>(ptr);
        std::lock_guard<std::mutex> lock(mu_);
        auto next = live_.upper_bound(p);
        if (next != live_.end() && next->first < p + size) violation("overlaps the next live block", p);
        if (next != live_.begin() && std::prev(next)->second.end > p) violation("overlaps the previous live block", p);
        const uintptr_t lo = p > kMaxSegment ? p - kMaxSegment : 0;
        for (auto it = busy_.lower_bound(lo); it != busy_.end() && it->first < p + size;) {
            const Busy& b = it->second;
            const bool overlaps = b.end > p;
            const bool done = fake_.completed(b.user) >= b.target;
            if (overlaps && !done && b.user != stream)
                violation("reused on another stream before the recorded stream's work completed", p);
            it = done ? busy_.erase(it) : std::next(it);
        }
        size_t len = 0;
        uintptr_t base = fake_.segment_of(0, p, &len);
        // Expandable segments: the reserved range is the segment, and the block must be mapped.
        if (base == 0 && expandable_) {
            base = fake_.reservation_of(0, p, &len);
            if (base != 0 && !fake_.accessible(0, p, size)) violation("block not mapped with access set", p);
        }
        if (base == 0 || p + size > base + len) {
            violation("block outside any live device segment", p);
        } else {
            auto [it, fresh] = segs_.emplace(base, Seg{stream, pool});
            if (!fresh && it->second.stream != stream) violation("segment serves two streams", p);
            if (!fresh && it->second.pool != pool) violation("segment serves two pools", p);
        }
        live_[p] = Live{p + size, size, requested};
        ++allocs_;
    }

    // Called before the block is given back; `uses` are the streams it was recorded on.
    void on_free(void* ptr, const std::vector<Stream>& uses) {
        const auto p = reinterpret_cast<uintptr_t>(ptr);
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(p);
        if (it == live_.end()) {
            violation("model lost a block", p);
            return;
        }
        for (Stream u : uses) busy_.emplace(p, Busy{it->second.end, u, fake_.submitted(u)});
        live_.erase(it);
    }

    void on_segment_free(uintptr_t base, size_t len) {
        std::lock_guard<std::mutex> lock(mu_);
        segs_.erase(base);
        busy_.erase(busy_.lower_bound(base), busy_.lower_bound(base + len));
    }

    // At a quiescent point: the allocator's books against the model and the device.
    void check(const CachingAllocator& alloc) {
        std::lock_guard<std::mutex> lock(mu_);
        const std::string inv = alloc.check_invariants(0);
        if (!inv.empty()) violation("invariant: " + inv, 0);
        int64_t bytes = 0, requested = 0;
        for (const auto& [p, l] : live_) {
            bytes += static_cast<int64_t>(l.size);
            requested += static_cast<int64_t>(l.requested);
        }
        const DeviceStats st = alloc.stats(0);
        auto expect = [&](const char* what, int64_t got, int64_t want) {
            if (got != want)
                violation(std::string(what) + " is " + std::to_string(got) + ", expected " + std::to_string(want), 0);
        };
        expect("allocation.all.current", st.allocation[kStatAll].current, static_cast<int64_t>(live_.size()));
        expect("allocated_bytes.all.current", st.allocated_bytes[kStatAll].current, bytes);
        expect("requested_bytes.all.current", st.requested_bytes[kStatAll].current, requested);
        expect("reserved_bytes.all.current", st.reserved_bytes[kStatAll].current,
               static_cast<int64_t>(fake_.live_bytes(0)));
        expect("segment.all.current", st.segment[kStatAll].current, static_cast<int64_t>(fake_.live_segments(0)));
        if (!expandable_) {
            expect("num_device_alloc", st.num_device_alloc, static_cast<int64_t>(fake_.malloc_calls()));
            expect("num_device_free", st.num_device_free, static_cast<int64_t>(fake_.free_calls()));
        } else {
            // One count per mapping (unmapping) call of one or more pages, as PyTorch counts.
            const FakeBackend::VmmCounts v = fake_.vmm(0);
            const auto mallocs = static_cast<int64_t>(fake_.malloc_calls());
            const auto frees = static_cast<int64_t>(fake_.free_calls());
            if (st.num_device_alloc < mallocs || st.num_device_alloc > mallocs + static_cast<int64_t>(v.maps))
                violation("num_device_alloc " + std::to_string(st.num_device_alloc) +
                              " is not cudaMallocs plus "
                              "mapping calls",
                          0);
            if (st.num_device_free < frees || st.num_device_free > frees + static_cast<int64_t>(v.unmaps))
                violation("num_device_free " + std::to_string(st.num_device_free) +
                              " is not cudaFrees plus "
                              "unmapping calls",
                          0);
            if (v.mapped_bytes != v.physical_bytes) violation("physical memory that is not mapped", 0);
            if (v.inaccessible_mappings != 0) violation("a mapping without access set", 0);
        }
        for (const std::string& m : fake_.misuses()) violation("device misuse: " + m, 0);
        ++checks_;
    }

    void violation(const std::string& what, uintptr_t p) {
        if (violations_.size() < 20) violations_.push_back(what + " (at " + std::to_string(p) + ")");
        ++violation_count_;
    }

    std::vector<std::string> violations() {
        std::lock_guard<std::mutex> lock(mu_);
        return violations_;
    }
    uint64_t violation_count() {
        std::lock_guard<std::mutex> lock(mu_);
        return violation_count_;
    }
    uint64_t checks() const { return checks_; }
    uint64_t allocs() const { return allocs_; }

private:
    struct Live {
        uintptr_t end;
        size_t size;
        size_t requested;
    };
    struct Busy {
        uintptr_t end;
        Stream user;
        uint64_t target;  // the user stream's work count at free
    };
    struct Seg {
        Stream stream;
        MempoolId pool;
    };
    FakeBackend& fake_;
    const bool expandable_;
    std::mutex mu_;
    std::map<uintptr_t, Live> live_;
    std::multimap<uintptr_t, Busy> busy_;
    std::map<uintptr_t, Seg> segs_;
    std::vector<std::string> violations_;
    uint64_t violation_count_ = 0;
    uint64_t checks_ = 0;
    uint64_t allocs_ = 0;
};

struct Params {
    uint64_t seed;
    int threads;
    uint64_t ops_per_thread;
    uint64_t check_every;
    size_t capacity;
    AllocatorConfig config = {};
};

struct Held {
    void* p;
    Stream stream;
};

class Worker {
public:
    Worker(int index, const Params& prm, CachingAllocator& alloc, FakeBackend& fake, Model& model,
           std::atomic<uint64_t>& capture_ids)
        : index_(index),
          prm_(prm),
          alloc_(alloc),
          fake_(fake),
          model_(model),
          capture_ids_(capture_ids),
          rng_(prm.seed * 1000003 + static_cast<uint64_t>(index)),
          cap_stream_(kFirstCaptureStream + index) {}

    static thread_local Worker* current;

    void run(Barrier& barrier) {
        current = this;
        for (uint64_t i = 0; i < prm_.ops_per_thread; ++i) {
            if (i % prm_.check_every == 0) barrier.arrive_and_wait([&] { model_.check(alloc_); });
            step();
        }
        while (!held_.empty()) free_one(pick(held_.size()), false);
        for (MempoolId id : graphs_) alloc_.release_pool(0, id);
        graphs_.clear();
        barrier.arrive_and_wait([&] { model_.check(alloc_); });
        current = nullptr;
    }

    // The OOM rescue: frees half of this thread's blocks, as a collection freeing garbage would.
    bool rescue(const OomRescueInfo& info) {
        ++rescues;
        if (info.capture_underway || held_.empty()) return false;
        const size_t n = (held_.size() + 1) / 2;
        for (size_t k = 0; k < n && !held_.empty(); ++k) free_one(pick(held_.size()), false);
        return true;
    }

    uint64_t ops = 0, ooms = 0, captures = 0, rescues = 0;

private:
    size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }
    Stream normal_stream() { return kFirstStream + pick(kNormalStreams); }

    size_t random_size() {
        const unsigned r = static_cast<unsigned>(rng_() % 100);
        if (r < 70) return 1 + pick(size_t{1} << (1 + pick(20)));  // up to 1 MiB, mostly small
        if (r < 95) return MiB + 1 + pick(9 * MiB);
        return 10 * MiB + pick(54 * MiB);
    }

    void allocate(Stream stream, MempoolId expect_pool) {
        const size_t size = random_size();
        int err = -1;
        void* p = alloc_.malloc(0, size, stream, static_cast<SiteId>(index_), &err);
        if (!p) {
            if (err != kErrorMemoryAllocation) model_.violation("malloc error " + std::to_string(err), 0);
            ++ooms;
            return;
        }
        size_t block = 0, req = 0;
        if (!alloc_.block_sizes(p, &block, &req) || req != size || block < size)
            model_.violation("block sizes wrong", reinterpret_cast<uintptr_t>(p));
        model_.on_alloc(p, block, size, stream, expect_pool);
        held_.push_back(Held{p, stream});
    }

    // record: use the block on another normal stream first (a kernel there), then record_stream.
    void free_one(size_t k, bool record) {
        Held h = held_[k];
        held_[k] = held_.back();
        held_.pop_back();
        std::vector<Stream> uses;
        if (record) {
            Stream u = normal_stream();
            if (u != h.stream) {
                fake_.submit(u);
                if (!alloc_.record_stream(h.p, u)) model_.violation("record_stream refused", 0);
                uses.push_back(u);
            }
        }
        model_.on_free(h.p, uses);
        if (!alloc_.free(h.p)) model_.violation("free refused", reinterpret_cast<uintptr_t>(h.p));
    }

    void capture_session() {
        ++captures;
        MempoolId pool;
        if (rng_() % 2)
            pool = MempoolId{0, 1 + rng_() % 3};  // shared between captures (pool=)
        else
            pool = MempoolId{capture_ids_.fetch_add(1) + 1, 0};
        const Stream cap = cap_stream_;
        alloc_.begin_allocate_to_pool(0, pool, [cap](Stream s) { return s == cap; });
        fake_.begin_capture(cap);
        const int n = 4 + static_cast<int>(pick(24));
        std::vector<Held> inside;
        for (int k = 0; k < n; ++k) {
            const unsigned r = static_cast<unsigned>(rng_() % 10);
            if (r < 5) {
                const size_t before = held_.size();
                allocate(cap, pool);
                if (held_.size() > before) {
                    inside.push_back(held_.back());
                    held_.pop_back();
                }
            } else if (r < 7 && !inside.empty()) {
                // freed inside the capture (maybe after a use on another stream: deferred)
                const size_t i = pick(inside.size());
                held_.push_back(inside[i]);
                inside[i] = inside.back();
                inside.pop_back();
                free_one(held_.size() - 1, rng_() % 4 == 0);
            } else if (r < 8 && !held_.empty()) {
                free_one(pick(held_.size()), rng_() % 2 == 0);  // an outside block freed during it
            } else {
                allocate(normal_stream(), MempoolId{});
            }
        }
        fake_.end_capture(cap);
        alloc_.end_allocate_to_pool(0, pool);
        graphs_.push_back(pool);
        // Some of the graph's blocks outlive the capture (its outputs); the rest are freed now.
        for (const Held& h : inside) {
            held_.push_back(h);
            if (rng_() % 2) free_one(held_.size() - 1, rng_() % 4 == 0);
        }
    }

    void step() {
        ++ops;
        const unsigned r = static_cast<unsigned>(rng_() % 1000);
        if (r < 420) {
            if (held_.size() < 48) {
                // Blocks on the capture stream outside a capture come from the default pool.
                const Stream s = rng_() % 16 == 0 ? cap_stream_ : normal_stream();
                allocate(s, MempoolId{});
            } else {
                free_one(pick(held_.size()), false);
            }
        } else if (r < 800) {
            if (!held_.empty()) free_one(pick(held_.size()), rng_() % 3 == 0);
        } else if (r < 880) {
            fake_.submit(normal_stream());
        } else if (r < 970) {
            fake_.complete(normal_stream());
        } else if (r < 980) {
            capture_session();
        } else if (r < 996) {
            if (!graphs_.empty()) {
                const size_t i = pick(graphs_.size());
                if (!alloc_.release_pool(0, graphs_[i])) model_.violation("release_pool refused", 0);
                graphs_[i] = graphs_.back();
                graphs_.pop_back();
            }
        } else {
            alloc_.empty_cache();
        }
    }

    const int index_;
    const Params prm_;
    CachingAllocator& alloc_;
    FakeBackend& fake_;
    Model& model_;
    std::atomic<uint64_t>& capture_ids_;
    std::mt19937_64 rng_;
    const Stream cap_stream_;
    std::vector<Held> held_;
    std::vector<MempoolId> graphs_;  // pool uses this thread's "graphs" hold
};

thread_local Worker* Worker::current = nullptr;

void run_stress(const Params& prm) {
    SCOPED_TRACE("seed " + std::to_string(prm.seed) + " (MEMGUARD_STRESS_SEED reproduces it)");
    FakeBackend fake(1, prm.capacity);
    fake.set_auto_complete_after(4);
    CachingAllocator alloc(fake, 1, prm.config);
    Model model(fake, prm.config.expandable_segments);
    fake.set_free_hook([&](int, uintptr_t base, size_t len) { model.on_segment_free(base, len); });
    alloc.set_oom_rescue(
        [](const OomRescueInfo& info) { return Worker::current ? Worker::current->rescue(info) : false; });
    std::atomic<uint64_t> capture_ids{0};
    Barrier barrier(prm.threads);
    std::vector<std::unique_ptr<Worker>> workers;
    for (int t = 0; t < prm.threads; ++t)
        workers.push_back(std::make_unique<Worker>(t, prm, alloc, fake, model, capture_ids));
    std::vector<std::thread> threads;
    for (auto& w : workers) threads.emplace_back([&, w = w.get()] { w->run(barrier); });
    for (auto& t : threads) t.join();

    // Everything was freed and every pool released: after the events, nothing stays reserved.
    fake.complete_all();
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 0u);
    const DeviceStats st = alloc.stats(0);
    EXPECT_EQ(st.reserved_bytes[kStatAll].current, 0);
    EXPECT_EQ(st.active[kStatAll].current, 0);
    EXPECT_EQ(fake.vmm(0).live_reservations, 0u);
    EXPECT_EQ(fake.vmm(0).live_handles, 0u);
    model.check(alloc);

    uint64_t ops = 0, ooms = 0, captures = 0, rescues = 0;
    for (auto& w : workers) {
        ops += w->ops;
        ooms += w->ooms;
        captures += w->captures;
        rescues += w->rescues;
    }
    std::printf("stress seed %llu: %d threads, %llu ops (%llu allocations), %llu captures, %llu failed allocations, "
                "%llu rescues, %llu checks, %lld retries, %lld device allocs, %lld event queries\n",
                static_cast<unsigned long long>(prm.seed), prm.threads, static_cast<unsigned long long>(ops),
                static_cast<unsigned long long>(model.allocs()), static_cast<unsigned long long>(captures),
                static_cast<unsigned long long>(ooms), static_cast<unsigned long long>(rescues),
                static_cast<unsigned long long>(model.checks()), static_cast<long long>(st.num_alloc_retries),
                static_cast<long long>(st.num_device_alloc), static_cast<long long>(fake.event_queries()));
    EXPECT_EQ(model.violation_count(), 0u);
    for (const std::string& v : model.violations()) ADD_FAILURE() << v;
    // The run must have exercised the paths it claims to check.
    EXPECT_GT(captures, 0u);
    EXPECT_GT(st.num_alloc_retries, 0);
    EXPECT_GT(fake.event_queries(), 0u);
}

TEST(Stress, EightThreadsFourStreamsCapturesAndSharedPools) {
    Params p;
    p.seed = env_u64("MEMGUARD_STRESS_SEED", 1);
    p.threads = 8;
    p.ops_per_thread = env_u64("MEMGUARD_STRESS_OPS", 250000);
    p.check_every = 250;
    p.capacity = 3072 * MiB;
    run_stress(p);
}

TEST(Stress, EightThreadsWithMaxSplitSizeAndRounding) {
    Params p;
    p.seed = env_u64("MEMGUARD_STRESS_SEED", 3);
    p.threads = 8;
    p.ops_per_thread = env_u64("MEMGUARD_STRESS_OPS", 250000) / 2;
    p.check_every = 250;
    p.capacity = 3072 * MiB;
    p.config.max_split_size = 32 * MiB;  // requests go up to 64 MiB: oversize blocks are common
    p.config.roundup_power2_divisions = 4;
    run_stress(p);
}

TEST(Stress, EightThreadsWithExpandableSegments) {
    Params p;
    p.seed = env_u64("MEMGUARD_STRESS_SEED", 4);
    p.threads = 8;
    p.ops_per_thread = env_u64("MEMGUARD_STRESS_OPS", 250000) / 2;
    p.check_every = 250;
    p.capacity = 3072 * MiB;
    p.config.expandable_segments = true;
    run_stress(p);
}

TEST(Stress, OneThreadCheckedAfterEveryStep) {
    Params p;
    p.seed = env_u64("MEMGUARD_STRESS_SEED", 2);
    p.threads = 1;
    p.ops_per_thread = env_u64("MEMGUARD_STRESS_OPS", 250000);
    p.check_every = 1;
    p.capacity = 256 * MiB;
    run_stress(p);
}

}  // namespace
}  // namespace memguard::alloc
