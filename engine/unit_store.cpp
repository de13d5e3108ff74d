#include "engine/unit_store.hpp"

#include "engine/unit_codec.hpp"

namespace fp8a {

std::string shard_unit_key(const CapturedTensor& shard, std::span<const Candidate> candidates) {
  ByteWriter w;
  w.str("shard evaluation 1");
  w.str(shard.file);
  w.str(shard.file_identity);
  w.str(shard.tensor_name);
  w.u8(static_cast<std::uint8_t>(shard.view.dtype));
  w.u64(shard.view.shape.size());
  for (std::int64_t d : shard.view.shape) w.i64(d);
  w.u64(candidates.size());
  for (const Candidate& c : candidates) {
    write_recipe(w, c.recipe);
    w.u8(static_cast<std::uint8_t>(c.format));
    w.u8(static_cast<std::uint8_t>(c.role));
    w.u8(static_cast<std::uint8_t>(c.orientation));
    w.f32(c.given_scale);
  }
  return w.take();
}

TensorEvaluation evaluate_shard(const Backend& backend, UnitStore* store, const CapturedTensor& shard,
                                std::span<const Candidate> candidates) {
  if (store == nullptr) return backend.evaluate(candidates, shard.view);
  const std::string key = shard_unit_key(shard, candidates);
  if (const auto bytes = store->load(UnitKind::kShard, key)) {
    try {
      TensorEvaluation e = decode_tensor_evaluation(*bytes);
      if (e.results.size() == candidates.size()) return e;
    } catch (const DecodeError&) {
      // Not a whole evaluation (another build's layout): computed again below.
    }
  }
  TensorEvaluation e = backend.evaluate(candidates, shard.view);
  store->save(UnitKind::kShard, key, encode_tensor_evaluation(e));
  return e;
}

}  // namespace fp8a
