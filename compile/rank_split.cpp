// split_plan_for_rank: see rank_split.h for what it does and why it is exact.
#include "compile/rank_split.h"

#include "runtime/executor.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

namespace strata {
namespace {

// "<node>:band i/n" or "<node>:apply i/n" → (node, i - 1, n); anything else → none.
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
  if (kind != "band" && kind != "apply") return std::nullopt;
  int64_t i = 0, n = 0;
  const std::string_view a = step.substr(space + 1, slash - space - 1), b = step.substr(slash + 1);
  if (std::from_chars(a.data(), a.data() + a.size(), i).ec != std::errc() ||
      std::from_chars(b.data(), b.data() + b.size(), n).ec != std::errc() || i < 1 || i > n || n < 2)
    return std::nullopt;
  return BandLabel{label.substr(0, colon), std::string(kind), i - 1, n};
}

// The group of band dispatches starting at `first` (band 1 of n), if it is one the
// ranks can share: n consecutive dispatches, bands 1..n of one node and kind, each
// with exactly one written binding, the writes one increasing run in one buffer.
// Its shares: band 0 writes [offset_0, end_0) (the window's aligned start may hold a
// few bytes before the node's rows; every rank holds the same bytes there), band j
// writes [end_{j-1}, end_j).
std::optional<SplitNode> band_group(const runtime::Plan& plan, uint32_t first, uint32_t end, int ranks) {
  const auto head = parse_band_label(plan.dispatches[first].label);
  if (!head || head->index != 0 || first + head->count > end) return std::nullopt;
  SplitNode split{head->node, {}};
  uint64_t previous_end = 0;
  for (int64_t j = 0; j < head->count; ++j) {
    const runtime::DispatchDesc& d = plan.dispatches[first + static_cast<uint32_t>(j)];
    const auto label = parse_band_label(d.label);
    if (!label || label->node != head->node || label->kind != head->kind || label->index != j ||
        label->count != head->count)
      return std::nullopt;
    const runtime::BindingDesc* written = nullptr;
    for (const runtime::BindingDesc& b : d.bindings) {
      if (b.access == runtime::Access::read) continue;
      if (written) return std::nullopt;
      written = &b;
    }
    if (!written) return std::nullopt;
    const uint64_t window_end = written->offset + written->range;
    if (j > 0 && (written->buffer != split.shares[0].buffer || written->offset > previous_end ||
                  window_end <= previous_end))
      return std::nullopt;
    const uint64_t begin = j == 0 ? written->offset : previous_end;
    split.shares.push_back({band_owner(j, head->count, ranks), written->buffer, begin, window_end - begin});
    previous_end = window_end;
  }
  return split;
}

}  // namespace

int band_owner(int64_t band, int64_t bands, int ranks) {
  return static_cast<int>(band * ranks / bands);
}

Expected<RankPlan> split_plan_for_rank(const runtime::Plan& plan, RankLayout layout) {
  if (layout.ranks < 1 || layout.rank < 0 || layout.rank >= layout.ranks)
    return error("rank {} of {}: need 1 or more ranks and 0 <= rank < ranks", layout.rank, layout.ranks);
  STRATA_RETURN_IF_ERROR(runtime::validate(plan).with_context("splitting the plan across ranks"));
  RankPlan out;
  out.layout = layout;
  out.plan = plan;
  out.plan.dispatches.clear();
  out.plan.entries.clear();
  for (const runtime::EntryDesc& entry : runtime::entry_list(plan)) {
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
    for (uint32_t i = entry.first_dispatch; i < end;) {
      std::optional<SplitNode> split = layout.ranks > 1 ? band_group(plan, i, end, layout.ranks) : std::nullopt;
      if (!split) {
        out.plan.dispatches.push_back(plan.dispatches[i++]);
        continue;
      }
      for (size_t j = 0; j < split->shares.size(); ++j)
        if (split->shares[j].owner == layout.rank) out.plan.dispatches.push_back(plan.dispatches[i + j]);
      i += static_cast<uint32_t>(split->shares.size());
      out.shared_dispatches += static_cast<int64_t>(split->shares.size());
      ++out.split_nodes;
      close_segment();
      e.splits.push_back(std::move(*split));
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

Expected<std::string> explain_rank_split(const runtime::Plan& plan, int ranks) {
  STRATA_ASSIGN_OR_RETURN(RankPlan p, split_plan_for_rank(plan, {ranks, 0}));
  std::string s = fmt::format("ranks: {} nodes split across {} ranks ({} band dispatches); every other node runs on "
                              "every rank\n",
                              p.split_nodes, ranks, p.shared_dispatches);
  for (const RankPlan::Entry& e : p.entries)
    for (const SplitNode& n : e.splits) {
      std::string owners;
      for (size_t j = 0; j < n.shares.size();) {
        size_t last = j;
        while (last + 1 < n.shares.size() && n.shares[last + 1].owner == n.shares[j].owner) ++last;
        uint64_t bytes = 0;
        for (size_t k = j; k <= last; ++k) bytes += n.shares[k].bytes;
        const std::string bands = last == j ? fmt::format("band {}", j + 1) : fmt::format("bands {}-{}", j + 1, last + 1);
        owners += fmt::format("{}rank {}: {} ({} bytes)", owners.empty() ? "" : ", ", n.shares[j].owner, bands, bytes);
        j = last + 1;
      }
      s += fmt::format("  {}{}: {} bands; {}\n", p.entries.size() > 1 ? e.name + ": " : "", n.node, n.shares.size(),
                       owners);
    }
  for (int r = 0; r < ranks; ++r) {
    STRATA_ASSIGN_OR_RETURN(RankPlan mine, split_plan_for_rank(plan, {ranks, r}));
    s += fmt::format("  rank {} runs {} of {} dispatches\n", r, mine.kept_dispatches, plan.dispatches.size());
  }
  return s;
}

Status exchange_split(runtime::Executor& executor, const SplitNode& split, RankLayout layout, RankExchange& exchange) {
  const auto ranks = static_cast<size_t>(layout.ranks);
  std::vector<uint64_t> counts(ranks, 0), start(ranks, 0);
  for (const BandShare& s : split.shares) counts[static_cast<size_t>(s.owner)] += s.bytes;
  for (size_t r = 1; r < ranks; ++r) start[r] = start[r - 1] + counts[r - 1];
  std::vector<std::byte> all(start.back() + counts.back());
  std::span<std::byte> mine = std::span(all).subspan(start[static_cast<size_t>(layout.rank)],
                                                     counts[static_cast<size_t>(layout.rank)]);
  // This rank's rows, in band order, read before the exchange fills `all` around them.
  std::vector<std::byte> own(mine.size());
  uint64_t at = 0;
  for (const BandShare& s : split.shares)
    if (s.owner == layout.rank) {
      STRATA_RETURN_IF_ERROR(executor.read_window(s.buffer, s.offset, std::span(own).subspan(at, s.bytes)));
      at += s.bytes;
    }
  STRATA_RETURN_IF_ERROR(exchange.allgather(own, counts, all).with_context(
      fmt::format("exchanging the rows of '{}' (rank {} of {})", split.node, layout.rank, layout.ranks)));
  std::vector<uint64_t> cursor = start;
  for (const BandShare& s : split.shares) {
    const auto r = static_cast<size_t>(s.owner);
    if (s.owner != layout.rank)
      STRATA_RETURN_IF_ERROR(executor.write_window(s.buffer, s.offset, std::span(all).subspan(cursor[r], s.bytes)));
    cursor[r] += s.bytes;
  }
  return Status::ok();
}

}  // namespace strata
