#include "tools/video_output.h"

#include "tools/png_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#ifdef STRATA_HAVE_FFMPEG
#include "tools/mp4_encoder.h"
#endif

namespace strata {

namespace fs = std::filesystem;

VideoWriter::~VideoWriter() = default;

namespace {

std::string errno_text(int e) { return std::strerror(e); }

bool is_frame_png_name(const std::string& name) {
  // frame_<digits>.png, as PngFramesWriter names them.
  const std::string pre = "frame_", post = ".png";
  if (name.size() <= pre.size() + post.size() || name.rfind(pre, 0) != 0 ||
      name.compare(name.size() - post.size(), post.size(), post) != 0)
    return false;
  for (size_t i = pre.size(); i < name.size() - post.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

// An existing folder OUT may be replaced only when it looks like an earlier output:
// empty, or nothing but frame_*.png files. Anything else is refused so that a slip
// such as `--out ~/` cannot delete a folder of the user's files.
Status check_replaceable_folder(const std::string& out) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return Status::ok();
  if (!fs::is_directory(out, ec))
    return error("cannot write PNG frames to '{}': it exists and is not a directory", out);
  for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_frame_png_name(name) || !it->is_regular_file())
      return error("cannot write PNG frames to '{}': the folder exists and holds '{}', which "
                   "is not an earlier frame; refusing to replace it (choose a new or empty "
                   "folder)",
                   out, name);
  }
  if (ec) return error("cannot write PNG frames to '{}': {}", out, ec.message());
  return Status::ok();
}

// The temporary sibling of OUT: same folder, so the final rename stays on one
// filesystem and is atomic. The counter keeps two writers in one process apart.
std::string temporary_sibling(const std::string& out, const char* what) {
  static std::atomic<int> counter{0};
  return fmt::format("{}.{}-{}-{}", out, what, getpid(), counter++);
}

// Writes all of `size` bytes at `offset` (pwrite may write fewer).
bool pwrite_all(int fd, const void* data, size_t size, off_t offset) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, p, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    p += n;
    size -= size_t(n);
    offset += n;
  }
  return true;
}

// The .npy header NumPy writes for a C-order '<f4' array of `shape`: version 1.0
// (2.0 if the dict does not fit 16 bits), the dict padded with spaces so that the
// data starts at a multiple of 64. Same layout as ir/npy.cpp's write_npy, which the
// test compares byte for byte.
std::string npy_f32_header(const Shape& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  auto padded_len = [&](size_t prefix) {
    size_t n = dict.size() + 1;
    return n + (64 - (prefix + n) % 64) % 64;
  };
  const bool v1 = padded_len(10) <= 65535;
  const size_t header_len = padded_len(v1 ? 10 : 12);
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += char(v1 ? 1 : 2);
  out += char(0);
  const uint32_t len = uint32_t(dict.size());
  out.append(reinterpret_cast<const char*>(&len), v1 ? 2 : 4);  // little-endian host
  return out + dict;
}

// The temporary being filled, where a fatal-signal handler can reach it without
// allocating (remove_output_temporary_after_signal). One writer at a time registers.
char g_temporary[4096];
std::atomic<int> g_temporary_kind{0};  // 0: none, 1: file, 2: folder

void register_temporary(const std::string& path, bool folder) {
  if (path.size() >= sizeof g_temporary) return;  // too long to remember: left to the destructor
  g_temporary_kind = 0;
  std::memcpy(g_temporary, path.c_str(), path.size() + 1);
  g_temporary_kind = folder ? 2 : 1;
}

// What all formats share: the frame count and shape checks, the temporary's life
// and the final rename. Subclasses put one frame and complete the output.
class WriterBase : public VideoWriter {
public:
  WriterBase(VideoOutputOptions o, std::string tmp, bool is_folder)
      : VideoWriter(std::move(o)), tmp_(std::move(tmp)), is_folder_(is_folder) {
    register_temporary(tmp_, is_folder_);
  }

  ~WriterBase() override {
    g_temporary_kind = 0;
    if (state_ != State::done) remove_temporary();
  }

  Status write_frame(const Tensor& chw) final {
    if (state_ != State::open) return context(error("{}", dead_reason()));
    if (frames_written_ >= options_.frames)
      return fail(error("frame {} is past the {} frames announced", frames_written_ + 1,
                        options_.frames));
    const Shape& s = chw.shape;
    const bool batched = s.size() == 4 && s[0] == 1;
    if (!(s.size() == 3 || batched) || s[s.size() - 3] != 3 ||
        s[s.size() - 2] != options_.height || s[s.size() - 1] != options_.width)
      return fail(error("frame {} has shape {}, expected [3,{},{}] (or with a batch dim of 1)",
                        frames_written_, shape_str(s), options_.height, options_.width));
    if (size_t(num_elements(s)) != chw.data.size())
      return fail(error("frame {} of shape {} holds {} values, expected {}", frames_written_,
                        shape_str(s), chw.data.size(), num_elements(s)));
    Status st = put_frame(frames_written_, chw);
    if (!st) return fail(st);
    ++frames_written_;
    return Status::ok();
  }

