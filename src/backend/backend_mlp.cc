// Backend::mlp's default: the gated MLP as two fused linears (op_params.h, MlpParams).
#include "backend/backend.h"

namespace vireo {

void Backend::mlp(const MlpParams& p) {
  const int64_t n = p.residual.dim(0);
  LinearParams gu;  // act_fn(gate) * up of norm(h)
  gu.x = p.residual;
  gu.w = p.gate_up_w;
  gu.bias = p.gate_up_b;
  gu.out = p.act;
  gu.input_norm = p.norm_w;
  gu.norm_eps = p.norm_eps;
  LinearParams down;  // h += down(...)
  down.x = p.act;
  down.w = p.down_w;
  down.bias = p.down_b;
  down.out = p.residual;
  down.residual = p.residual;
  if (p.act_fn == Activation::kSilu && prefers_silu_mul_input(p.down_w.dtype, n)) {
    gu.out = p.gate_up;  // [N, 2I]; silu(gate) * up in down's prologue
    down.x = p.gate_up;
    down.silu_mul_input = true;
  } else {
    gu.silu_mul_output = true;
    gu.act = p.act_fn;
  }
  linear(gu);
  linear(down);
}

}  // namespace vireo
