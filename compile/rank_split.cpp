// split_plan_for_rank: see rank_split.h for what it does and why it is exact.
// What each rank receives after a split node is worked out in rank_transfers.cpp.
#include "compile/rank_split.h"

#include "compile/rank_transfers.h"
#include "runtime/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace strata {
namespace {

// "<node>:band i/n", "<node>:apply i/n" or "<node>:stats i/n" → (node, kind, i - 1,
// n); anything else → none.
struct BandLabel {
  std::string node;
  std::string kind;
  int64_t index = 0;
  int64_t count = 0;
};

std::optional<BandLabel> parse_band_label(const std::string& label) {
  const size_t colon = label.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string_view step = std::string_view(label).substr(colon + 1);
  const size_t space = step.find(' '), slash = step.find('/');
  if (space == std::string_view::npos || slash == std::string_view::npos || slash < space) return std::nullopt;
  const std::string_view kind = step.substr(0, space);
  if (kind != "band" && kind != "apply" && kind != "stats") return std::nullopt;
  int64_t i = 0, n = 0;
  const std::string_view a = step.substr(space + 1, slash - space - 1), b = step.substr(slash + 1);
  if (std::from_chars(a.data(), a.data() + a.size(), i).ec != std::errc() ||
      std::from_chars(b.data(), b.data() + b.size(), n).ec != std::errc() || i < 1 || i > n || n < 2)
    return std::nullopt;
  return BandLabel{label.substr(0, colon), std::string(kind), i - 1, n};
}

// The one written binding of a dispatch, if it has exactly one.
const runtime::BindingDesc* only_write(const runtime::DispatchDesc& d) {
  const runtime::BindingDesc* written = nullptr;
  for (const runtime::BindingDesc& b : d.bindings) {
    if (b.access == runtime::Access::read) continue;
    if (written) return nullptr;
    written = &b;
  }
  return written;
}

// The shares of statistics windows j of `stats`: (mean, M2) slots s·chunks + c of
// chunks c in the window, for every segment s, from the partial binding's offset.
std::optional<std::vector<BandShare>> stats_shares(const runtime::BandDesc& stats, const runtime::BindingDesc& partial,
                                                   int64_t window, int owner) {
  constexpr uint64_t kSlot = 8;  // (mean, M2) in f32
  const int64_t c0 = window * stats.stats_window_chunks;
  const int64_t c1 = std::min(c0 + stats.stats_window_chunks, stats.stats_chunks);
  if (c0 >= c1 || static_cast<uint64_t>(stats.stats_segments * stats.stats_chunks) * kSlot > partial.range)
    return std::nullopt;
  std::vector<BandShare> out;
  for (int64_t s = 0; s < stats.stats_segments; ++s)
    out.push_back({owner, partial.buffer, partial.offset + static_cast<uint64_t>(s * stats.stats_chunks + c0) * kSlot,
                   static_cast<uint64_t>(c1 - c0) * kSlot});
  return out;
}

// The group of band dispatches starting at `first` (band 1 of n), if it is one the
// ranks can share: n consecutive dispatches, bands 1..n of one node and kind, each
// with exactly one written binding; bands and applies write one increasing run in
// one buffer, statistics windows the slots their BandDesc says.
// Band shares: band 0 writes [offset_0, end_0) (the window's aligned start may hold a
// few bytes before the node's rows; those bytes are the node's own: values start at
// an aligned offset), band j writes [end_{j-1}, end_j).
std::optional<SplitNode> band_group(const runtime::Plan& plan, uint32_t first, uint32_t end, int ranks) {
  const auto head = parse_band_label(plan.dispatches[first].label);
  if (!head || head->index != 0 || first + head->count > end) return std::nullopt;
  const runtime::BandDesc* stats = nullptr;
  if (head->kind == "stats") {
    for (const runtime::BandDesc& b : plan.bands)
      if (b.node == head->node && b.stats_window_chunks > 0) stats = &b;
    if (!stats || stats->stats_segments < 1 ||
        (stats->stats_chunks + stats->stats_window_chunks - 1) / stats->stats_window_chunks != head->count)
      return std::nullopt;
  }
  SplitNode split;
  split.node = head->node;
  split.kind = head->kind;
  split.bands = head->count;
  uint64_t previous_end = 0;
  const runtime::BindingDesc* first_write = nullptr;
  for (int64_t j = 0; j < head->count; ++j) {
    const runtime::DispatchDesc& d = plan.dispatches[first + static_cast<uint32_t>(j)];
    const auto label = parse_band_label(d.label);
    if (!label || label->node != head->node || label->kind != head->kind || label->index != j ||
        label->count != head->count)
      return std::nullopt;
    const runtime::BindingDesc* written = only_write(d);
    if (!written) return std::nullopt;
    if (!first_write) first_write = written;
    const int owner = band_owner(j, head->count, ranks);
    if (stats) {
      if (written->buffer != first_write->buffer || written->offset != first_write->offset) return std::nullopt;
      auto shares = stats_shares(*stats, *written, j, owner);
      if (!shares) return std::nullopt;
      split.shares.insert(split.shares.end(), shares->begin(), shares->end());
      continue;
    }
    const uint64_t window_end = written->offset + written->range;
    if (j > 0 && (written->buffer != first_write->buffer || written->offset > previous_end ||
                  window_end <= previous_end))
      return std::nullopt;
    const uint64_t begin = j == 0 ? written->offset : previous_end;
    split.shares.push_back({owner, written->buffer, begin, window_end - begin});
    previous_end = window_end;
  }
  return split;
}

// Seconds each rank spends receiving `transfers` (RankCostModel), added to `time`.
void add_receive_time(const std::vector<Transfer>& transfers, const RankCostModel& costs, std::vector<double>& time) {
  for (const Transfer& t : transfers)
    time[static_cast<size_t>(t.to)] += costs.message_latency_s + static_cast<double>(t.bytes) / costs.link_bytes_per_s;
}

bool meets(const ByteRun& a, uint32_t buffer, uint64_t offset, uint64_t bytes) {
  return a.buffer == buffer && a.offset < offset + bytes && offset < a.offset + a.bytes;
}

// Works out the transfers after placed[k] and, for a conv whose rows only the ranks'
// own later bands read, whether each rank recomputes the neighbours' bands it reads
// instead (RankCostModel): then those bands run on it too (access.extra) and nothing
// crosses after the node. The estimate of recomputing counts the bands' operations
// and what more the earlier split nodes whose rows they read must then send (the
// recomputed bands read a band of rows with its halos, where the exchange needed a
// halo), as those nodes' transfers stand now.
void choose_recompute_or_exchange(const runtime::Plan& plan, const std::vector<runtime::EntryDesc>& entries,
                                  std::span<PlacedSplit> placed, size_t k, PlanAccess& access, int ranks,
                                  const RankCostModel& costs) {
  PlacedSplit& p = placed[k];
  const runtime::EntryDesc& entry = entries[p.entry];
  bool whole = false;
  SplitNode& split = p.split;
  split.transfers = rank_transfers(plan, entry, p, access, ranks, &whole);
  if (split.kind != "band" || whole || split.transfers.empty()) return;
  const int64_t count = p.end - p.begin;
  const runtime::BandDesc* band = nullptr;
  for (const runtime::BandDesc& b : plan.bands)
    if (b.node == split.node && b.bands == count && b.flops_per_row > 0 && b.band_rows > 0) band = &b;
  if (!band || split.shares.size() != static_cast<size_t>(count)) return;
  const auto R = static_cast<size_t>(ranks);
  std::vector<double> exchange(R, 0), recompute(R, 0);
  add_receive_time(split.transfers, costs, exchange);
  std::vector<std::pair<int, int64_t>> bands;  // (rank, band) it would recompute
  for (const Transfer& t : split.transfers)
    for (int64_t j = 0; j < count; ++j) {
      const BandShare& s = split.shares[static_cast<size_t>(j)];
      if (s.owner != t.from ||
          std::none_of(t.runs.begin(), t.runs.end(), [&](const ByteRun& r) { return meets(r, s.buffer, s.offset, s.bytes); }))
        continue;
      bands.push_back({t.to, j});
      const int64_t rows = std::min(band->band_rows, band->frame_rows - j * band->band_rows);
      recompute[static_cast<size_t>(t.to)] +=
          static_cast<double>(rows) * static_cast<double>(band->flops_per_row) / costs.flops_per_s;
    }
  // The earlier split nodes (this plan) whose shares the recomputed bands read, and
  // what they would send more.
  std::vector<size_t> producers;
  for (size_t q = 0; q < k; ++q) {
    if (placed[q].entry != p.entry) continue;
    bool read = false;
    for (const auto& [rank, j] : bands)
      for (const ByteRun& r : access.reads[p.begin + static_cast<uint32_t>(j)])
        for (const BandShare& s : placed[q].split.shares) read = read || meets(r, s.buffer, s.offset, s.bytes);
    if (read) producers.push_back(q);
  }
  std::vector<double> before(R, 0), after(R, 0);
  for (size_t q : producers) add_receive_time(rank_transfers(plan, entry, placed[q], access, ranks), costs, before);
  for (const auto& [rank, j] : bands) access.extra[p.begin + static_cast<uint32_t>(j)].push_back(rank);
  for (size_t q : producers) add_receive_time(rank_transfers(plan, entry, placed[q], access, ranks), costs, after);
  for (size_t r = 0; r < R; ++r) recompute[r] += std::max(0.0, after[r] - before[r]);
  split.exchange_s = *std::max_element(exchange.begin(), exchange.end());
  split.recompute_s = *std::max_element(recompute.begin(), recompute.end());
  if (!(split.recompute_s < split.exchange_s)) {  // exchange: take the bands back
    for (const auto& [rank, j] : bands) access.extra[p.begin + static_cast<uint32_t>(j)].pop_back();
    return;
  }
  split.recompute = true;
  split.recomputed = std::move(bands);
  split.transfers = rank_transfers(plan, entry, p, access, ranks);
}

}  // namespace

