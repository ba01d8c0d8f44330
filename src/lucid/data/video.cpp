#include "lucid/data/video.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "lucid/util/error.h"
#include "lucid/util/removed_on_signal.h"

#ifdef LUCID_HAVE_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
}
#endif

namespace lucid::data {

namespace fs = std::filesystem;

namespace video {

bool available() {
#ifdef LUCID_HAVE_FFMPEG
  return true;
#else
  return false;
#endif
}

std::string unavailable_message() {
  return "this build has no video support (FFmpeg's libraries were not found when it was configured)";
}

bool has_video_extension(const std::string& path) {
  static const std::set<std::string> kVideoExtensions = {"asf", "avi",  "gif", "m4v", "mkv", "mov",
                                                         "mp4", "mpeg", "mpg", "ts",  "wmv", "webm"};
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return kVideoExtensions.count(ext) > 0;
}

}  // namespace video

#ifdef LUCID_HAVE_FFMPEG

namespace {

std::string av_message(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

// FFmpeg's own log lines would duplicate (and precede) the errors lucid reports.
void quiet_ffmpeg() {
  static const bool once = [] {
    av_log_set_level(AV_LOG_QUIET);
    return true;
  }();
  (void)once;
}

// What the reader and the writer both hold: the codec, its packet and frame, and the swscale
// conversion through a padded, aligned RGB buffer (swscale's SIMD code reads and writes whole blocks
// past a row's end, so it never works on the caller's image directly).
struct CodecState {
  std::string path;
  AVCodecContext* codec = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
  SwsContext* sws = nullptr;
  uint8_t* rgb[4] = {};
  int rgb_stride[4] = {};
  int width = 0, height = 0;

  CodecState() = default;
  CodecState(const CodecState&) = delete;
  CodecState& operator=(const CodecState&) = delete;
  ~CodecState() {
    av_freep(&rgb[0]);
    sws_freeContext(sws);
    av_frame_free(&frame);
    av_packet_free(&packet);
    avcodec_free_context(&codec);
  }

  UserError error(const std::string& what) const { return UserError("video " + path + ": " + what); }
};

}  // namespace

struct VideoReader::Impl : CodecState {
  AVFormatContext* format = nullptr;
  int stream = -1;
  double fps = 0;
  int64_t count = 0;
  int64_t decoded = 0;  // frames returned so far
  bool flushed = false, finished = false;

  ~Impl() { avformat_close_input(&format); }

