// oneDNN's convolution passes as the peer of bench_cpu's convolution rows, the README demo's
// layer and the thread-scaling cases: one place that builds a pass in the layouts oneDNN
// prefers (format_tag::any, blocked), its buffers filled with random values directly (reorders
// are never timed): its strongest configuration.
#pragma once

#include "einjit/Tensor.h"

#include <dnnl.hpp>

#include <cstdint>
#include <cstring>
#include <unordered_map>

namespace einjit::bench {

struct DnnlConvPass {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
};

// Pass 0 forward, 1 backward data (input gradient), 2 backward weights, of x (xs, NCHW) and k
// (ks, OIHW) at `stride`, without padding. oneDNN sizes its work split from OpenMP's thread
// count when the primitive is created: create it under the count it will run with.
inline DnnlConvPass dnnlConvPass(const dnnl::engine& eng, const Shape& xs, const Shape& ks,
                                 std::int64_t stride, int pass, std::uint64_t seed) {
  using namespace dnnl;
  const memory::dim oh = (xs[2] - ks[2]) / stride + 1, ow = (xs[3] - ks[3]) / stride + 1;
  memory::desc src({xs[0], xs[1], xs[2], xs[3]}, memory::data_type::f32, memory::format_tag::any);
  memory::desc wei({ks[0], ks[1], ks[2], ks[3]}, memory::data_type::f32, memory::format_tag::any);
  memory::desc dst({xs[0], ks[0], oh, ow}, memory::data_type::f32, memory::format_tag::any);
  const memory::dims strides{stride, stride}, pad{0, 0};
  convolution_forward::primitive_desc fwd(
      convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, src,
                                wei, dst, strides, pad, pad),
      eng);
  auto fill = [&](const memory::desc& d) {
    memory m(d, eng);
    Tensor r = Tensor::random({static_cast<std::int64_t>(d.get_size() / 4)}, DType::f32, seed++);
    std::memcpy(m.get_data_handle(), r.data(), d.get_size());
    return m;
  };
  DnnlConvPass o;
  if (pass == 0) {
    o.prim = convolution_forward(fwd);
    o.args = {{DNNL_ARG_SRC, fill(fwd.src_desc())},
              {DNNL_ARG_WEIGHTS, fill(fwd.weights_desc())},
              {DNNL_ARG_DST, fill(fwd.dst_desc())}};
  } else if (pass == 1) {
    convolution_backward_data::primitive_desc bd(
        convolution_backward_data::desc(algorithm::convolution_direct, src, wei, dst, strides, pad,
                                        pad),
        eng, fwd);
    o.prim = convolution_backward_data(bd);
    o.args = {{DNNL_ARG_DIFF_SRC, fill(bd.diff_src_desc())},
              {DNNL_ARG_WEIGHTS, fill(bd.weights_desc())},
              {DNNL_ARG_DIFF_DST, fill(bd.diff_dst_desc())}};
  } else {
    convolution_backward_weights::primitive_desc bw(
        convolution_backward_weights::desc(algorithm::convolution_direct, src, wei, dst, strides,
                                           pad, pad),
        eng, fwd);
    o.prim = convolution_backward_weights(bw);
    o.args = {{DNNL_ARG_SRC, fill(bw.src_desc())},
              {DNNL_ARG_DIFF_WEIGHTS, fill(bw.diff_weights_desc())},
              {DNNL_ARG_DIFF_DST, fill(bw.diff_dst_desc())}};
  }
  return o;
}

} // namespace einjit::bench