uint64_t SplitNode::share_bytes() const {
  uint64_t n = 0;
  for (const BandShare& s : shares) n += s.bytes;
  return n;
}

uint64_t SplitNode::received(int rank) const {
  uint64_t n = 0;
  for (const Transfer& t : transfers) n += t.to == rank ? t.bytes : 0;
  return n;
}

uint64_t SplitNode::owned(int rank) const {
  uint64_t n = 0;
  for (const BandShare& s : shares) n += s.owner == rank ? s.bytes : 0;
  return n;
}

int band_owner(int64_t band, int64_t bands, int ranks) {
  return static_cast<int>(band * ranks / bands);
}

Expected<RankPlan> split_plan_for_rank(const runtime::Plan& plan, RankLayout layout, const RankCostModel& costs) {
  if (layout.ranks < 1 || layout.rank < 0 || layout.rank >= layout.ranks)
    return error("rank {} of {}: need 1 or more ranks and 0 <= rank < ranks", layout.rank, layout.ranks);
  STRATA_RETURN_IF_ERROR(runtime::validate(plan).with_context("splitting the plan across ranks"));
  // The groups of every entry and who runs each dispatch, before any transfer is
  // worked out: what a rank receives after a node depends on the dispatches it runs
  // later.
  const std::vector<runtime::EntryDesc> entries = runtime::entry_list(plan);
  std::vector<PlacedSplit> placed;
  if (layout.ranks > 1)
    for (size_t k = 0; k < entries.size(); ++k) {
      const uint32_t end = entries[k].first_dispatch + entries[k].dispatch_count;
      for (uint32_t i = entries[k].first_dispatch; i < end;) {
        std::optional<SplitNode> split = band_group(plan, i, end, layout.ranks);
        if (!split) {
          ++i;
          continue;
        }
        const auto count = static_cast<uint32_t>(split->bands);
        placed.push_back({k, i, i + count, std::move(*split)});
        i += count;
      }
    }
  // Last to first: what a node's ranks receive depends on who reads its rows later,
  // recomputed later bands included.
  PlanAccess access = plan_access(plan, placed, layout.ranks);
  for (size_t k = placed.size(); k-- > 0;)
    choose_recompute_or_exchange(plan, entries, placed, k, access, layout.ranks, costs);
  const std::vector<int>& runner = access.runner;

  RankPlan out;
  out.layout = layout;
  out.plan = plan;
  out.plan.dispatches.clear();
  out.plan.entries.clear();
  size_t next = 0;  // the next of `placed`
  for (size_t k = 0; k < entries.size(); ++k) {
    const runtime::EntryDesc& entry = entries[k];
    RankPlan::Entry e{entry.name, {}, {}};
    // The segment being filled; its inputs are the entry's (first segment only).
    runtime::EntryDesc segment;
    segment.inputs = entry.inputs;
    segment.first_dispatch = static_cast<uint32_t>(out.plan.dispatches.size());
    auto close_segment = [&]() {
      segment.name = fmt::format("{}#{}", entry.name, e.segments.size());
      segment.dispatch_count = static_cast<uint32_t>(out.plan.dispatches.size()) - segment.first_dispatch;
      e.segments.push_back(static_cast<uint32_t>(out.plan.entries.size()));
      out.plan.entries.push_back(segment);
      segment = runtime::EntryDesc{};
      segment.first_dispatch = static_cast<uint32_t>(out.plan.dispatches.size());
    };
    const uint32_t end = entry.first_dispatch + entry.dispatch_count;
    for (uint32_t i = entry.first_dispatch; i < end; ++i) {
      const std::vector<int>& extra = access.extra[i];
      if (runner[i] == kEveryRank || runner[i] == layout.rank ||
          std::find(extra.begin(), extra.end(), layout.rank) != extra.end())
        out.plan.dispatches.push_back(plan.dispatches[i]);
      if (next < placed.size() && placed[next].entry == k && placed[next].end == i + 1) {
        SplitNode& split = placed[next++].split;
        out.shared_dispatches += static_cast<int64_t>(placed[next - 1].end - placed[next - 1].begin);
        ++out.split_nodes;
        out.received_bytes += split.received(layout.rank);
        out.gathered_bytes += split.share_bytes() - split.owned(layout.rank);
        uint64_t sent = 0;
        for (const Transfer& t : split.transfers) sent += t.from == layout.rank ? t.bytes : 0;
        out.largest_exchange = std::max({out.largest_exchange, sent, split.received(layout.rank)});
        close_segment();
        e.splits.push_back(std::move(split));
      }
    }
    segment.outputs = entry.outputs;
    segment.state_writes = entry.state_writes;
    close_segment();
    out.entries.push_back(std::move(e));
  }
  out.kept_dispatches = static_cast<int64_t>(out.plan.dispatches.size());
  STRATA_RETURN_IF_ERROR(runtime::validate(out.plan).with_context(
      fmt::format("the plan of rank {} of {}", layout.rank, layout.ranks)));
  return out;
}

