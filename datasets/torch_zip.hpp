// Reader for PyTorch torch.save files (the zip format, default since PyTorch 1.6), without
// libtorch and without executing any pickle code.
//
// Archive (caffe2/serialize/inline_container.h): a zip whose members all sit under one top folder
// (named "archive" or after the file stem): data.pkl (the pickled object), data/<key> (the raw
// little-endian bytes of one storage each), byteorder, version, ... Members are stored, not
// compressed, and PyTorch writes ZIP64 end records. The reader parses the end-of-central-directory
// record (and the ZIP64 one), the central directory (with ZIP64 extra fields) and the local
// headers, and refuses compressed or encrypted members it needs (fp8a.torch.705).
//
// data.pkl is read by a small pickle machine: the opcodes of protocol 2 that torch.save writes
// (plus the protocol 3/4 ones FRAME, SHORT_BINUNICODE, BINUNICODE8, MEMOIZE, STACK_GLOBAL) and a
// fixed allow-list of globals, as PyTorch's weights_only loading:
//   torch._utils._rebuild_tensor_v2 / _v3, _rebuild_parameter(_with_state),
//   torch._tensor._rebuild_from_type_v2 with torch.Tensor or torch.nn.Parameter,
//   the torch.<Name>Storage classes, torch.storage.UntypedStorage, torch.<dtype>,
//   collections.OrderedDict, torch.Size, torch.device;
// plus, so that Transformer Engine DumpTensors files load, classes of the transformer_engine and
// transformer_engine_torch modules and builtins.getattr applied to one of them (TE pickles its
// QuantizedTensor as getattr(Float8Tensor, "_make_in_reduce_ex")(...)): such objects are never
// built, they become opaque values reported in `skipped`. Nothing is ever called: every global is
// a tag the machine interprets itself. Any other global is refused by name (fp8a.torch.703) when
// the GLOBAL or STACK_GLOBAL opcode is read. Hostile pickles are bounded: the machine's stack
// (2^20 values), open MARKs (2^16), memo (2^20 entries), object nesting (256 levels), tensor rank
// (64), key path length (1024 bytes) and entries reported (65536) are capped (fp8a.torch.702), and
// a container shared through the memo is walked once.
//
// Storages are persistent ids ('storage', <storage class>, key, location, numel); the member
// data/<key> must hold exactly numel elements (bytes for an UntypedStorage). Tensors must lie
// inside their storage, and the ones returned must be contiguous (fp8a.torch.704).
//
// Errors are input errors with one-line messages "<where>: ...":
//   fp8a.torch.701  not a torch.save zip archive (not a zip, no <top>/data.pkl, malformed zip
//                   structure, legacy non-zip torch.save format, big-endian byte order)
//   fp8a.torch.702  malformed pickle (names the problem, the byte position and the opcode)
//   fp8a.torch.703  pickle global not on the allow-list (named)
//   fp8a.torch.704  tensor data out of bounds, missing storage or non-contiguous strides (names
//                   the key or the storage)
//   fp8a.torch.705  a needed member is compressed or encrypted
//   fp8a.torch.706  no bfloat16 / float16 / float32 tensor in the file
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a {

struct TorchTensor {
  // Dict key path: "high_precision", "a.b" for nested dicts, "layers.0.act" through list/tuple
  // indices; "" for a bare tensor. Non-string dict keys are written as ints ("7") or "?".
  std::string key;
  DType dtype = DType::kF32;  // BF16, F16 or F32; other dtypes are skipped
  std::vector<std::int64_t> shape;
  // First element inside the zip member (stored, uncompressed), contiguous row-major, with the
  // storage offset applied. Valid while `bytes` passed to read_torch_save lives.
  const std::byte* data = nullptr;
};

// Reads a torch.save zip archive: returns every tensor found in the unpickled object (a tensor,
// or dicts / OrderedDicts / lists / tuples of tensors, nested), in pickle order, skipping
// non-tensor leaves (ints, floats, strings, None, bools) and tensors of dtypes fp8-advisor does not
// evaluate, which are recorded in `skipped` (when not null) as "key: dtype", e.g.
// "quantized: float8_e4m3fn"; Transformer Engine objects are recorded as "key: class", e.g.
// "quantized: transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor". The top-level key
// "" is written "(top level)" there. A container reached twice (shared through the pickle memo)
// is walked once. `where` names the file in messages.
std::vector<TorchTensor> read_torch_save(std::span<const std::byte> bytes, std::string_view where,
                                         std::vector<std::string>* skipped);

}  // namespace fp8a
