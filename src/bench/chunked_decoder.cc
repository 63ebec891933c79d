#include "bench/chunked_decoder.h"

#include "core/error.h"

namespace vireo::bench {

size_t ChunkedDecoder::feed(std::string_view data, std::string& out) {
  size_t i = 0;
  while (i < data.size() && state_ != State::kDone) {
    switch (state_) {
      case State::kSize:
      case State::kTrailer: {
        char c = data[i++];
        if (c != '\n') {
          line_.push_back(c);
          if (line_.size() > 4096) throw Error("chunked response: line too long");
          break;
        }
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        if (state_ == State::kTrailer) {
          if (line_.empty()) state_ = State::kDone;
          line_.clear();
          break;
        }
        size_t n = 0, k = 0;
        for (; k < line_.size(); ++k) {
          char h = line_[k];
          int v = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (v < 0) break;
          n = n * 16 + static_cast<size_t>(v);
        }
        if (k == 0 || (k < line_.size() && line_[k] != ';' && line_[k] != ' '))
          throw Error("chunked response: bad chunk size line '" + line_ + "'");
        line_.clear();
        if (n == 0) {
          state_ = State::kTrailer;
        } else {
          remaining_ = n;
          state_ = State::kData;
        }
        break;
      }
      case State::kData: {
        size_t take = std::min(remaining_, data.size() - i);
        out.append(data.data() + i, take);
        i += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::kDataCrlf;
        break;
      }
      case State::kDataCrlf: {
        // Expect "\r\n"; be lenient about a bare "\n".
        char c = data[i++];
        if (c == '\n') state_ = State::kSize;
        else if (c != '\r') throw Error("chunked response: missing CRLF after chunk data");
        break;
      }
      case State::kDone:
        break;
    }
  }
  return i;
}

}  // namespace vireo::bench
