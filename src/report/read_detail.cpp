// A bounded report's spine and detail parts (docs/bounded-reports.md; docs/report-format.md,
// "Added in minor 10"): the parser reads both as one stream of records, in the order the run made
// them. At each spine `l` it reads the parts up to that position through DetailParts
// (report/detail_parts.h), decoding their records with the part's decoders; a block a part carries
// is skipped when the part before it was read, and taken as live after a gap.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <unordered_set>

#include "common/text.h"
#include "report/parser.h"
#include "report/stream.h"
#include "report/units.h"

namespace memguard::report {

void Parser::start_detail() {
    detail_.emplace();
    detail_->parts.emplace(report_.path, magic_line_, binary_ ? own_binary_decoder_.version() : 0,
                           [this](std::string w) { warnings_.add("parts", std::move(w)); });
    report_.bounded = true;
    if (observer_ != nullptr) {
        detail_->parts->on_open(
            [this](unsigned part, DetailParts::Role carried, bool done) { part_opened(part, carried, done); });
    }
}

void Parser::choose_fold() {
    Detail& d = *detail_;
    if (d.fold_chosen) return;
    d.fold_chosen = true;  // at the first detail record of the spine: the header (pid, t0) is read
    const std::vector<unsigned> parts = detail_part_numbers(report_.path);
    // A fold that goes between the listing and its reading was replaced by a newer one (a follower,
    // `memguard compact --follow`, removes the older fold once the newer is in place): list again.
    for (int listing = 0; listing < 3; ++listing) {
        bool replaced = false;
        for (unsigned n : find_folds(report_.path)) {
            const std::string path = fold_path(report_.path, n);
            std::string error;
            std::optional<Fold> fold = read_fold(path, magic_line_, error);
            if (!fold && ::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
                replaced = true;
                break;
            }
            if (fold && fold->at.run != run_of(report_)) {
                error = path + ": a fold of another run (its pid and start time are not the report's)";
                fold.reset();
            }
            if (observer_ == nullptr) {
                // load_report keeps every event: it reads the detail there is; a fold says the detail
                // missing before it was folded, not lost.
                if (!fold) continue;
                d.parts->folded_below(fold->at.position);
                d.fold_seen.emplace(path, fold->at.t);
                return;
            }
            if (!fold) {
                warnings_.add("fold", error + "; left out");
                continue;
            }
            // The newest fold that can be taken: the part after it must be there to begin from.
            if (!std::binary_search(parts.begin(), parts.end(), n + 1)) {
                warnings_.add("fold", path + ": detail part " + std::to_string(n + 1) +
                                          ", where it stands, is not beside the report; left out");
                continue;
            }
            d.parts->skip_through(n, fold->at.position);
            d.fold = std::move(fold);
            report_.fold_pending = true;
            for (const Fold::Figure& x : d.fold->figures) {
                if (x.name == "reader.live" && x.block) d.fold_live.insert(x.block->addr);
            }
            return;
        }
        if (!replaced) return;
    }
}

void Parser::part_opened(unsigned part, DetailParts::Role carried, bool done) {
    Detail& d = *detail_;
    if (!done) {
        d.carried_blocks.clear();
        d.carried_tensors.clear();
    }
    if (d.fold && !d.fold_applied && part == d.fold->at.part + 1 && carried == DetailParts::Role::Carried) {
        const Fold& f = *d.fold;
        if (!done) {
            d.fold_carrying = true;  // the carried blocks take the orders they had (next_order)
            take_restores();
            return;
        }
        d.fold_carrying = false;
        blocks_read_ = f.at.blocks;
        report_.tensor_records = f.at.tensors;
        // The blocks live there that the part does not carry (FoldPoint::uncarried), told as the
        // carried ones are, before the observers take their state back.
        for (const Fold::Figure& x : f.figures) {
            if (x.name != "reader.live") continue;
            if (!x.block)
                throw ReportError(fold_path(report_.path, f.at.part) + ": figure reader.live without its block");
            if (const AtAddr* at = blocks_at_.find(x.block->addr); at != nullptr && at->live) continue;
            if (x.values.empty() || x.values[0] < 0) {
                throw ReportError(fold_path(report_.path, f.at.part) + ": figure reader.live without its order");
            }
            Block b = *x.block;
            b.order = static_cast<size_t>(x.values[0]);
            const size_t slot = take_block_slot();
            const uint64_t addr = b.addr;
            const int64_t t = b.t_alloc;
            report_.blocks[slot] = std::move(b);
            blocks_at_[addr] = AtAddr{slot, 0, true};
            add_event(Event::Alloc, slot, t);
        }
        events_ = f.at.events;
        note_time(f.at.t);
        try {
            // What the parser folds of its own: the attribution of allocations to backward() calls
            // (the blocks an R may bring back are taken where the fold's position begins).
            if (backward_) backward_->fold_in(report_, f);
            // Its remarks, and the sites of the garbage its detail named, in place of those read
            // from the spine alone.
            warnings_.fold_in(f, "fold");
            f.each("reader.garbage", [&](const Fold::Figure& x) {
                const auto e = static_cast<size_t>(fold_value(x, 0));
                const auto first = static_cast<size_t>(fold_value(x, 1));
                if (e >= report_.explanations.size())
                    throw BadFold("reader.garbage: no explanation " + std::to_string(e));
                std::vector<GarbageTensor>& storages = report_.explanations[e].storages;
                for (size_t i = 2; i + 2 < x.values.size(); i += 3) {
                    const size_t k = first + (i - 2) / 3;
                    if (k >= storages.size()) throw BadFold("reader.garbage: no such storage");
                    storages[k].stack_id = static_cast<uint32_t>(fold_value(x, i));
                    storages[k].python_stack_id = static_cast<uint32_t>(fold_value(x, i + 1));
                    storages[k].site_is_segment = fold_value(x, i + 2) != 0;
                }
            });
            if (!stopped_) observer_->fold_in(report_, f);
        } catch (const BadFold& e) {
            throw ReportError(fold_path(report_.path, f.at.part) + ": " + e.what() +
                              " (a damaged fold? remove it to read the report without it)");
        }
        d.fold_applied = true;
        report_.fold_pending = false;
        d.dropped += f.at.dropped;  // parts deleted unfolded before the fold
        d.dropped_until = std::max(d.dropped_until, f.at.dropped_until);
        d.dropped_parts += f.at.dropped_parts;
        report_.detail_folded = f.at.position - f.at.dropped;
        report_.detail_folded_until = f.at.t;
    }
    if (!done || stopped_) return;
    FoldPoint at;
    at.magic = magic_line_;
    at.part = part - 1;
    at.position = d.parts->position();
    at.events = events_;
    at.blocks = blocks_read_;
    at.tensors = report_.tensor_records;
    at.t = max_t_;
    at.extra_events = &d.extra;
    at.run = run_of(report_);
    at.carried_blocks = &d.carried_blocks;
    at.carried_tensors = &d.carried_tensors;
    at.dropped = d.dropped;
    at.dropped_until = d.dropped_until;
    at.dropped_parts = d.dropped_parts;
    at.backward = backward_ ? &*backward_ : nullptr;
    // The last frees whose blocks are kept for an R (not allocated over since), oldest first.
    d.freed.clear();
    const uint64_t first = frees_ - std::min<uint64_t>(frees_, std::min(kFoldedFrees, recent_frees_.size()));
    for (uint64_t seq = first; seq < frees_; ++seq) {
        const auto& [addr, rank] = recent_frees_[recent_frees_.size() < kRestoreWindow ? seq : seq % kRestoreWindow];
        const AtAddr* kept = blocks_at_.find(addr);
        if (rank == seq && kept != nullptr && !kept->live && kept->seq == seq) {
            d.freed.emplace_back(seq, &report_.blocks[kept->block]);
        }
    }
    // The blocks live here that this part does not carry: brought back by an R (its writer carried
    // what was live before it), in order.
    d.uncarried.clear();
    const std::unordered_set<size_t> carried_orders(d.carried_blocks.begin(), d.carried_blocks.end());
    for (size_t i = 0; i < report_.blocks.size(); ++i) {
        const Block& b = report_.blocks[i];
        const AtAddr* live = blocks_at_.find(b.addr);
        if (live != nullptr && live->live && live->block == i && carried_orders.count(b.order) == 0) {
            d.uncarried.push_back(&b);
        }
    }
    std::sort(d.uncarried.begin(), d.uncarried.end(),
              [](const Block* a, const Block* b) { return a->order < b->order; });
    at.uncarried = &d.uncarried;
    at.warnings = &warnings_;
    at.explanations = &report_.explanations;
    at.freed = &d.freed;
    at.frees = frees_;
    if (!observer_->at_part(report_, at)) stopped_ = true;
}

size_t Parser::next_order(bool tensor) {
    if (detail_ && detail_->fold_carrying) {
        const std::vector<size_t>& orders = tensor ? detail_->fold->carried_tensors : detail_->fold->carried_blocks;
        size_t& next = tensor ? detail_->carried_tensor_next : detail_->carried_block_next;
        if (next < orders.size() && orders[next] != SIZE_MAX) return orders[next++];
        ++next;
    }
    return tensor ? report_.tensor_records++ : blocks_read_++;
}

void Parser::take_restores() {
    Detail& d = *detail_;
    if (!d.fold || d.fold_applied || d.restores_taken) return;
    d.restores_taken = true;
    try {
        fold_restores(*d.fold);
    } catch (const BadFold& e) {
        throw ReportError(fold_path(report_.path, d.fold->at.part) + ": " + e.what() +
                          " (a damaged fold? remove it to read the report without it)");
    }
}

void Parser::fold_restores(const Fold& f) {
    bool found = false;
    f.each("reader.frees", [&](const Fold::Figure& x) {
        found = true;
        frees_ = fold_u64(x, 0);
    });
    if (!found) throw BadFold("no figure 'reader.frees'");
    // The ring as note_free fills it: slot seq % kRestoreWindow; a free not kept holds no block.
    recent_frees_.assign(static_cast<size_t>(std::min<uint64_t>(frees_, kRestoreWindow)), {0, UINT64_MAX});
    f.each("reader.freed", [&](const Fold::Figure& x) {
        if (!x.block) throw BadFold("figure reader.freed without its block");
        const uint64_t seq = fold_u64(x, 0);
        if (seq >= frees_ || frees_ - seq > recent_frees_.size())
            throw BadFold("reader.freed: a free out of the window");
        Block b = *x.block;
        b.order = static_cast<size_t>(fold_value(x, 1));
        b.t_free = fold_value(x, 2, INT64_MIN);
        b.free_tid = fold_u64(x, 3);
        size_t i = 4;
        const auto n = static_cast<size_t>(fold_value(x, i++));
        if (n > x.values.size()) throw BadFold("reader.freed: its call's name is cut short");
        for (size_t k = 0; k < n; ++k) b.free_api.push_back(static_cast<char>(fold_value(x, i++)));
        if (const AtAddr* at = blocks_at_.find(b.addr); at != nullptr && at->live) return;  // allocated over since
        const size_t slot = take_block_slot();
        const uint64_t addr = b.addr;
        report_.blocks[slot] = std::move(b);
        blocks_at_[addr] = AtAddr{slot, seq, false};
        recent_frees_[recent_frees_.size() < kRestoreWindow ? seq : seq % kRestoreWindow] = {addr, seq};
    });
}

void Parser::apply(const rec::DetailAt& r) {
    if (detail_ && detail_->reading) {
        warn("parts", "an l record inside a detail part (ignored)");
        return;
    }
    if (!detail_) start_detail();
    choose_fold();
    read_detail(r.position);
    Detail& d = *detail_;
    if (observer_ == nullptr) return;
    if (d.fold && !d.fold_applied) {
        // In the folded stretch, where no detail was read: the events the whole report counts
        // here, the spine's own, one per detail record and the fold's extra (FoldPoint::extra_events).
        const auto& table = d.fold->extra;
        while (d.extra_next < table.size() && table[d.extra_next].first <= r.position) {
            d.extra_now = table[d.extra_next++].second;
        }
        const int64_t n = static_cast<int64_t>(r.position + spine_events_) + d.extra_now;
        events_ = n > 0 ? static_cast<size_t>(n) : 0;
        // The spine's records where the fold stands (an R among them) come before the part after it.
        if (r.position == d.fold->at.position) take_restores();
    }
    // Where the events stop being the spine's own and one per detail record, for a fold taken here.
    const int64_t extra = static_cast<int64_t>(events_) - static_cast<int64_t>(r.position + spine_events_);
    if (extra != (d.extra.empty() ? 0 : d.extra.back().second)) d.extra.emplace_back(r.position, extra);
}

void Parser::apply(const rec::DetailDropped& r) {
    if (r.end < r.first) malformed("its end " + std::to_string(r.end) + " is before its first record");
    if (!detail_) start_detail();
    choose_fold();
    Detail& d = *detail_;
    // Before the fold's place in the spine, the fold counts the deletions it read (FoldPoint::dropped).
    if (d.fold && !d.fold_applied) return;
    // After it: a part deleted once a fold covered it has its figures in the fold (the newest, which
    // covers what any older one did). A part deleted unfolded is lost, even where a later fold
    // covers its number: that fold was made without it.
    const bool covered = d.fold && r.part <= d.fold->at.part;
    if (covered && r.folded) return;
    d.dropped += r.end - r.first;
    d.dropped_until = std::max(d.dropped_until, r.until);
    ++d.dropped_parts;
    if (r.folded) d.folded_parts.push_back(static_cast<unsigned>(std::min<uint64_t>(r.part, UINT32_MAX)));
}

void Parser::apply(const rec::FoldAt&) { warn("fold", "an 'a' record belongs in a fold file, not a report (ignored)"); }

void Parser::apply(const rec::Figure&) { warn("fold", "a 'z' record belongs in a fold file, not a report (ignored)"); }

void Parser::read_detail(uint64_t position) {
    DetailParts& parts = *detail_->parts;
    parts.read_to(position, [this, &parts](const DetailParts::Record& rec) {
        if (stopped_) return;  // an observer asked for no more
        // The part's decoders and its place for messages, the report's again after the record.
        struct Reading {
            Parser& p;
            uint64_t offset;
            explicit Reading(Parser& p, DetailParts& parts) : p(p), offset(p.offset_) {
                p.detail_->reading = true;
                p.text_decoder_ = &parts.text_decoder();
                p.binary_decoder_ = &parts.binary_decoder();
            }
            ~Reading() {
                p.detail_->reading = false;
                p.text_decoder_ = &p.decoder_;
                p.binary_decoder_ = &p.own_binary_decoder_;
                p.offset_ = offset;
                p.skip_carried_ = 0;
                p.carrying_ = false;
            }
        } reading(*this, parts);
        skip_carried_ = rec.role == DetailParts::Role::Known ? 1 : 0;
        carrying_ = rec.role == DetailParts::Role::Carried;
        if (binary_) {
            frame(rec.letter, rec.payload, rec.offset);
        } else {
            split_fields(rec.line, f_);
            record();
        }
    });
}

void Parser::finish_detail() {
    choose_fold();
    read_detail(UINT64_MAX);
    Detail& d = *detail_;
    const DetailParts& parts = *d.parts;
    report_.detail_dropped = d.dropped;
    report_.detail_dropped_until = d.dropped_until;
    const auto limit = report_.info.find("report_limit");
    const std::string bound = limit == report_.info.end() ? ""
                                                          : " (MEMGUARD_MAX_REPORT_SIZE " + limit->second + " bytes)";
    // Parts deleted folded that no fold read here covers: load_report reads no fold (the one beside
    // the report has their figures, for the streaming commands); else their fold is gone.
    unsigned beside = 0, missing = 0;
    const std::vector<unsigned> folds = observer_ == nullptr && !d.folded_parts.empty() ? find_folds(report_.path)
                                                                                        : std::vector<unsigned>{};
    for (unsigned part : d.folded_parts) (!folds.empty() && part <= folds.front() ? beside : missing) += 1;
    report_.detail_fold_missing = missing;
    if (d.dropped > 0) {
        std::string missing_said;
        if (beside > 0) {
            missing_said = " (" + std::to_string(beside) + " of them folded into " +
                           fold_path(report_.path, folds.front()) + ": summary and top --at peak count them)";
        } else if (missing > 0) {
            missing_said = " (" + std::to_string(missing) +
                           " of them folded when deleted, but no fold beside the report covers them: copied without "
                           "its fold file?)";
        }
        warnings_.add_first(report_.path + ": detail dropped: a bounded report" + bound + " whose writer deleted " +
                            std::to_string(d.dropped_parts) + " detail part(s) (" + std::to_string(d.dropped) +
                            " allocations and frees, up to t=" + seconds_fixed3(d.dropped_until) +
                            " s) to stay under its limit" + missing_said +
                            "; what is shown counts the blocks live then and what came after");
    }
    if (d.fold_applied) {
        warnings_.add_first(
            report_.path + ": detail folded: a bounded report" + bound + " whose allocations and frees up to t=" +
            seconds_fixed3(report_.detail_folded_until) + " s (" + std::to_string(report_.detail_folded) +
            ") are folded into figures (" + fold_path(report_.path, d.fold->at.part) +
            "): the run's counts, peaks and the live set at them are whole; a point in time before then is not kept");
    } else if (d.fold_seen && parts.folded_gap() > 0) {
        warnings_.add_first(
            report_.path + ": detail folded: its allocations and frees up to t=" + seconds_fixed3(d.fold_seen->second) +
            " s are folded into figures (" + d.fold_seen->first + ") and " + std::to_string(parts.folded_gap()) +
            " of them deleted: summary, top --at peak and the other streamed commands read the fold; "
            "this command reads the detail, which starts at t=" +
            seconds_fixed3(d.fold_seen->second) + " s with the blocks live then");
    } else if (d.fold && !stopped_) {
        warnings_.add_first(fold_path(report_.path, d.fold->at.part) + ": the read did not reach detail part " +
                            std::to_string(d.fold->at.part + 1) + ", where the fold stands; left out");
    }
    if (parts.parts() == 0 && parts.position() > 0) {
        warnings_.add_first(report_.path + ": the detail parts of this bounded report are not beside it (" +
                            parts.part_path(1) + ", ...): its allocations and frees are missing");
    } else if (parts.gaps() > d.dropped) {
        warnings_.add_first(report_.path + ": " + std::to_string(parts.gaps() - d.dropped) +
                            " allocation and free records of its detail parts are missing (a part lost or cut short)");
    }
}

}  // namespace memguard::report
