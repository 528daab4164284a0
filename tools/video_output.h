// Video output of decoded frames: `strata decode --out OUT` for a video VAE.
//
// A video decoder emits frames one at a time, each a float tensor [3, H, W] (or
// [1, 3, H, W]) nominally in [-1, 1]; the frame count F and the size H x W are known
// before the first one. OUT picks the format:
//   *.npy    float32 [3, F, H, W], the values exactly as given (diffusers' decode()
//            layout for one video, batch dim dropped). The file is sized up front and
//            each frame's three planes are written at their offsets, so the video is
//            never held in memory; the header is the one NumPy writes (ir/npy.h).
//   folder   (an existing directory, or a path ending in '/' or with no extension)
//            PNG frames frame_00000.png, frame_00001.png, ... with the diffusers
//            pixel mapping of tools/png_writer.h.
//   *.mp4    H.264 (libx264 through FFmpeg's libraries, its default quality: CRF 23,
//            preset medium), yuv420p, BT.709 limited range (and tagged so), at `fps`
//            frames per second; pixel bytes from the same diffusers mapping. yuv420p
//            halves the chroma resolution, so an odd width or height is an error in
//            open() (no padding: the video would not have the size decoded). Built
//            without FFmpeg (STRATA_HAVE_FFMPEG unset), .mp4 is an error saying so.
// Extensions are matched case-insensitively; anything else is an error that lists
// these choices.
//
// No partial output is ever left behind: everything is written to a temporary sibling
// (OUT.partial-<pid>-<n>, a file or a folder) that finish() renames onto OUT; an error
// or destruction without a successful finish() removes it. A pre-existing OUT is only
// replaced by a successful finish() (a folder is swapped in atomically with
// renameat2(RENAME_EXCHANGE) where the filesystem has it). As a guard against
// `--out ~/`, an existing folder is only replaced when it is empty or holds nothing but
// frame_*.png files; otherwise open() refuses it.
//
// open() creates the temporary, so an unwritable OUT (missing parent, a parent that
// is a file, no permission, a full disk for .npy) fails there, before any decoding,
// with one line naming OUT and the reason.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"

#include <cstdint>
#include <memory>
#include <string>

namespace strata {

enum class VideoFormat { npy, png_frames, mp4 };

const char* video_format_name(VideoFormat f);  // "npy", "png frames", "mp4"

// The format OUT asks for; an error for an unsupported extension (naming the
// supported ones), an empty path, or .mp4 in a build without FFmpeg.
Expected<VideoFormat> video_format_for_path(const std::string& out);

// Whether this build can write .mp4 (it was built with FFmpeg's libraries).
bool video_mp4_supported();

// Removes the temporary file or folder of the VideoWriter being written, if any,
// using only async-signal-safe calls: for a handler of a fatal signal (SIGTERM from
// mpirun when another rank of a --ranks job failed, tools/ranks.h), so no partial
// output is left behind.
void remove_output_temporary_after_signal();

struct VideoOutputOptions {
  std::string path;
  int64_t frames = 0, height = 0, width = 0;
  double fps = 24.0;  // .mp4 only
};

class VideoWriter {
public:
  // Checks the options and the format, and creates the temporary output.
  static Expected<std::unique_ptr<VideoWriter>> open(const VideoOutputOptions& o);

  // Without a successful finish(): removes everything it wrote.
  virtual ~VideoWriter();

  // The next frame, [3,H,W] or [1,3,H,W] with the announced H and W. Errors on a wrong
  // shape, a data size not matching it, a frame past the announced count, or a failed
  // write; after an error the writer is dead (its temporary is removed, every later
  // call fails).
  virtual Status write_frame(const Tensor& chw) = 0;

  // Completes the output and renames it onto OUT. Errors (and removes the temporary)
  // if fewer frames than announced were written. Call once.
  virtual Status finish() = 0;

  int64_t frames_written() const { return frames_written_; }
  const VideoOutputOptions& options() const { return options_; }

protected:
  explicit VideoWriter(VideoOutputOptions o) : options_(std::move(o)) {}
  VideoOutputOptions options_;
  int64_t frames_written_ = 0;
};

}  // namespace strata
