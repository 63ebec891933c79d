// The streaming shape of the tool parsers whose calls are tagged blocks in the content (hermes'
// <tool_call>...</tool_call>, the harmony hand-off <|call_to|>...<|call|>): text outside the blocks is
// content, a possible opening tag at the end of a piece waits for the next one, nothing of an open
// block is released until it closes (or the output ends: close_block with closed = false).
#pragma once
#include <string>
#include <string_view>

#include "server/tag_holdback.h"
#include "server/tool_parser.h"

namespace vireo::server {

class TaggedBlockToolParser : public ToolParser {
 public:
  TaggedBlockToolParser(std::string_view open, std::string_view close) : open_(open), close_(close) {}

  ToolDelta feed(std::string_view text) override {
    ToolDelta out;
    held_ += text;
    for (;;) {
      if (!in_block_) {
        const size_t start = held_.find(open_);
        if (start == std::string::npos) {
          const size_t keep = partial_tag_suffix(held_, open_);
          out.content += held_.substr(0, held_.size() - keep);
          held_.erase(0, held_.size() - keep);
          return out;
        }
        out.content += held_.substr(0, start);
        held_.erase(0, start + open_.size());
        in_block_ = true;
      }
      const size_t end = held_.find(close_);
      if (end == std::string::npos) return out;  // the block is still open
      close_block(held_.substr(0, end), true, out);
      held_.erase(0, end + close_.size());
      in_block_ = false;
    }
  }

  ToolDelta finish() override {
    ToolDelta out;
    if (in_block_) close_block(held_, false, out);
    else out.content = held_;
    held_.clear();
    in_block_ = false;
    return out;
  }

 protected:
  // A block's body (between the tags; closed = false: the output ended inside it) into out.
  virtual void close_block(const std::string& body, bool closed, ToolDelta& out) const = 0;
  // A block that holds no call goes back to the content as written, tags included.
  void give_back(const std::string& body, bool closed, ToolDelta& out) const {
    out.content += std::string(open_) + body + (closed ? std::string(close_) : "");
  }

 private:
  const std::string_view open_, close_;
  bool in_block_ = false;
  std::string held_;  // inside a block: its body so far; outside: a possible opening-tag prefix
};

}  // namespace vireo::server