Expected<std::string> explain_rank_split(const runtime::Plan& plan, int ranks, const RankCostModel& costs) {
  STRATA_ASSIGN_OR_RETURN(RankPlan p, split_plan_for_rank(plan, {ranks, 0}, costs));
  std::string s = fmt::format("ranks: {} nodes split across {} ranks ({} band dispatches); every other node runs on "
                              "every rank; after each split node a rank receives the bytes of the others' bands "
                              "it reads later\n",
                              p.split_nodes, ranks, p.shared_dispatches);
  for (const RankPlan::Entry& e : p.entries)
    for (const SplitNode& n : e.splits) {
      // Shares in owner runs; a statistics window has one share per segment.
      const bool stats = n.kind == "stats";
      const size_t units = static_cast<size_t>(n.bands), per = n.shares.size() / units;
      std::string owners;
      for (size_t j = 0; j < units;) {
        size_t last = j;
        while (last + 1 < units && n.shares[(last + 1) * per].owner == n.shares[j * per].owner) ++last;
        uint64_t bytes = 0;
        for (size_t k = j * per; k < (last + 1) * per; ++k) bytes += n.shares[k].bytes;
        const char* unit = stats ? "window" : "band";
        const std::string bands = last == j ? fmt::format("{} {}", unit, j + 1)
                                            : fmt::format("{}s {}-{}", unit, j + 1, last + 1);
        owners += fmt::format("{}rank {}: {} ({} bytes)", owners.empty() ? "" : ", ", n.shares[j * per].owner, bands,
                              bytes);
        j = last + 1;
      }
      std::string received;
      uint64_t all = 0;
      for (int r = 0; r < ranks; ++r) {
        received += fmt::format("{}{}", r == 0 ? "" : " ", n.received(r));
        all += n.received(r);
      }
      const uint64_t whole = n.share_bytes() * static_cast<uint64_t>(ranks - 1);
      // The cost model's choice, where the node was a candidate.
      std::string choice;
      if (n.exchange_s > 0) {
        choice = fmt::format("; {} (estimates: exchange {:.1f} us, recompute {:.1f} us)",
                             n.recompute ? "recompute" : "exchange", n.exchange_s * 1e6, n.recompute_s * 1e6);
        for (const auto& [rank, band] : n.recomputed) choice += fmt::format(", rank {} runs band {}", rank, band + 1);
      }
      s += fmt::format("  {}{}{}: {} {}; {}; receive {} bytes (ranks 0..{}: {}; a whole gather: {}{}){}\n",
                       p.entries.size() > 1 ? e.name + ": " : "", n.node, stats ? " statistics" : "", units,
                       stats ? "windows" : "bands", owners, all, ranks - 1, received, whole,
                       all == whole ? ", all of it" : "", choice);
    }
  for (int r = 0; r < ranks; ++r) {
    STRATA_ASSIGN_OR_RETURN(RankPlan mine, split_plan_for_rank(plan, {ranks, r}, costs));
    s += fmt::format("  rank {} runs {} of {} dispatches, receives {} bytes per run (a whole gather: {})\n", r,
                     mine.kept_dispatches, plan.dispatches.size(), mine.received_bytes, mine.gathered_bytes);
  }
  return s;
}