  Status finish() final {
    if (state_ != State::open) return context(error("{}", dead_reason()));
    if (frames_written_ < options_.frames)
      return fail(error("only {} of the {} frames announced were written", frames_written_,
                        options_.frames));
    Status st = complete();
    if (!st) return fail(st);
    g_temporary_kind = 0;  // from here on the temporary becomes OUT
    st = is_folder_ ? commit_folder() : commit_file();
    if (!st) return fail(st);
    state_ = State::done;
    return Status::ok();
  }

protected:
  virtual Status put_frame(int64_t index, const Tensor& chw) = 0;
  virtual Status complete() = 0;  // everything written and closed in tmp_

  const std::string& tmp() const { return tmp_; }

private:
  enum class State { open, failed, done };

  Status context(const Status& s) const {
    return s.with_context(fmt::format("video '{}'", options_.path));
  }
  std::string dead_reason() const {
    return state_ == State::done ? "finish() was already called"
                                 : "an earlier error stopped this writer";
  }
  // After any error: the writer is dead and its temporary removed, so nothing
  // partial is left (a subclass's still-open handle points at an unlinked file).
  Status fail(const Status& s) {
    state_ = State::failed;
    remove_temporary();
    return s.with_context(fmt::format("video '{}' not written", options_.path));
  }
  void remove_temporary() {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  Status commit_file() {
    if (std::rename(tmp_.c_str(), options_.path.c_str()) != 0)
      return error("cannot rename '{}' onto it: {}", tmp_, errno_text(errno));
    return Status::ok();
  }

  Status commit_folder() {
    const std::string& out = options_.path;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(out, ec))) {
      if (std::rename(tmp_.c_str(), out.c_str()) != 0)
        return error("cannot rename '{}' onto it: {}", tmp_, errno_text(errno));
      return Status::ok();
    }
    // OUT appeared or was there from the start: check again that it is an earlier
    // output, then swap the two folders in one step and delete the old one.
    STRATA_RETURN_IF_ERROR(check_replaceable_folder(out));
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp_, ec);  // now the old folder
      return Status::ok();
    }
    if (errno != EINVAL && errno != ENOSYS)
      return error("cannot swap '{}' with it: {}", tmp_, errno_text(errno));
    // No RENAME_EXCHANGE on this filesystem: move the old folder aside first.
    const std::string old = temporary_sibling(out, "old");
    if (std::rename(out.c_str(), old.c_str()) != 0)
      return error("cannot move the old folder aside to '{}': {}", old, errno_text(errno));
    if (std::rename(tmp_.c_str(), out.c_str()) != 0) {
      const int e = errno;
      std::rename(old.c_str(), out.c_str());
      return error("cannot rename '{}' onto it: {}", tmp_, errno_text(e));
    }
    fs::remove_all(old, ec);
    return Status::ok();
  }

  std::string tmp_;
  bool is_folder_;
  State state_ = State::open;
};

// Creates the temporary file; its failure is how an unwritable OUT is reported.
Expected<int> create_temporary_file(const std::string& out, const std::string& tmp) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return error("cannot write '{}': {}", out, errno_text(errno));
  return fd;
}

// ---- .npy --------------------------------------------------------------------------

class NpyWriter final : public WriterBase {
public:
  using WriterBase::WriterBase;
  ~NpyWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }

  // Creates the file at its full size (space reserved where the filesystem can, so a
  // full disk shows here, not after decoding) and writes the header.
  Status create() {
    STRATA_ASSIGN_OR_RETURN(fd_, create_temporary_file(options_.path, tmp()));
    const VideoOutputOptions& o = options_;
    header_ = npy_f32_header({3, o.frames, o.height, o.width});
    const off_t size = off_t(header_.size()) + off_t(3 * o.frames * o.height * o.width) * 4;
    if (::fallocate(fd_, 0, 0, size) != 0) {
      if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL)
        return error("cannot write '{}' ({} bytes): {}", o.path, size, errno_text(errno));
      if (::ftruncate(fd_, size) != 0)
        return error("cannot write '{}' ({} bytes): {}", o.path, size, errno_text(errno));
    }
    if (!pwrite_all(fd_, header_.data(), header_.size(), 0))
      return error("cannot write '{}': {}", o.path, errno_text(errno));
    return Status::ok();
  }

protected:
  // Channel c of frame f is the contiguous plane at element (c*F + f)*H*W.
  Status put_frame(int64_t f, const Tensor& chw) override {
    const int64_t plane = options_.height * options_.width;
    for (int64_t c = 0; c < 3; ++c) {
      const off_t at = off_t(header_.size()) + off_t((c * options_.frames + f) * plane) * 4;
      if (!pwrite_all(fd_, chw.data.data() + c * plane, size_t(plane) * 4, at))
        return error("write of frame {} failed: {}", f, errno_text(errno));
    }
    return Status::ok();
  }

  Status complete() override {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return error("close failed: {}", errno_text(errno));
    return Status::ok();
  }