  // The next decoded frame in `frame`; false at the end of the stream.
  bool decode_next() {
    if (finished) return false;
    for (;;) {
      int rc = avcodec_receive_frame(codec, frame);
      if (rc == 0) {
        ++decoded;
        return true;
      }
      if (rc == AVERROR_EOF) {
        finished = true;
        return false;
      }
      if (rc != AVERROR(EAGAIN))
        throw error("frame " + std::to_string(decoded + 1) + " cannot be decoded (" + av_message(rc) + ")");
      if (flushed) {  // a decoder that wants input after the flush: nothing more will come
        finished = true;
        return false;
      }
      // Feed the decoder the next packet of the video stream (or the end-of-stream flush).
      for (;;) {
        rc = av_read_frame(format, packet);
        if (rc == AVERROR_EOF) {
          avcodec_send_packet(codec, nullptr);
          flushed = true;
          break;
        }
        if (rc < 0) throw error("cannot read past frame " + std::to_string(decoded) + " (" + av_message(rc) + ")");
        if (packet->stream_index != stream) {
          av_packet_unref(packet);
          continue;
        }
        rc = avcodec_send_packet(codec, packet);
        av_packet_unref(packet);
        if (rc < 0 && rc != AVERROR(EAGAIN))
          throw error("frame " + std::to_string(decoded + 1) + " cannot be decoded (" + av_message(rc) + ")");
        break;
      }
    }
  }
};

VideoReader::VideoReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  quiet_ffmpeg();
  auto& m = *impl_;
  m.path = path;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw m.error("no such file");
  int rc = avformat_open_input(&m.format, path.c_str(), nullptr, nullptr);
  if (rc < 0) throw m.error("cannot be opened as a video (" + av_message(rc) + ")");
  rc = avformat_find_stream_info(m.format, nullptr);
  if (rc < 0) throw m.error("cannot read its streams (" + av_message(rc) + ")");
  const AVCodec* decoder = nullptr;
  m.stream = av_find_best_stream(m.format, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
  if (m.stream == AVERROR_DECODER_NOT_FOUND) throw m.error("no decoder for its video stream in this FFmpeg");
  if (m.stream < 0) throw m.error("has no readable video stream (not a video, or damaged or truncated)");
  AVStream* st = m.format->streams[m.stream];
  const auto* par = st->codecpar;
  if (par->width <= 0 || par->height <= 0) throw m.error("its video stream has no frame size");
  if (par->width > kMaxVideoSide || par->height > kMaxVideoSide)
    throw m.error("frames of " + std::to_string(par->width) + "x" + std::to_string(par->height) +
                  " exceed the limit of " + std::to_string(kMaxVideoSide) + " pixels a side");
  m.width = par->width;
  m.height = par->height;
  m.codec = avcodec_alloc_context3(decoder);
  if (!m.codec || avcodec_parameters_to_context(m.codec, par) < 0) throw m.error("cannot set up its decoder");
  rc = avcodec_open2(m.codec, decoder, nullptr);
  if (rc < 0) throw m.error("cannot open its decoder (" + av_message(rc) + ")");
  m.packet = av_packet_alloc();
  m.frame = av_frame_alloc();
  if (!m.packet || !m.frame) throw std::bad_alloc();
  // One padded row more than the frame: room for the converter's block writes past the last row.
  if (av_image_alloc(m.rgb, m.rgb_stride, m.width, m.height + 1, AV_PIX_FMT_RGB24, 64) < 0) throw std::bad_alloc();
  const AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
  m.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  if (st->nb_frames > 0) {
    m.count = st->nb_frames;
  } else if (m.fps > 0) {
    double seconds = 0;
    if (st->duration > 0)
      seconds = static_cast<double>(st->duration) * av_q2d(st->time_base);
    else if (m.format->duration > 0)
      seconds = static_cast<double>(m.format->duration) / AV_TIME_BASE;
    m.count = static_cast<int64_t>(std::llround(seconds * m.fps));
  }
}

VideoReader::~VideoReader() = default;

int VideoReader::width() const { return impl_->width; }
int VideoReader::height() const { return impl_->height; }
double VideoReader::fps() const { return impl_->fps; }
int64_t VideoReader::frame_count() const { return impl_->count; }

bool VideoReader::skip() { return impl_->decode_next(); }

bool VideoReader::read(Image& out) {
  auto& m = *impl_;
  if (!m.decode_next()) return false;
  const AVFrame* f = m.frame;
  if (f->width <= 0 || f->height <= 0 || f->width > kMaxVideoSide || f->height > kMaxVideoSide)
    throw m.error("frame " + std::to_string(m.decoded) + " has an invalid size");
  // Every frame comes out at the stream's size (a stream whose size changes is scaled to its first).
  m.sws = sws_getCachedContext(m.sws, f->width, f->height, static_cast<AVPixelFormat>(f->format), m.width, m.height,
                               AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (!m.sws) throw m.error("frame " + std::to_string(m.decoded) + " has a pixel format that cannot be converted");
  if (out.height != m.height || out.width != m.width || out.channels != 3) out = Image(m.height, m.width, 3);
  sws_scale(m.sws, f->data, f->linesize, 0, f->height, m.rgb, m.rgb_stride);
  const size_t row = static_cast<size_t>(3) * m.width;
  for (int y = 0; y < m.height; ++y)
    std::memcpy(out.at(y, 0), m.rgb[0] + static_cast<size_t>(y) * m.rgb_stride[0], row);
  return true;
}

struct VideoWriter::Impl : CodecState {
  std::string temp;
  std::unique_ptr<util::RemovedOnSignal> removed_on_signal;  // Ctrl-C or SIGTERM leave no temporary file
  AVFormatContext* format = nullptr;
  AVStream* stream = nullptr;
  int rgb_channels = 0;
  int64_t written = 0;
  bool header = false, closed = false;

  ~Impl() {
    if (format) {
      if (format->pb) avio_closep(&format->pb);
      avformat_free_context(format);
    }
    if (!closed && !temp.empty()) {
      std::error_code ec;
      fs::remove(temp, ec);
    }
  }

  // Sends a frame (nullptr: the end) to the encoder and writes the packets it gives back.
  void encode(AVFrame* f) {
    int rc = avcodec_send_frame(codec, f);
    if (rc < 0) throw error("cannot encode frame " + std::to_string(written + 1) + " (" + av_message(rc) + ")");
    for (;;) {
      rc = avcodec_receive_packet(codec, packet);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0) throw error("cannot encode (" + av_message(rc) + ")");
      // One frame interval each: a last packet without a duration would be cut by the MP4 edit list.
      if (packet->duration <= 0) packet->duration = 1;
      av_packet_rescale_ts(packet, codec->time_base, stream->time_base);
      packet->stream_index = stream->index;
      rc = av_interleaved_write_frame(format, packet);
      av_packet_unref(packet);
      if (rc < 0) throw error("cannot be written (" + av_message(rc) + ")");
    }
  }
};

VideoWriter::VideoWriter(const std::string& path, int width, int height, int fps) : impl_(std::make_unique<Impl>()) {
  quiet_ffmpeg();
  auto& m = *impl_;
  m.path = path;
  m.width = width;
  m.height = height;
  if (width <= 0 || height <= 0 || width > kMaxVideoSide || height > kMaxVideoSide || fps <= 0)
    throw m.error("invalid frame size " + std::to_string(width) + "x" + std::to_string(height) + " or rate " +
                  std::to_string(fps));
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const char* muxer = nullptr;
  AVCodecID codec_id = AV_CODEC_ID_NONE;
  AVPixelFormat pix = AV_PIX_FMT_NONE;
  if (ext == ".avi") {
    muxer = "avi";
    codec_id = AV_CODEC_ID_MJPEG;
    pix = AV_PIX_FMT_YUVJ420P;
  } else if (ext == ".mp4") {
    muxer = "mp4";
    codec_id = AV_CODEC_ID_MPEG4;
    pix = AV_PIX_FMT_YUV420P;
  } else {
    throw m.error("videos are written as .avi (Motion JPEG) or .mp4 (MPEG-4), not " + ext);
  }
  const AVCodec* encoder = avcodec_find_encoder(codec_id);
  if (!encoder) throw m.error(std::string("this FFmpeg has no ") + avcodec_get_name(codec_id) + " encoder");
  m.temp = path + ".tmp." + std::to_string(::getpid());
  m.removed_on_signal = std::make_unique<util::RemovedOnSignal>(m.temp);
  int rc = avformat_alloc_output_context2(&m.format, nullptr, muxer, m.temp.c_str());
  if (rc < 0 || !m.format) throw m.error("cannot set up the " + std::string(muxer) + " container");
  m.stream = avformat_new_stream(m.format, nullptr);
  m.codec = avcodec_alloc_context3(encoder);
  m.packet = av_packet_alloc();
  m.frame = av_frame_alloc();
  if (!m.stream || !m.codec || !m.packet || !m.frame) throw std::bad_alloc();
  m.codec->width = width;
  m.codec->height = height;
  m.codec->pix_fmt = pix;
  m.codec->time_base = AVRational{1, fps};
  m.codec->framerate = AVRational{fps, 1};
  m.codec->gop_size = 12;
  m.codec->thread_count = 1;  // the same bytes on every machine
  // A fixed high quality (quantiser 2) rather than a bit rate: annotations stay legible.
  m.codec->flags |= AV_CODEC_FLAG_QSCALE;
  m.codec->global_quality = FF_QP2LAMBDA * 2;
  if (m.format->oformat->flags & AVFMT_GLOBALHEADER) m.codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  m.codec->flags |= AV_CODEC_FLAG_BITEXACT;
  rc = avcodec_open2(m.codec, encoder, nullptr);
  if (rc < 0) throw m.error("cannot open the " + std::string(encoder->name) + " encoder (" + av_message(rc) + ")");
  rc = avcodec_parameters_from_context(m.stream->codecpar, m.codec);
  if (rc < 0) throw m.error("cannot set up its stream");
  m.stream->time_base = m.codec->time_base;
  m.format->flags |= AVFMT_FLAG_BITEXACT;
  rc = avio_open(&m.format->pb, m.temp.c_str(), AVIO_FLAG_WRITE);
  if (rc < 0) throw UserError("video " + path + ": cannot be written (" + av_message(rc) + ")");
  rc = avformat_write_header(m.format, nullptr);
  if (rc < 0) throw m.error("cannot write its header (" + av_message(rc) + ")");
  m.header = true;
  m.frame->format = pix;
  m.frame->width = width;
  m.frame->height = height;
  if (av_frame_get_buffer(m.frame, 0) < 0) throw std::bad_alloc();
}

VideoWriter::~VideoWriter() = default;

int64_t VideoWriter::frames_written() const { return impl_->written; }

void VideoWriter::write(const Image& image) {
  auto& m = *impl_;
  if (m.closed) throw std::logic_error("VideoWriter::write after close");
  if (image.width != m.width || image.height != m.height || (image.channels != 3 && image.channels != 4))
    throw m.error("frame " + std::to_string(m.written + 1) + " is " + std::to_string(image.width) + "x" +
                  std::to_string(image.height) + ", the video " + std::to_string(m.width) + "x" +
                  std::to_string(m.height));
  const auto src_fmt = image.channels == 3 ? AV_PIX_FMT_RGB24 : AV_PIX_FMT_RGBA;
  m.sws = sws_getCachedContext(m.sws, m.width, m.height, src_fmt, m.width, m.height,
                               static_cast<AVPixelFormat>(m.frame->format), SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (!m.sws) throw m.error("cannot convert frames to " + std::string(av_get_pix_fmt_name(m.codec->pix_fmt)));
  if (av_frame_make_writable(m.frame) < 0) throw std::bad_alloc();
  if (m.rgb_channels != image.channels) {
    av_freep(&m.rgb[0]);
    if (av_image_alloc(m.rgb, m.rgb_stride, m.width, m.height + 1, src_fmt, 64) < 0) throw std::bad_alloc();
    m.rgb_channels = image.channels;
  }
  const size_t row = static_cast<size_t>(image.channels) * m.width;
  for (int y = 0; y < m.height; ++y)
    std::memcpy(m.rgb[0] + static_cast<size_t>(y) * m.rgb_stride[0], image.at(y, 0), row);
  sws_scale(m.sws, m.rgb, m.rgb_stride, 0, m.height, m.frame->data, m.frame->linesize);
  m.frame->pts = m.written;
  m.frame->quality = m.codec->global_quality;
  m.encode(m.frame);
  ++m.written;
}

void VideoWriter::close() {
  auto& m = *impl_;
  if (m.closed) return;
  m.encode(nullptr);
  int rc = av_write_trailer(m.format);
  if (rc < 0) throw m.error("cannot finish the file (" + av_message(rc) + ")");
  rc = avio_closep(&m.format->pb);
  if (rc < 0) throw m.error("cannot be written (" + av_message(rc) + ")");
  std::error_code ec;
  fs::rename(m.temp, m.path, ec);
  if (ec) throw m.error("cannot be written (" + ec.message() + ")");
  m.closed = true;
}

#else  // no FFmpeg

struct VideoReader::Impl {};
struct VideoWriter::Impl {};

VideoReader::VideoReader(const std::string& path) {
  throw UserError("video " + path + ": " + video::unavailable_message());
}
VideoReader::~VideoReader() = default;
int VideoReader::width() const { return 0; }
int VideoReader::height() const { return 0; }
double VideoReader::fps() const { return 0; }
int64_t VideoReader::frame_count() const { return 0; }
bool VideoReader::read(Image&) { return false; }
bool VideoReader::skip() { return false; }

VideoWriter::VideoWriter(const std::string& path, int, int, int) {
  throw UserError("video " + path + ": " + video::unavailable_message());
}
VideoWriter::~VideoWriter() = default;
void VideoWriter::write(const Image&) {}
void VideoWriter::close() {}
int64_t VideoWriter::frames_written() const { return 0; }

#endif

}  // namespace lucid::data