Status exchange_split(runtime::Executor& executor, const SplitNode& split, RankLayout layout, RankExchange& exchange) {
  if (split.transfers.empty()) return Status::ok();
  const auto ranks = static_cast<size_t>(layout.ranks);
  std::vector<uint64_t> send_counts(ranks, 0), recv_counts(ranks, 0);
  uint64_t largest = 0;
  for (const Transfer& t : split.transfers) {
    if (t.from == layout.rank) send_counts[static_cast<size_t>(t.to)] += t.bytes;
    if (t.to == layout.rank) recv_counts[static_cast<size_t>(t.from)] += t.bytes;
    largest = std::max(largest, t.bytes);
  }
  uint64_t sending = 0, receiving = 0;
  for (size_t r = 0; r < ranks; ++r) sending += send_counts[r], receiving += recv_counts[r];
  std::vector<std::byte> send(sending), recv(receiving);
  // Transfers are sorted by (from, to): this rank's sends come in destination order,
  // its receipts in source order, as alltoall lays them out. One batch of reads, one
  // of writes (Executor::read_windows: one submit each on a discrete GPU).
  std::vector<runtime::Window> reads, writes;
  for (const Transfer& t : split.transfers)
    for (const ByteRun& run : t.runs) {
      if (t.from == layout.rank) reads.push_back({run.buffer, run.offset, run.bytes});
      if (t.to == layout.rank) writes.push_back({run.buffer, run.offset, run.bytes});
    }
  const std::string what = fmt::format("exchanging the rows of '{}' (rank {} of {})", split.node, layout.rank,
                                       layout.ranks);
  STRATA_RETURN_IF_ERROR(executor.read_windows(reads, send).with_context(what));
  STRATA_RETURN_IF_ERROR(exchange.alltoall(send, send_counts, recv, recv_counts, largest).with_context(what));
  STRATA_RETURN_IF_ERROR(executor.write_windows(writes, recv).with_context(what));
  return Status::ok();
}

}  // namespace strata
