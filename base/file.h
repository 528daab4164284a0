// Files written whole or not at all.
#pragma once

#include "base/status.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

namespace strata {

// Writes `parts` one after the other to a new temporary file beside `path` (O_EXCL,
// a unique name, so two writers never share one), fsyncs it, renames it over `path`
// and fsyncs the directory: readers see the old file or the new one, never a part.
// On failure the temporary file is removed and `path` is untouched. Errors start
// with `context` and name the system call that failed with its errno text, e.g.
// "plan file 'out/x.plan': cannot create temporary file in 'out': Permission denied".
Status write_file_atomic(const std::string& path, std::initializer_list<std::span<const uint8_t>> parts,
                         const std::string& context);

// A file made by `write` (given a temporary path beside `path`) and then renamed over
// `path`: readers, and a run that fails or is killed, never see a partial file. On
// failure the temporary file is removed. For writers that open their own file (.npy,
// PNG); write_file_atomic is for bytes in memory.
Status write_file_via(const std::string& path, const std::function<Status(const std::string& temporary)>& write);

// strerror(e).
std::string errno_text(int e);

}  // namespace strata
