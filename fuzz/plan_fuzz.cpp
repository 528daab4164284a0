// The plan file reader (runtime/plan_io.h). Each input is read twice: as it is (the
// header's checks) and with its header's length and checksum restamped, so that
// mutations reach the payload's fields instead of dying at the checksum. A plan that
// reads back must serialize to bytes that read back to the same bytes.
#include "runtime/plan_io.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata::runtime;
  (void)deserialize_plan(std::span(data, size));
  if (size < kPlanHeaderBytes) return 0;
  std::vector<uint8_t> stamped(data, data + size);
  const uint64_t total = size;
  const uint64_t sum = fnv1a64(std::span(stamped).subspan(kPlanHeaderBytes));
  std::memcpy(stamped.data() + 16, &total, 8);
  std::memcpy(stamped.data() + 24, &sum, 8);
  auto plan = deserialize_plan(stamped);
  if (!plan) return 0;
  const std::vector<uint8_t> bytes = serialize_plan(*plan);
  auto again = deserialize_plan(bytes);
  if (!again || serialize_plan(*again) != bytes) std::abort();
  return 0;
}
