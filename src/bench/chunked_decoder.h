// Incremental HTTP/1.1 "Transfer-Encoding: chunked" body decoder (RFC 9112 7.1).
#pragma once
#include <string>
#include <string_view>

namespace vireo::bench {

class ChunkedDecoder {
 public:
  // Feeds raw bytes; appends decoded payload to `out`. Returns the number of bytes consumed
  // (less than data.size() only once done(): the rest belongs to the next response).
  // Throws vireo::Error on a malformed chunk size.
  size_t feed(std::string_view data, std::string& out);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataCrlf, kTrailer, kDone };
  State state_ = State::kSize;
  std::string line_;
  size_t remaining_ = 0;
};

}  // namespace vireo::bench
