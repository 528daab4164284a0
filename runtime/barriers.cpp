#include "runtime/barriers.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace strata::runtime {
namespace {

struct Touch {
  ByteRange range;
  size_t dispatch;
};

bool overlap(const ByteRange& a, const ByteRange& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

const Touch* find_overlap(const std::vector<Touch>& touches, const ByteRange& r) {
  for (const Touch& t : touches)
    if (overlap(t.range, r)) return &t;
  return nullptr;
}

// Sorted by (buffer, offset); overlapping or adjacent ranges of one buffer merged,
// so a barrier carries as few VkBufferMemoryBarriers as possible.
std::vector<ByteRange> merge(const std::vector<Touch>& touches) {
  std::vector<ByteRange> rs;
  for (const Touch& t : touches) rs.push_back(t.range);
  std::sort(rs.begin(), rs.end(), [](const ByteRange& a, const ByteRange& b) {
    return a.buffer != b.buffer ? a.buffer < b.buffer : a.offset < b.offset;
  });
  std::vector<ByteRange> out;
  for (const ByteRange& r : rs) {
    if (!out.empty() && out.back().buffer == r.buffer &&
        r.offset <= out.back().offset + out.back().size) {
      uint64_t end = std::max(out.back().offset + out.back().size, r.offset + r.size);
      out.back().size = end - out.back().offset;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::string range_str(const Plan& plan, const ByteRange& r) {
  return fmt::format("buffer '{}' [{}, {})", plan.buffers[r.buffer].name, r.offset,
                     r.offset + r.size);
}

// The first hazard between dispatch `d` and the pending accesses, described.
std::optional<std::string> find_hazard(const Plan& plan, size_t d,
                                       const std::vector<Touch>& written,
                                       const std::vector<Touch>& read) {
  for (const BindingDesc& b : plan.dispatches[d].bindings) {
    ByteRange r{b.buffer, b.offset, b.range};
    if (const Touch* t = find_overlap(written, r)) {
      return fmt::format("dispatch {} {} {} written by dispatch {}", d,
                         reads(b.access) ? "reads" : "writes", range_str(plan, r),
                         t->dispatch);
    }
    if (writes(b.access)) {
      if (const Touch* t = find_overlap(read, r)) {
        return fmt::format("dispatch {} writes {} read by dispatch {}", d, range_str(plan, r),
                           t->dispatch);
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<BarrierPoint> plan_barriers(const Plan& plan) {
  return plan_barriers(plan, 0, plan.dispatches.size());
}

std::vector<BarrierPoint> plan_barriers(const Plan& plan, size_t first, size_t count) {
  std::vector<BarrierPoint> points;
  std::vector<Touch> written, read;  // since the last barrier
  for (size_t d = first; d < first + count; ++d) {
    if (std::optional<std::string> reason = find_hazard(plan, d, written, read)) {
      points.push_back(BarrierPoint{d, merge(written), std::move(*reason)});
      written.clear();
      read.clear();
    }
    for (const BindingDesc& b : plan.dispatches[d].bindings) {
      Touch t{ByteRange{b.buffer, b.offset, b.range}, d};
      if (writes(b.access)) written.push_back(t);
      if (reads(b.access)) read.push_back(t);
    }
  }
  return points;
}

}  // namespace strata::runtime
