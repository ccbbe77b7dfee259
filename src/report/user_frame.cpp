#include "report/user_frame.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_set>

namespace memguard::report {

namespace {

std::string_view strip_slash(std::string_view p) {
    while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
    return p;
}

/// True when `path` is `dir` or lies under it.
bool under(std::string_view path, std::string_view dir) {
    if (path.size() < dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
    return path.size() == dir.size() || path[dir.size()] == '/' || dir == "/";
}

/// True when one of the path's directory components (not its file name) satisfies `pred`.
template <class Pred>
bool any_dir_component(std::string_view path, Pred pred) {
    size_t start = 0;
    for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', start)) {
        if (slash > start && pred(path.substr(start, slash - start))) return true;
        start = slash + 1;
    }
    return false;
}

bool has_dir(std::string_view path, std::string_view name) {
    return any_dir_component(path, [name](std::string_view c) { return c == name; });
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string_view basename(std::string_view path) {
    size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// `lib/python3.11/` or `lib64/python3/` in the path: the standard library's shape.
bool stdlib_shape(std::string_view path) {
    for (std::string_view lib : {std::string_view("/lib/python"), std::string_view("/lib64/python")}) {
        for (size_t at = path.find(lib); at != std::string_view::npos; at = path.find(lib, at + 1)) {
            size_t i = at + lib.size();
            while (i < path.size() && (std::isdigit(static_cast<unsigned char>(path[i])) || path[i] == '.')) ++i;
            if (i < path.size() && path[i] == '/') return true;
        }
    }
    return false;
}

FrameOrigin origin_of(format::PathKind k) {
    switch (k) {
    case format::PathKind::Torch: return FrameOrigin::Torch;
    case format::PathKind::InductorCache: return FrameOrigin::Generated;
    case format::PathKind::Memguard: return FrameOrigin::Memguard;
    case format::PathKind::Site: return FrameOrigin::ThirdParty;
    case format::PathKind::Stdlib:
    case format::PathKind::Prefix: return FrameOrigin::Stdlib;
    }
    return FrameOrigin::User;
}

const PythonFrame* find_frame(const Report& r, uint32_t id) {
    auto it = r.python_frames.find(id);
    return it == r.python_frames.end() ? nullptr : &it->second;
}

}  // namespace

const char* origin_name(FrameOrigin o) {
    switch (o) {
    case FrameOrigin::User: return "user";
    case FrameOrigin::Torch: return "torch";
    case FrameOrigin::ThirdParty: return "third_party";
    case FrameOrigin::Stdlib: return "stdlib";
    case FrameOrigin::Synthetic: return "synthetic";
    case FrameOrigin::Generated: return "generated";
    case FrameOrigin::Memguard: return "memguard";
    }
    return "?";
}

FrameRule::FrameRule(const std::vector<PythonPath>& paths) {
    for (const PythonPath& p : paths) {
        std::string_view dir = strip_slash(p.path);
        if (dir.empty() || dir[0] != '/') continue;  // a relative directory would match by accident
        paths_.push_back(PythonPath{p.kind, std::string(dir)});
    }
    // The longest directory decides: torch and memguard lie inside site-packages, which lies inside
    // the standard library's directory.
    std::stable_sort(paths_.begin(), paths_.end(),
                     [](const PythonPath& a, const PythonPath& b) { return a.path.size() > b.path.size(); });
}

FrameOrigin FrameRule::classify(std::string_view file) const {
    if (file.empty()) return FrameOrigin::Synthetic;
    if (file[0] == '<') {
        // What the user typed or ran in a notebook is theirs; <string>, <frozen ...> and the like
        // are not files, and <eval_with_key>.N is FX's graph code.
        if (file == "<stdin>" || starts_with(file, "<ipython-input-")) return FrameOrigin::User;
        if (file == "<memguard>") return FrameOrigin::Memguard;  // the library's embedded Python
        return starts_with(file, "<eval_with_key>") ? FrameOrigin::Generated : FrameOrigin::Synthetic;
    }
    // dynamo's pseudo-filenames (`.../subclass_codegen.py:codegen(...)`), FX's content-addressed
    // graph files, inductor's output code in its default cache directory.
    if (file.find(".py:") != std::string_view::npos || file.find("codegen(") != std::string_view::npos) {
        return FrameOrigin::Generated;
    }
    if (starts_with(basename(file), "fx_generated_")) return FrameOrigin::Generated;
    if (any_dir_component(file, [](std::string_view c) { return starts_with(c, "torchinductor_"); })) {
        return FrameOrigin::Generated;
    }
    bool torch_known = false, stdlib_known = false;
    for (const PythonPath& p : paths_) {
        torch_known |= p.kind == format::PathKind::Torch;
        stdlib_known |= p.kind == format::PathKind::Stdlib;
    }
    for (const PythonPath& p : paths_) {
        if (!under(file, p.path)) continue;
        if (p.kind == format::PathKind::Prefix) {
            // Only the interpreter's library directories under a prefix: a user's script may live
            // under /usr or a virtual environment's directory too.
            std::string_view rest = file.substr(p.path == "/" ? 0 : p.path.size());
            if (!stdlib_shape(rest)) continue;
        }
        return origin_of(p.kind);
    }
    // Shapes for what the report does not name exactly (older reports, or a kind not recorded).
    if (!torch_known && (has_dir(file, "torch") || starts_with(file, "torch/"))) return FrameOrigin::Torch;
    if (has_dir(file, "site-packages") || has_dir(file, "dist-packages")) return FrameOrigin::ThirdParty;
    if (!stdlib_known && stdlib_shape(file)) return FrameOrigin::Stdlib;
    return FrameOrigin::User;
}

bool parse_resume_name(std::string_view name, std::string* function, int* line) {
    constexpr std::string_view kPrefix = "torch_dynamo_resume_in_";
    if (!starts_with(name, kPrefix)) return false;
    name.remove_prefix(kPrefix.size());
    size_t at = name.rfind("_at_");
    if (at == std::string_view::npos || at == 0 || at + 4 >= name.size()) return false;
    int value = 0;
    for (char c : name.substr(at + 4)) {
        if (!std::isdigit(static_cast<unsigned char>(c)) || value > 100000000) return false;
        value = value * 10 + (c - '0');
    }
    *function = std::string(name.substr(0, at));
    *line = value;
    return true;
}

UserFrame user_frame(const Report& r, const PythonStack& s, const FrameRule& rule) {
    UserFrame u;
    for (size_t i = 0; i < s.frames.size(); ++i) {
        const PythonFrame* f = find_frame(r, s.frames[i]);
        if (f == nullptr || rule.classify(f->filename) != FrameOrigin::User) continue;
        u.found = true;
        u.index = i;
        u.frame_id = f->id;
        u.function = f->function;
        u.file = f->filename;
        u.line = f->line;
        // A compiled function's frame runs dynamo's transformed bytecode right under eval_frame's
        // wrapper: its line is the def line.
        const PythonFrame* inner = i > 0 ? find_frame(r, s.frames[i - 1]) : nullptr;
        u.compiled = inner != nullptr && ends_with(inner->filename, "_dynamo/eval_frame.py");
        std::string fn;
        int line = 0;
        if (parse_resume_name(f->function, &fn, &line)) {
            u.function = fn;
            u.line = line;
            u.compiled = true;
        }
        return u;
    }
    return u;
}

UserFrame user_frame(const Report& r, uint32_t python_stack_id, const FrameRule& rule) {
    auto it = r.python_stacks.find(python_stack_id);
    if (python_stack_id == 0 || it == r.python_stacks.end()) return UserFrame{};
    return user_frame(r, it->second, rule);
}

std::string user_frame_text(const UserFrame& u) {
    std::string out = u.function.empty() ? "??" : u.function;
    if (!u.file.empty()) out += " at " + u.file + (u.line > 0 ? ":" + std::to_string(u.line) : "");
    if (u.compiled) out += " (compiled)";
    return out;
}

bool in_backward_call(const Report& r, const PythonStack& s, const FrameRule& rule) {
    for (uint32_t id : s.frames) {
        const PythonFrame* f = find_frame(r, id);
        if (f == nullptr) continue;
        const std::string& fn = f->function;
        if (fn != "backward" && fn != "grad" && fn != "_engine_run_backward") continue;
        if (rule.classify(f->filename) != FrameOrigin::Torch) continue;
        if (f->filename.find("/autograd/") != std::string::npos || ends_with(f->filename, "/_tensor.py")) return true;
    }
    return false;
}

void attribute_backward(Report& r) {
    struct Alloc {
        int64_t t;
        uint64_t tid, size;
        uint32_t stack_id, python_stack_id;
    };
    std::vector<Alloc> allocs;
    allocs.reserve(r.blocks.size() + r.tensors.size());
    std::unordered_set<uint64_t> python_threads;
    for (const Block& b : r.blocks) allocs.push_back(Alloc{b.t_alloc, b.tid, b.size, b.stack_id, b.python_stack_id});
    for (const Tensor& t : r.tensors) allocs.push_back(Alloc{t.t_alloc, t.tid, t.size, t.stack_id, t.python_stack_id});
    bool any_backward = false;
    const FrameRule rule(r);
    std::unordered_map<uint32_t, bool> backward_stacks;  // Python stack id -> in a backward() call
    for (const Alloc& a : allocs) {
        if (a.python_stack_id == 0) continue;
        python_threads.insert(a.tid);
        auto [it, added] = backward_stacks.try_emplace(a.python_stack_id, false);
        if (added) {
            auto s = r.python_stacks.find(a.python_stack_id);
            it->second = s != r.python_stacks.end() && in_backward_call(r, s->second, rule);
        }
        any_backward |= it->second;
    }
    if (!any_backward) return;
    std::stable_sort(allocs.begin(), allocs.end(), [](const Alloc& a, const Alloc& b) { return a.t < b.t; });
    // The open backward() calls: thread -> (order opened, the call's Python stack).
    std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> open;
    uint64_t opened = 0;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> bytes;  // (native stack, backward stack) -> bytes
    for (const Alloc& a : allocs) {
        if (a.python_stack_id != 0) {
            if (backward_stacks[a.python_stack_id]) {
                auto [it, added] = open.try_emplace(a.tid, std::make_pair(opened, a.python_stack_id));
                if (added) ++opened;
            } else {
                open.erase(a.tid);
            }
            continue;
        }
        if (open.empty() || python_threads.count(a.tid) != 0) continue;
        const std::pair<uint64_t, uint32_t>* latest = nullptr;
        for (const auto& [tid, call] : open) {
            if (latest == nullptr || call.first > latest->first) latest = &call;
        }
        bytes[{a.stack_id, latest->second}] += a.size;
    }
    std::unordered_map<uint32_t, uint64_t> best;
    for (const auto& [key, n] : bytes) {
        auto [it, added] = best.try_emplace(key.first, n);
        if (added || n > it->second) {
            it->second = n;
            r.backward_sites[key.first] = key.second;
        }
    }
}

bool BackwardSweep::in_backward(const Report& r, uint32_t python_stack_id) {
    auto [it, added] = backward_stacks_.try_emplace(python_stack_id, false);
    if (added) {
        if (!rule_) {
            rule_.emplace(r);
            rule_paths_ = r.python_paths.size();
        }
        auto s = r.python_stacks.find(python_stack_id);
        it->second = s != r.python_stacks.end() && in_backward_call(r, s->second, *rule_);
    }
    return it->second;
}

void BackwardSweep::add(const Report& r, int64_t t, bool tensor, size_t order, uint64_t tid, uint64_t size,
                        uint32_t stack_id, uint32_t python_stack_id) {
    const Alloc a{t, tensor, order, tid, size, stack_id, python_stack_id};
    // Without a Python stack yet, nothing can open a backward() call: only the order is checked.
    buffering_ = buffering_ || !r.python_stacks.empty();
    if (!buffering_) {
        replay(r, a);
        return;
    }
    if (run_.empty() || a > run_.back()) {
        run_.push_back(a);
    } else {
        heap_.push_back(a);
        std::push_heap(heap_.begin(), heap_.end(), std::greater<Alloc>());
    }
    if (run_.size() + heap_.size() <= kWindow) return;
    if (!run_.empty() && (heap_.empty() || heap_.front() > run_.front())) {
        replay(r, run_.front());
        run_.pop_front();
        return;
    }
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<Alloc>());
    replay(r, heap_.back());
    heap_.pop_back();
}

void BackwardSweep::replay(const Report& r, const Alloc& a) {
    if (last_ && *last_ > a) out_of_order_ = true;
    last_ = a;
    if (a.python_stack_id != 0) {
        python_threads_.insert(a.tid);
        if (in_backward(r, a.python_stack_id)) {
            any_backward_ = true;
            auto [it, added] = open_.try_emplace(a.tid, std::make_pair(opened_, a.python_stack_id));
            if (added) ++opened_;
        } else {
            open_.erase(a.tid);
        }
        return;
    }
    if (open_.empty() || python_threads_.count(a.tid) != 0) return;
    const std::pair<uint64_t, uint32_t>* latest = nullptr;
    for (const auto& [tid, call] : open_) {
        if (latest == nullptr || call.first > latest->first) latest = &call;
    }
    bytes_[{a.stack_id, latest->second, a.tid}] += a.size;
}

bool BackwardSweep::finish(Report& r) {
    heap_.insert(heap_.end(), run_.begin(), run_.end());
    run_.clear();
    std::sort(heap_.begin(), heap_.end(), [](const Alloc& x, const Alloc& y) { return y > x; });
    for (const Alloc& a : heap_) replay(r, a);
    heap_.clear();
    if (!any_backward_) return true;  // as attribute_backward: no call, no site
    if (out_of_order_) return false;
    if (rule_ && r.python_paths.size() != rule_paths_) {
        const FrameRule rule(r);
        for (const auto& [id, backward] : backward_stacks_) {
            auto s = r.python_stacks.find(id);
            if (backward != (s != r.python_stacks.end() && in_backward_call(r, s->second, rule))) return false;
        }
    }
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> bytes;  // (native stack, backward stack) -> bytes
    for (const auto& [key, n] : bytes_) {
        if (python_threads_.count(std::get<2>(key)) == 0) bytes[{std::get<0>(key), std::get<1>(key)}] += n;
    }
    std::unordered_map<uint32_t, uint64_t> best;
    for (const auto& [key, n] : bytes) {
        auto [it, added] = best.try_emplace(key.first, n);
        if (added || n > it->second) {
            it->second = n;
            r.backward_sites[key.first] = key.second;
        }
    }
    return true;
}

}  // namespace memguard::report

namespace memguard::report {

namespace {

constexpr size_t kAllocValues = 7;

}  // namespace

void BackwardSweep::put(std::vector<int64_t>& v, const Alloc& a) {
    v.insert(v.end(),
             {a.t, a.tensor ? 1 : 0, fold_of(a.order), fold_of(a.tid), fold_of(a.size), a.stack_id, a.python_stack_id});
}

void BackwardSweep::fold_out(FoldWriter& w) const {
    std::vector<int64_t> last;
    if (last_) put(last, *last_);
    w.figure("backward", {buffering_ ? 1 : 0, out_of_order_ ? 1 : 0, any_backward_ ? 1 : 0, rule_ ? 1 : 0,
                          fold_of(rule_paths_), fold_of(opened_), last_ ? 1 : 0});
    if (last_) w.figure("backward.last", last);
    // The window in the order it is replayed (the earliest first): a run to take back.
    std::vector<Alloc> window(run_.begin(), run_.end());
    window.insert(window.end(), heap_.begin(), heap_.end());
    std::stable_sort(window.begin(), window.end(), [](const Alloc& x, const Alloc& y) { return y > x; });
    std::vector<int64_t> v;
    for (size_t i = 0; i < window.size(); ++i) {
        put(v, window[i]);
        if (v.size() >= 20 * kAllocValues || i + 1 == window.size()) {
            w.figure("backward.window", v);
            v.clear();
        }
    }
    std::vector<std::pair<uint32_t, bool>> stacks(backward_stacks_.begin(), backward_stacks_.end());
    std::sort(stacks.begin(), stacks.end());
    for (size_t i = 0; i < stacks.size(); i += 100) {
        v.clear();
        for (size_t j = i; j < std::min(stacks.size(), i + 100); ++j) {
            v.push_back(stacks[j].first);
            v.push_back(stacks[j].second ? 1 : 0);
        }
        w.figure("backward.stacks", v);
    }
    std::vector<uint64_t> threads(python_threads_.begin(), python_threads_.end());
    std::sort(threads.begin(), threads.end());
    for (size_t i = 0; i < threads.size(); i += 100) {
        v.clear();
        for (size_t j = i; j < std::min(threads.size(), i + 100); ++j) v.push_back(fold_of(threads[j]));
        w.figure("backward.python_threads", v);
    }
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> open(open_.begin(), open_.end());
    for (const auto& [tid, call] : open) w.figure("backward.open", {fold_of(tid), fold_of(call.first), call.second});
    for (const auto& [key, bytes] : bytes_) {
        w.figure("backward.bytes", {std::get<0>(key), std::get<1>(key), fold_of(std::get<2>(key)), fold_of(bytes)});
    }
}

void BackwardSweep::fold_in(const Report& r, const Fold& f) {
    *this = BackwardSweep{};
    bool found = false;
    auto alloc_at = [](const Fold::Figure& x, size_t i) {
        return Alloc{fold_value(x, i, INT64_MIN),
                     fold_value(x, i + 1) != 0,
                     static_cast<size_t>(fold_value(x, i + 2)),
                     fold_u64(x, i + 3),
                     fold_u64(x, i + 4),
                     static_cast<uint32_t>(fold_value(x, i + 5)),
                     static_cast<uint32_t>(fold_value(x, i + 6))};
    };
    bool has_last = false;
    f.each("backward", [&](const Fold::Figure& x) {
        found = true;
        buffering_ = fold_value(x, 0) != 0;
        out_of_order_ = fold_value(x, 1) != 0;
        any_backward_ = fold_value(x, 2) != 0;
        rule_paths_ = static_cast<size_t>(fold_value(x, 4));
        if (fold_value(x, 3) != 0) {
            // The rule as it was made: from the interpreter's directories known then.
            if (rule_paths_ > r.python_paths.size()) throw BadFold("backward: more directories than the report has");
            rule_.emplace(std::vector<PythonPath>(r.python_paths.begin(),
                                                  r.python_paths.begin() + static_cast<ptrdiff_t>(rule_paths_)));
        }
        opened_ = fold_u64(x, 5);
        has_last = fold_value(x, 6) != 0;
    });
    if (!found) throw BadFold("no figure 'backward'");
    if (has_last) {
        f.each("backward.last", [&](const Fold::Figure& x) { last_ = alloc_at(x, 0); });
        if (!last_) throw BadFold("backward: its last allocation is missing");
    }
    f.each("backward.window", [&](const Fold::Figure& x) {
        if (x.values.size() % kAllocValues != 0) throw BadFold("backward.window: a partial allocation");
        for (size_t i = 0; i < x.values.size(); i += kAllocValues) run_.push_back(alloc_at(x, i));
    });
    f.each("backward.stacks", [&](const Fold::Figure& x) {
        for (size_t i = 0; i + 1 < x.values.size(); i += 2) {
            backward_stacks_[static_cast<uint32_t>(fold_value(x, i))] = fold_value(x, i + 1) != 0;
        }
    });
    f.each("backward.python_threads", [&](const Fold::Figure& x) {
        for (size_t i = 0; i < x.values.size(); ++i) python_threads_.insert(fold_u64(x, i));
    });
    f.each("backward.open", [&](const Fold::Figure& x) {
        open_[fold_u64(x, 0)] = {fold_u64(x, 1), static_cast<uint32_t>(fold_value(x, 2))};
    });
    f.each("backward.bytes", [&](const Fold::Figure& x) {
        bytes_[{static_cast<uint32_t>(fold_value(x, 0)), static_cast<uint32_t>(fold_value(x, 1)), fold_u64(x, 2)}] =
            fold_u64(x, 3);
    });
}

}  // namespace memguard::report
