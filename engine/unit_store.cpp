#include "engine/unit_store.hpp"

#include <map>

#include "engine/unit_codec.hpp"

namespace fp8a {

std::string shard_unit_key(const CapturedTensor& shard) {
  ByteWriter w;
  w.str("shard 2");
  w.str(shard.file);
  w.str(shard.file_identity);
  w.str(shard.tensor_name);
  w.u8(static_cast<std::uint8_t>(shard.view.dtype));
  w.u64(shard.view.shape.size());
  for (std::int64_t d : shard.view.shape) w.i64(d);
  return w.take();
}

std::string candidate_unit_key(const Candidate& c) {
  ByteWriter w;
  write_recipe(w, c.recipe);
  w.u8(static_cast<std::uint8_t>(c.format));
  w.u8(static_cast<std::uint8_t>(c.role));
  w.u8(static_cast<std::uint8_t>(c.orientation));
  w.f32(c.given_scale);
  w.f32(c.given_amax);
  return w.take();
}

namespace {

// A shard's unit: its statistics, and its result under each candidate by the candidate's key.
struct ShardUnit {
  TensorEvaluation evaluation;     // stats, and results in the order of keys
  std::vector<std::string> keys;
};

std::string encode_unit(const ShardUnit& u) {
  ByteWriter w;
  w.str(encode_tensor_evaluation(u.evaluation));
  w.u64(u.keys.size());
  for (const std::string& k : u.keys) w.str(k);
  return w.take();
}

ShardUnit decode_unit(std::string_view bytes) {
  ByteReader r(bytes);
  ShardUnit u;
  u.evaluation = decode_tensor_evaluation(r.str());
  u.keys.resize(r.count(8));
  for (std::string& k : u.keys) k = r.str();
  r.expect_done();
  if (u.keys.size() != u.evaluation.results.size()) throw DecodeError("keys and results differ in number");
  return u;
}

}  // namespace

TensorEvaluation evaluate_shard(const Backend& backend, UnitStore* store, const CapturedTensor& shard,
                                std::span<const Candidate> candidates) {
  if (store == nullptr) return backend.evaluate(candidates, shard.view);
  const std::string key = shard_unit_key(shard);
  std::optional<ShardUnit> unit;
  if (const auto bytes = store->load(UnitKind::kShard, key)) {
    try {
      unit = decode_unit(*bytes);
    } catch (const DecodeError&) {
      // Not a whole unit (another build's layout): evaluated again below.
    }
  }
  std::map<std::string, std::size_t> stored;  // candidate key -> index in the unit
  if (unit)
    for (std::size_t i = 0; i < unit->keys.size(); ++i) stored.emplace(unit->keys[i], i);
  TensorEvaluation out;
  out.results.resize(candidates.size());
  std::vector<Candidate> missing;
  std::vector<std::size_t> missing_at;
  std::vector<std::string> missing_keys;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    std::string k = candidate_unit_key(candidates[c]);
    const auto it = stored.find(k);
    if (it != stored.end()) {
      out.results[c] = unit->evaluation.results[it->second];
    } else {
      missing.push_back(candidates[c]);
      missing_at.push_back(c);
      missing_keys.push_back(std::move(k));
    }
  }
  store->count(UnitKind::kShard, candidates.size() - missing.size(), missing.size());
  if (unit && missing.empty()) {
    out.stats = unit->evaluation.stats;
    return out;
  }
  // The backend evaluates what the store lacks (the statistics alone when that is all).
  TensorEvaluation e = backend.evaluate(missing, shard.view);
  out.stats = e.stats;
  if (!unit) unit.emplace();
  unit->evaluation.stats = e.stats;
  for (std::size_t m = 0; m < missing.size(); ++m) {
    out.results[missing_at[m]] = e.results[m];
    unit->evaluation.results.push_back(std::move(e.results[m]));
    unit->keys.push_back(std::move(missing_keys[m]));
  }
  store->save(UnitKind::kShard, key, encode_unit(*unit));
  return out;
}

}  // namespace fp8a
