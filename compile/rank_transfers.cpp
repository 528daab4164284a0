// rank_transfers: see rank_transfers.h.
#include "compile/rank_transfers.h"

#include <algorithm>
#include <map>
#include <utility>

namespace strata {
namespace {

// Disjoint runs of bytes, sorted by (buffer, offset), adjacent runs merged.
class RunSet {
public:
  bool empty() const { return runs_.empty(); }
  const std::vector<ByteRun>& runs() const { return runs_; }

  void add(const ByteRun& r) {
    if (r.bytes == 0) return;
    uint64_t begin = r.offset, end = r.offset + r.bytes;
    std::vector<ByteRun> out;
    out.reserve(runs_.size() + 1);
    for (const ByteRun& x : runs_) {
      const uint64_t xe = x.offset + x.bytes;
      if (x.buffer != r.buffer || xe < begin || x.offset > end) {  // apart (touching runs merge)
        out.push_back(x);
        continue;
      }
      begin = std::min(begin, x.offset);
      end = std::max(end, xe);
    }
    out.push_back({r.buffer, begin, end - begin});
    std::sort(out.begin(), out.end(), [](const ByteRun& p, const ByteRun& q) {
      return p.buffer != q.buffer ? p.buffer < q.buffer : p.offset < q.offset;
    });
    runs_ = std::move(out);
  }

  void subtract(const ByteRun& r) {
    const uint64_t begin = r.offset, end = r.offset + r.bytes;
    std::vector<ByteRun> out;
    out.reserve(runs_.size() + 1);
    for (const ByteRun& x : runs_) {
      const uint64_t xe = x.offset + x.bytes;
      if (x.buffer != r.buffer || xe <= begin || x.offset >= end) {
        out.push_back(x);
        continue;
      }
      if (x.offset < begin) out.push_back({x.buffer, x.offset, begin - x.offset});
      if (xe > end) out.push_back({x.buffer, end, xe - end});
    }
    runs_ = std::move(out);
  }

  // The parts of this set inside `r`, added to `into`.
  void intersect_into(const ByteRun& r, RunSet& into) const {
    const uint64_t begin = r.offset, end = r.offset + r.bytes;
    for (const ByteRun& x : runs_) {
      if (x.buffer != r.buffer) continue;
      const uint64_t b = std::max(begin, x.offset), e = std::min(end, x.offset + x.bytes);
      if (b < e) into.add({x.buffer, b, e - b});
    }
  }

private:
  std::vector<ByteRun> runs_;
};

}  // namespace

PlanAccess plan_access(const runtime::Plan& plan, std::span<const PlacedSplit> placed, int ranks) {
  PlanAccess a;
  const size_t n = plan.dispatches.size();
  a.runner.assign(n, kEveryRank);
  a.extra.resize(n);
  a.reads.resize(n);
  a.writes.resize(n);
  for (size_t i = 0; i < n; ++i)
    for (const runtime::BindingDesc& b : plan.dispatches[i].bindings) {
      if (runtime::reads(b.access)) a.reads[i].push_back({b.buffer, b.offset, b.range});
      if (runtime::writes(b.access)) a.writes[i].push_back({b.buffer, b.offset, b.range});
    }
  // A band or statistics window writes its shares, exactly (its window may start a
  // little before its rows, over the previous band's).
  for (const PlacedSplit& p : placed) {
    const uint32_t count = p.end - p.begin;
    const size_t per = p.split.shares.size() / count;
    for (uint32_t j = 0; j < count; ++j) {
      a.runner[p.begin + j] = band_owner(j, count, ranks);
      std::vector<ByteRun>& w = a.writes[p.begin + j];
      w.clear();
      for (size_t k = j * per; k < (j + 1) * per; ++k) {
        const BandShare& s = p.split.shares[k];
        w.push_back({s.buffer, s.offset, s.bytes});
      }
    }
  }
  return a;
}

std::vector<Transfer> rank_transfers(const runtime::Plan& plan, const runtime::EntryDesc& entry,
                                     const PlacedSplit& at, const PlanAccess& access, int ranks,
                                     bool* read_by_every) {
  const auto R = static_cast<size_t>(ranks);
  // live[o]: owner o's shares not yet overwritten; every[o]: the parts of them every
  // rank reads; one[(o, r)]: the parts rank r alone reads.
  std::vector<RunSet> live(R), every(R);
  std::map<std::pair<size_t, size_t>, RunSet> one;
  for (const BandShare& s : at.split.shares) live[static_cast<size_t>(s.owner)].add({s.buffer, s.offset, s.bytes});
  auto all_dead = [&] { return std::all_of(live.begin(), live.end(), [](const RunSet& l) { return l.empty(); }); };
  auto read = [&](const ByteRun& run, int runner) {
    for (size_t o = 0; o < R; ++o) {
      if (runner == kEveryRank) live[o].intersect_into(run, every[o]);
      else if (static_cast<size_t>(runner) != o) live[o].intersect_into(run, one[{o, static_cast<size_t>(runner)}]);
    }
  };
  const uint32_t end = entry.first_dispatch + entry.dispatch_count;
  for (uint32_t d = at.end; d < end && !all_dead(); ++d) {
    for (const ByteRun& r : access.reads[d]) {
      read(r, access.runner[d]);
      for (int x : access.extra[d]) read(r, x);
    }
    for (const ByteRun& w : access.writes[d])
      for (RunSet& l : live) l.subtract(w);
  }
  // The end of the plan: outputs, state write-backs, state buffers.
  for (uint32_t o : entry.outputs) {
    const runtime::TensorIO& io = plan.outputs[o];
    read({io.buffer, io.offset, io.bytes}, kEveryRank);
  }
  for (const runtime::StateWrite& sw : entry.state_writes)
    read({sw.buffer, sw.offset, plan.states[sw.state].bytes}, kEveryRank);
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].usage == runtime::BufferUsage::state)
      read({static_cast<uint32_t>(b), 0, plan.buffers[b].size_bytes}, kEveryRank);

  if (read_by_every)
    *read_by_every = std::any_of(every.begin(), every.end(), [](const RunSet& e) { return !e.empty(); });
  // held[r]: the shares of the bands rank r recomputes.
  std::vector<RunSet> held(R);
  const size_t per = at.split.shares.size() / (at.end - at.begin);
  for (uint32_t j = 0; j < at.end - at.begin; ++j)
    for (int x : access.extra[at.begin + j])
      for (size_t k = j * per; k < (j + 1) * per; ++k) {
        const BandShare& s = at.split.shares[k];
        held[static_cast<size_t>(x)].add({s.buffer, s.offset, s.bytes});
      }
  std::vector<Transfer> out;
  for (size_t o = 0; o < R; ++o)
    for (size_t r = 0; r < R; ++r) {
      if (o == r) continue;
      RunSet runs = every[o];
      if (auto it = one.find({o, r}); it != one.end())
        for (const ByteRun& x : it->second.runs()) runs.add(x);
      for (const ByteRun& x : held[r].runs()) runs.subtract(x);
      if (runs.empty()) continue;
      Transfer t{static_cast<int>(o), static_cast<int>(r), runs.runs(), 0};
      for (const ByteRun& x : t.runs) t.bytes += x.bytes;
      out.push_back(std::move(t));
    }
  return out;
}

}  // namespace strata
