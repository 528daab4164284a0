// The Plan file: a Plan (runtime/plan.h) as bytes, for the plan cache and
// `strata inspect`. The format, byte by byte, is in docs/PLAN_FORMAT.md.
//
// A plan file is a fixed 32-byte header (magic "STRATAPL", format version, total
// length, FNV-1a 64 checksum of the payload) followed by the payload: every field of
// the Plan, little-endian, strings and vectors prefixed by their length. The same
// Plan always gives the same bytes (the plan cache relies on it).
//
// Reading never trusts the input. A wrong magic number, another format version, a
// length that does not match, a checksum mismatch, a truncated field, a count that
// would run past the end, an out-of-range enum or bool, or bytes left over are all
// errors that say what is wrong and at which byte; a plan that parses is then
// checked with validate() (runtime/plan.h). No input makes the reader crash or
// allocate more than a small multiple of the input's size.
#pragma once

#include "runtime/plan.h"
#include "runtime/status.h"

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace strata::runtime {

inline constexpr char kPlanFileMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'P', 'L'};
inline constexpr size_t kPlanHeaderBytes = 32;
// Plan files larger than this are refused by both the writer and the reader (a
// banded 4096² decoder's plan is a few MiB; a file this large is not a plan).
inline constexpr uint64_t kMaxPlanFileBytes = 1ull << 30;

// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3): the
// payload checksum of the header.
uint64_t fnv1a64(std::span<const uint8_t> bytes);

// The plan's bytes: header and payload, in format kPlanFormatVersion. The header
// always carries kPlanFormatVersion (the only layout this code writes), whatever
// plan.format_version says; write_plan_file refuses a plan that validate() rejects.
std::vector<uint8_t> serialize_plan(const Plan& plan);

// Parses and validates a plan file's bytes. Errors name the problem and the byte
// offset, e.g. "truncated at byte 913 while reading dispatch 12 bindings count
// (needs 8 bytes, 3 left)" or "checksum mismatch: header says 0x..., payload hashes
// to 0x... (the file is corrupt)".
Expected<Plan> deserialize_plan(std::span<const uint8_t> bytes);

// Writes serialize_plan(plan) to `path` atomically: to a new temporary file in the
// same directory (O_EXCL), fsync, rename over `path`, fsync of the directory. On
// failure the temporary file is removed and `path` is untouched. Errors: the plan
// does not validate, or the system call that failed with its errno text, e.g.
// "plan file 'out/x.plan': cannot create temporary file in 'out': Permission denied".
Status write_plan_file(const std::string& path, const Plan& plan);

// Reads and deserializes `path`. Every error starts with "plan file 'PATH': ".
Expected<Plan> read_plan_file(const std::string& path);

}  // namespace strata::runtime
