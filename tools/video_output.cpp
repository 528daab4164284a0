#include "tools/video_output.h"

#include "tools/png_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#ifdef STRATA_HAVE_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
}
#endif

namespace strata {

namespace fs = std::filesystem;

const char* video_format_name(VideoFormat f) {
  switch (f) {
    case VideoFormat::npy: return "npy";
    case VideoFormat::png_frames: return "png frames";
    case VideoFormat::mp4: return "mp4";
  }
  return "?";
}

bool video_mp4_supported() {
#ifdef STRATA_HAVE_FFMPEG
  return true;
#else
  return false;
#endif
}

Expected<VideoFormat> video_format_for_path(const std::string& out) {
  if (out.empty()) return error("no output path given");
  std::error_code ec;
  if (out.back() == '/' || fs::is_directory(out, ec)) return VideoFormat::png_frames;
  std::string ext = fs::path(out).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext.empty()) return VideoFormat::png_frames;
  if (ext == ".npy") return VideoFormat::npy;
  if (ext == ".mp4") {
    if (!video_mp4_supported())
      return error("cannot write '{}': strata was built without FFmpeg, so .mp4 output is not "
                   "available (install libavcodec-dev libavformat-dev libavutil-dev "
                   "libswscale-dev and rebuild), or write .npy or PNG frames to a folder",
                   out);
    return VideoFormat::mp4;
  }
  return error("cannot write video to '{}': unsupported extension '{}'; supported: .npy "
               "(float32 [3,F,H,W]), {}a folder (an existing directory, or a path ending "
               "in '/' or without extension) for PNG frames",
               out, ext, video_mp4_supported() ? ".mp4 (H.264), " : "");
}

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

std::string av_error_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

class Mp4Writer final : public WriterBase {
public:
  using WriterBase::WriterBase;
  ~Mp4Writer() override {
    sws_freeContext(sws_);
    av_frame_free(&frame_);
    av_packet_free(&packet_);
    avcodec_free_context(&enc_);
    if (fmt_) {
      if (fmt_->pb) avio_closep(&fmt_->pb);
      avformat_free_context(fmt_);
    }
  }