private:
  int fd_ = -1;
  std::string header_;
};

// ---- PNG frames ----------------------------------------------------------------------

class PngFramesWriter final : public WriterBase {
public:
  using WriterBase::WriterBase;

  Status create() {
    if (::mkdir(tmp().c_str(), 0777) != 0)
      return error("cannot write '{}': {}", options_.path, errno_text(errno));
    return Status::ok();
  }

protected:
  Status put_frame(int64_t f, const Tensor& chw) override {
    return write_png_rgb(fmt::format("{}/frame_{:05d}.png", tmp(), f), chw);
  }
  Status complete() override { return Status::ok(); }
};

// ---- .mp4 ------------------------------------------------------------------------------

#ifdef STRATA_HAVE_FFMPEG

class Mp4Writer final : public WriterBase {
public:
  using WriterBase::WriterBase;

  Status create() {
    const VideoOutputOptions& o = options_;
    // Probe writability with a plain open() first: avio's errors lose the errno text.
    STRATA_ASSIGN_OR_RETURN(int fd, create_temporary_file(o.path, tmp()));
    ::close(fd);
    return encoder_.open(tmp(), o.path, o.width, o.height, o.fps);
  }

protected:
  Status put_frame(int64_t f, const Tensor& chw) override { return encoder_.put_frame(f, chw); }
  Status complete() override { return encoder_.finish(); }

private:
  Mp4Encoder encoder_;
};

#endif  // STRATA_HAVE_FFMPEG

template <typename W>
Expected<std::unique_ptr<VideoWriter>> make(const VideoOutputOptions& o, std::string tmp,
                                           bool is_folder) {
  auto w = std::make_unique<W>(o, std::move(tmp), is_folder);
  Status st = w->create();
  if (!st) return st;  // the destructor removes whatever create() made
  return std::unique_ptr<VideoWriter>(std::move(w));
}

}  // namespace

Expected<std::unique_ptr<VideoWriter>> VideoWriter::open(const VideoOutputOptions& o) {
  STRATA_ASSIGN_OR_RETURN(VideoFormat format, video_format_for_path(o.path));
  if (o.frames < 1 || o.height < 1 || o.width < 1)
    return error("cannot write video '{}': {} frames of {}x{} is empty", o.path, o.frames,
                 o.height, o.width);
  if (o.frames > (int64_t(1) << 40) / o.height / o.width)
    return error("cannot write video '{}': {} frames of {}x{} is too large", o.path, o.frames,
                 o.height, o.width);

  if (format == VideoFormat::png_frames) {
    // Name the temporary after OUT without its trailing '/'.
    std::string out = o.path;
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    if (out == "/" || out == "." || out == "..")
      return error("cannot write PNG frames to '{}': choose a new folder", o.path);
    VideoOutputOptions opts = o;
    opts.path = out;
    STRATA_RETURN_IF_ERROR(check_replaceable_folder(out));
    return make<PngFramesWriter>(opts, temporary_sibling(out, "partial"), true);
  }
  if (format == VideoFormat::npy) return make<NpyWriter>(o, temporary_sibling(o.path, "partial"), false);
#ifdef STRATA_HAVE_FFMPEG
  if (!(o.fps > 0.0 && o.fps <= 1000.0))
    return error("cannot write video '{}': fps {} is outside (0, 1000]", o.path, o.fps);
  if (o.width % 2 != 0 || o.height % 2 != 0)
    return error("cannot write video '{}': mp4 (yuv420p) needs an even width and height, "
                 "got width {} and height {}; write .npy or PNG frames instead",
                 o.path, o.width, o.height);
  if (o.width > 16384 || o.height > 16384)
    return error("cannot write video '{}': {}x{} is too large for H.264", o.path, o.width,
                 o.height);
  return make<Mp4Writer>(o, temporary_sibling(o.path, "partial"), false);
#else
  return error("cannot write video '{}': strata was built without FFmpeg", o.path);
#endif
}

void remove_output_temporary_after_signal() {
  const int kind = g_temporary_kind.exchange(0);
  if (kind == 1) ::unlink(g_temporary);
  if (kind != 2) return;
  // A folder of frames: rm -r in a child (fork, execv and waitpid are async-signal-safe).
  const pid_t child = ::fork();
  if (child == 0) {
    char rm[] = "rm", r[] = "-rf";
    char* argv[] = {rm, r, g_temporary, nullptr};
    ::execv("/bin/rm", argv);
    ::_exit(127);
  }
  if (child > 0) ::waitpid(child, nullptr, 0);
}

}  // namespace strata
