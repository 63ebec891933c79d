// qwen3next / qwen35 / qwen35moe GGUF metadata as llama.cpp's Qwen3NextModel and Qwen3_5(Moe)TextModel
// converters write it. ssm.group_count is the key heads, ssm.time_step_rank the value heads,
// ssm.state_size the key head dim, ssm.inner_size all value dims, ssm.conv_kernel the conv width. A layer
// is a full attention one where attention.recurrent_layers says false, else where (i + 1) is a multiple of
// full_attention_interval (llama.cpp's default 4, which older qwen3next files rely on).
// rope.dimension_sections (Qwen3.5's interleaved M-RoPE) is the plain partial RoPE for text.
#include "core/error.h"
#include "model/gguf_config_arch.h"

namespace vireo {

using nlohmann::json;

void qwen3_next_fields(const GgufShards& m, const std::string& a, json& j) {
  const GgufFile& f = m.first();
  const int64_t n = j["num_hidden_layers"].get<int64_t>();
  const int64_t nk = gguf_required_int(f, a + ".ssm.group_count"), nv = gguf_required_int(f, a + ".ssm.time_step_rank");
  const int64_t inner = gguf_required_int(f, a + ".ssm.inner_size");
  if (nk <= 0 || nv <= 0 || inner % nv != 0)
    throw Error(f.path() + ": metadata '" + a + ".ssm.inner_size' must be a multiple of ssm.time_step_rank");
  j["linear_num_key_heads"] = nk;
  j["linear_num_value_heads"] = nv;
  j["linear_key_head_dim"] = gguf_required_int(f, a + ".ssm.state_size");
  j["linear_value_head_dim"] = inner / nv;
  j["linear_conv_kernel_dim"] = gguf_required_int(f, a + ".ssm.conv_kernel");
  json types = json::array();
  if (const GgufValue* rl = f.find(a + ".attention.recurrent_layers"); rl && rl->type == GgufType::kArray) {
    if (!rl->value.is_array() || static_cast<int64_t>(rl->value.size()) < n)
      throw Error(f.path() + ": metadata '" + a + ".attention.recurrent_layers' must hold a flag per layer");
    for (int64_t l = 0; l < n; ++l) {
      const json& v = rl->value[l];
      types.push_back((v.is_boolean() ? v.get<bool>() : v != 0) ? "linear_attention" : "full_attention");
    }
  } else {
    const int64_t interval = f.get_int(a + ".full_attention_interval").value_or(4);
    if (interval <= 0) throw Error(f.path() + ": metadata '" + a + ".full_attention_interval' must be > 0");
    for (int64_t l = 0; l < n; ++l) types.push_back((l + 1) % interval != 0 ? "linear_attention" : "full_attention");
  }
  j["layer_types"] = types;
  j.erase("rope_scaling");  // (Qwen configs have none; mrope sections are not scaling)
}

}  // namespace vireo