  Status create() {
    const VideoOutputOptions& o = options_;
    // Probe writability with a plain open() first: avio's errors lose the errno text.
    STRATA_ASSIGN_OR_RETURN(int fd, create_temporary_file(o.path, tmp()));
    ::close(fd);
    // libx264 logs its settings and statistics at info level; keep only errors (the
    // level is global to the process, which is the strata CLI).
    av_log_set_level(AV_LOG_ERROR);

    const AVCodec* codec = avcodec_find_encoder_by_name("libx264");
    if (!codec) codec = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (!codec) return error("this FFmpeg (libavcodec) has no H.264 encoder");
    int r = avformat_alloc_output_context2(&fmt_, nullptr, "mp4", tmp().c_str());
    if (r < 0 || !fmt_) return error("cannot set up the mp4 muxer: {}", av_error_text(r));
    AVStream* st = avformat_new_stream(fmt_, nullptr);
    enc_ = avcodec_alloc_context3(codec);
    frame_ = av_frame_alloc();
    packet_ = av_packet_alloc();
    if (!st || !enc_ || !frame_ || !packet_) return error("FFmpeg: out of memory");
    stream_ = st;

    enc_->width = int(o.width);
    enc_->height = int(o.height);
    enc_->pix_fmt = AV_PIX_FMT_YUV420P;
    enc_->framerate = av_d2q(o.fps, 1 << 20);
    enc_->time_base = av_inv_q(enc_->framerate);
    // Tagged as what swscale produces below, so players convert back correctly.
    enc_->color_range = AVCOL_RANGE_MPEG;
    enc_->colorspace = AVCOL_SPC_BT709;
    enc_->color_primaries = AVCOL_PRI_BT709;
    enc_->color_trc = AVCOL_TRC_BT709;
    if (fmt_->oformat->flags & AVFMT_GLOBALHEADER) enc_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if ((r = avcodec_open2(enc_, codec, nullptr)) < 0)
      return error("cannot open the H.264 encoder ({}): {}", codec->name, av_error_text(r));
    if ((r = avcodec_parameters_from_context(st->codecpar, enc_)) < 0)
      return error("FFmpeg: {}", av_error_text(r));
    st->time_base = enc_->time_base;
    st->avg_frame_rate = enc_->framerate;

    if ((r = avio_open(&fmt_->pb, tmp().c_str(), AVIO_FLAG_WRITE)) < 0)
      return error("cannot write '{}': {}", o.path, av_error_text(r));
    AVDictionary* mux_opts = nullptr;
    av_dict_set(&mux_opts, "movflags", "+faststart", 0);  // index first: streams on the web
    r = avformat_write_header(fmt_, &mux_opts);
    av_dict_free(&mux_opts);
    if (r < 0) return error("cannot write the mp4 header: {}", av_error_text(r));

    frame_->format = AV_PIX_FMT_YUV420P;
    frame_->width = enc_->width;
    frame_->height = enc_->height;
    if ((r = av_frame_get_buffer(frame_, 0)) < 0) return error("FFmpeg: {}", av_error_text(r));
    // SWS_ACCURATE_RND also keeps swscale off its fixed BT.601 shortcut for RGB->YUV420P.
    sws_ = sws_getContext(enc_->width, enc_->height, AV_PIX_FMT_RGB24, enc_->width, enc_->height,
                          AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP,
                          nullptr, nullptr, nullptr);
    if (!sws_) return error("cannot set up swscale RGB24 -> YUV420P");
    const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
    sws_setColorspaceDetails(sws_, bt709, /*srcRange full*/ 1, bt709, /*dstRange limited*/ 0, 0,
                             1 << 16, 1 << 16);
    return Status::ok();
  }

protected:
  Status put_frame(int64_t f, const Tensor& chw) override {
    STRATA_ASSIGN_OR_RETURN(Rgb8Image rgb, to_rgb8(chw));
    int r = av_frame_make_writable(frame_);
    if (r < 0) return error("FFmpeg: {}", av_error_text(r));
    const uint8_t* src[1] = {rgb.pixels.data()};
    const int src_stride[1] = {int(rgb.width * 3)};
    sws_scale(sws_, src, src_stride, 0, int(rgb.height), frame_->data, frame_->linesize);
    frame_->pts = f;
    return encode(frame_);
  }

  Status complete() override {
    STRATA_RETURN_IF_ERROR(encode(nullptr));  // flush the encoder's delayed frames
    int r = av_write_trailer(fmt_);
    if (r < 0) return error("cannot finish the mp4: {}", av_error_text(r));
    if ((r = avio_closep(&fmt_->pb)) < 0) return error("close failed: {}", av_error_text(r));
    return Status::ok();
  }

private:
  // Sends one frame (nullptr: end of stream) and muxes every packet that is ready.
  Status encode(const AVFrame* frame) {
    int r = avcodec_send_frame(enc_, frame);
    if (r < 0) return error("H.264 encoder: {}", av_error_text(r));
    while (true) {
      r = avcodec_receive_packet(enc_, packet_);
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return Status::ok();
      if (r < 0) return error("H.264 encoder: {}", av_error_text(r));
      av_packet_rescale_ts(packet_, enc_->time_base, stream_->time_base);
      packet_->stream_index = stream_->index;
      r = av_interleaved_write_frame(fmt_, packet_);  // takes the packet's data
      if (r < 0) return error("mp4 write failed: {}", av_error_text(r));
    }
  }

  AVFormatContext* fmt_ = nullptr;
  AVCodecContext* enc_ = nullptr;
  AVStream* stream_ = nullptr;
  AVFrame* frame_ = nullptr;
  AVPacket* packet_ = nullptr;
  SwsContext* sws_ = nullptr;
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
