// Max pooling on the blocked layout through oneDNN (conv2d_blocked.hpp): a
// batch splits over images, one image over channel blocks (blocked) or bands
// of output rows (NHWC: contiguous, the rows between bands read, not padded),
// at most one part per arena thread; the maximum is exact, so the result does
// not depend on the split.
#include <algorithm>
#include <string>

#include "backend/cpu/conv2d_blocked.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "stoke/error.hpp"

#if STOKE_HAVE_DNNL
#include "backend/cpu/conv2d_dnnl_primitive.hpp"
#endif

namespace stoke::cpu::blocked {

#if !STOKE_HAVE_DNNL

void max_pool(Backend&, const Shape&, const void*, void*, const Pool2dParams&, Elem, bool) {
  throw Error(ErrorCode::kInternal, "blocked max pool: stoke was built without oneDNN");
}
void max_pool_codes(Backend&, const Shape&, const void*, void*, const Pool2dParams&, bool) {
  throw Error(ErrorCode::kInternal, "blocked max pool: stoke was built without oneDNN");
}

#else

namespace {

using dnnl_conv::memory;

void pool(Backend& backend, const Shape& x, const void* from, void* to, const Pool2dParams& prm,
          memory::data_type dt, std::int64_t bytes, bool nhwc) {
  auto* be = dynamic_cast<CpuBackend*>(&backend);
  if (!be) throw InvalidArgument("blocked max pool: needs the CPU backend, got " + backend.name());
  const std::int64_t oh = (x[2] + 2 * prm.pad_h - prm.kernel_h) / prm.stride_h + 1;
  const std::int64_t ow = (x[3] + 2 * prm.pad_w - prm.kernel_w) / prm.stride_w + 1;
  const std::int64_t kb = block_channels(), blocks = (x[1] + kb - 1) / kb;
  const bool channels = x[0] == 1 && !nhwc;  // one image: blocks of channels
  const bool rows = x[0] == 1 && nhwc;       // one NHWC image: bands of output rows
  const std::int64_t total = channels ? blocks : rows ? oh : x[0];
  const std::int64_t x_unit = channels ? kb * x[2] * x[3]
                              : rows   ? x[1] * x[3]
                              : nhwc   ? x[1] * x[2] * x[3]
                                       : blocked_floats({1, x[1], x[2], x[3]});
  const std::int64_t y_unit = channels ? kb * oh * ow
                              : rows   ? x[1] * ow
                              : nhwc   ? x[1] * oh * ow
                                       : blocked_floats({1, x[1], oh, ow});
  const int count =
      std::min(dnnl_conv::parts(static_cast<int>(total)), std::max(be->context().cpu_threads(), 1));
  for_chunks(*be, static_cast<std::size_t>(total), count, [&](int, std::size_t b, std::size_t e) {
    const auto first = static_cast<std::int64_t>(b), items = static_cast<std::int64_t>(e - b);
    const std::int64_t n = channels || rows ? 1 : items;
    const std::int64_t c = channels ? std::min(items * kb, x[1] - first * kb) : x[1];
    // A band of output rows [first, first + items) reads input rows [top,
    // bottom], its window clamped to the image, the rest of it padding.
    const std::int64_t lo = first * prm.stride_h - prm.pad_h;
    const std::int64_t hi = (first + items - 1) * prm.stride_h - prm.pad_h + prm.kernel_h - 1;
    const std::int64_t top = rows ? std::max<std::int64_t>(lo, 0) : 0;
    const std::int64_t bottom = rows ? std::min<std::int64_t>(hi, x[2] - 1) : x[2] - 1;
    const std::int64_t pad_top = rows ? top - lo : prm.pad_h;
    const std::int64_t pad_bottom = rows ? hi - bottom : prm.pad_h;
    const auto tag = nhwc                     ? dnnl_conv::Tag::nhwc
                     : block_channels() == 16 ? dnnl_conv::Tag::nChw16c
                                              : dnnl_conv::Tag::nChw8c;
    const memory::desc src({n, c, bottom - top + 1, x[3]}, dt, tag),
        dst({n, c, rows ? items : oh, ow}, dt, tag);
    const std::int64_t x_at = rows ? top * x_unit : first * x_unit;
    try {
      dnnl_conv::OneOmpThread one;
      const dnnl::pooling_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst,
          {prm.stride_h, prm.stride_w}, {prm.kernel_h, prm.kernel_w}, {pad_top, prm.pad_w},
          {pad_bottom, prm.pad_w});
      const dnnl::pooling_forward pool(
          dnnl::pooling_forward::primitive_desc(desc, dnnl_conv::engine()));
      pool.execute(
          dnnl_conv::stream(),
          {{DNNL_ARG_SRC, dnnl_conv::wrap(src, static_cast<const char*>(from) + x_at * bytes)},
           {DNNL_ARG_DST, dnnl_conv::wrap(dst, static_cast<char*>(to) + first * y_unit * bytes)}});
      dnnl_conv::stream().wait();
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("blocked max pool: oneDNN failed: ") + e.what());
    }
  });
}

}  // namespace

void max_pool(Backend& backend, const Shape& x, const void* from, void* to, const Pool2dParams& prm,
              Elem elem, bool nhwc) {
  pool(backend, x, from, to, prm,
       elem == Elem::kF32 ? memory::data_type::f32 : memory::data_type::bf16,
       static_cast<std::int64_t>(elem_size(elem)), nhwc);
}

void max_pool_codes(Backend& backend, const Shape& x, const void* from, void* to,
                    const Pool2dParams& prm, bool is_unsigned) {
  pool(backend, x, from, to, prm, is_unsigned ? memory::data_type::u8 : memory::data_type::s8, 1,
       true);
}

#endif  // STOKE_HAVE_DNNL

}  // namespace stoke::cpu::blocked
