#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace strata {

std::string errno_text(int e) { return std::strerror(e); }

Status write_file_via(const std::string& path, const std::function<Status(const std::string& temporary)>& write) {
  namespace fs = std::filesystem;
  static std::atomic<uint64_t> counter{0};
  const fs::path target(path);
  const std::string temporary =
      (target.parent_path() / fmt::format(".{}.partial-{}-{}", target.filename().string(),
                                          static_cast<long>(::getpid()), counter.fetch_add(1)))
          .string();
  std::error_code ec;
  if (Status s = write(temporary); !s.is_ok()) {
    fs::remove(temporary, ec);
    return s;
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    fs::remove(temporary, ec);
    return error("cannot write '{}': {}", path, ec.message());
  }
  return Status::ok();
}

Status write_file_atomic(const std::string& path, std::initializer_list<std::span<const uint8_t>> parts,
                         const std::string& context) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // A unique name in the target's directory, so the rename is atomic and two writers
  // never share a temporary file (O_EXCL; a name already taken is skipped).
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    tmp = (dir / fmt::format(".{}.tmp-{}-{}-{:x}", target.filename().string(), static_cast<long>(::getpid()),
                             counter.fetch_add(1), static_cast<uint64_t>(ticks)))
              .string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      return error("{}: cannot create temporary file in '{}': {}", context, dir.string(), errno_text(errno));
  }
  if (fd < 0) return error("{}: cannot find a free temporary file name in '{}'", context, dir.string());

  auto abandon = [&](const std::string& what, int e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return error("{}: {} '{}': {}", context, what, tmp, errno_text(e));
  };
  for (std::span<const uint8_t> bytes : parts) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return abandon("cannot write", errno);
      done += static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) return abandon("cannot fsync", errno);
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return error("{}: cannot close '{}': {}", context, tmp, errno_text(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return error("{}: cannot rename '{}' to it: {}", context, tmp, errno_text(e));
  }
  // Make the rename itself durable. Some file systems cannot fsync a directory
  // (EINVAL); the file is complete either way.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    int rc = ::fsync(dfd);
    int e = errno;
    ::close(dfd);
    if (rc != 0 && e != EINVAL && e != EROFS)
      return error("{}: written, but cannot fsync directory '{}': {}", context, dir.string(), errno_text(e));
  }
  return Status::ok();
}

}  // namespace strata
