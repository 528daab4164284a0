// See mp4_encoder.h.
#ifdef STRATA_HAVE_FFMPEG
#include "tools/mp4_encoder.h"

#include "tools/png_writer.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
}

namespace strata {
namespace {

std::string av_error_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

}  // namespace

struct Mp4Encoder::Impl {
  ~Impl() {
    sws_freeContext(sws_);
    av_frame_free(&frame_);
    av_packet_free(&packet_);
    avcodec_free_context(&enc_);
    if (fmt_) {
      if (fmt_->pb) avio_closep(&fmt_->pb);
      avformat_free_context(fmt_);
    }
  }

  Status open(const std::string& tmp, const std::string& out, int64_t width, int64_t height, double fps) {
    // libx264 logs its settings and statistics at info level; keep only errors (the
    // level is global to the process, which is the strata CLI).
    av_log_set_level(AV_LOG_ERROR);

    const AVCodec* codec = avcodec_find_encoder_by_name("libx264");
    if (!codec) codec = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (!codec) return error("this FFmpeg (libavcodec) has no H.264 encoder");
    int r = avformat_alloc_output_context2(&fmt_, nullptr, "mp4", tmp.c_str());
    if (r < 0 || !fmt_) return error("cannot set up the mp4 muxer: {}", av_error_text(r));
    AVStream* st = avformat_new_stream(fmt_, nullptr);
    enc_ = avcodec_alloc_context3(codec);
    frame_ = av_frame_alloc();
    packet_ = av_packet_alloc();
    if (!st || !enc_ || !frame_ || !packet_) return error("FFmpeg: out of memory");
    stream_ = st;

    enc_->width = int(width);
    enc_->height = int(height);
    enc_->pix_fmt = AV_PIX_FMT_YUV420P;
    enc_->framerate = av_d2q(fps, 1 << 20);
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

    if ((r = avio_open(&fmt_->pb, tmp.c_str(), AVIO_FLAG_WRITE)) < 0)
      return error("cannot write '{}': {}", out, av_error_text(r));
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

  Status put_frame(int64_t f, const Tensor& chw) {
    STRATA_ASSIGN_OR_RETURN(Rgb8Image rgb, to_rgb8(chw));
    int r = av_frame_make_writable(frame_);
    if (r < 0) return error("FFmpeg: {}", av_error_text(r));
    const uint8_t* src[1] = {rgb.pixels.data()};
    const int src_stride[1] = {int(rgb.width * 3)};
    sws_scale(sws_, src, src_stride, 0, int(rgb.height), frame_->data, frame_->linesize);
    frame_->pts = f;
    return encode(frame_);
  }

  Status finish() {
    STRATA_RETURN_IF_ERROR(encode(nullptr));  // flush the encoder's delayed frames
    int r = av_write_trailer(fmt_);
    if (r < 0) return error("cannot finish the mp4: {}", av_error_text(r));
    if ((r = avio_closep(&fmt_->pb)) < 0) return error("close failed: {}", av_error_text(r));
    return Status::ok();
  }

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


Mp4Encoder::Mp4Encoder() : impl_(std::make_unique<Impl>()) {}
Mp4Encoder::~Mp4Encoder() = default;

Status Mp4Encoder::open(const std::string& tmp, const std::string& out, int64_t width, int64_t height, double fps) {
  return impl_->open(tmp, out, width, height, fps);
}
Status Mp4Encoder::put_frame(int64_t index, const Tensor& chw) { return impl_->put_frame(index, chw); }
Status Mp4Encoder::finish() { return impl_->finish(); }

}  // namespace strata
#endif  // STRATA_HAVE_FFMPEG
