#include "engine/cluster.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "engine/unit_codec.hpp"

namespace fp8a {

std::vector<int> assign_balanced(std::span<const std::uint64_t> costs, int ranks) {
  FP8A_CHECK(ranks >= 1, "assign_balanced needs at least one rank");
  std::vector<std::size_t> order(costs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return costs[a] > costs[b]; });
  std::vector<std::uint64_t> load(static_cast<std::size_t>(ranks), 0);
  std::vector<int> owner(costs.size(), 0);
  for (const std::size_t u : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equal loads
    owner[u] = static_cast<int>(least - load.begin());
    *least += costs[u];
  }
  return owner;
}

std::optional<std::string> RecordingStore::load(UnitKind kind, std::string_view key) {
  if (inner_ == nullptr) return std::nullopt;
  auto bytes = inner_->load(kind, key);
  if (bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    units_[{kind, std::string(key)}] = *bytes;
  }
  return bytes;
}

void RecordingStore::save(UnitKind kind, std::string_view key, std::string_view bytes) {
  if (inner_ != nullptr) inner_->save(kind, key, bytes);
  const std::lock_guard<std::mutex> lock(mutex_);
  units_[{kind, std::string(key)}] = std::string(bytes);
}

namespace {
constexpr std::uint64_t kUnitsTag = 0x31'73'74'69'6E'75'38'66;  // "f8units1"
}  // namespace

std::string RecordingStore::encode() const {
  ByteWriter w;
  w.u64(kUnitsTag);
  w.u64(units_.size());
  for (const auto& [id, bytes] : units_) {
    w.u8(static_cast<std::uint8_t>(id.first));
    w.str(id.second);
    w.str(bytes);
  }
  return w.take();
}

std::optional<std::string> GatheredUnits::load(UnitKind kind, std::string_view key) {
  const auto it = units_.find({kind, std::string(key)});
  if (it == units_.end())
    throw internal_error("fp8a.internal.005", std::string("a ") +
                                                  (kind == UnitKind::kShard ? "shard evaluation" : "GEMM layer") +
                                                  " owned by another MPI rank was not received from it");
  return it->second;
}

std::optional<std::string> GatheredUnits::find(UnitKind kind, const std::string& key) const {
  const auto it = units_.find({kind, key});
  if (it == units_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> OfferedStore::load(UnitKind kind, std::string_view key) {
  if (auto bytes = offered_.find(kind, std::string(key))) return bytes;
  return inner_ != nullptr ? inner_->load(kind, key) : std::nullopt;
}

bool any_rank_has_store(Cluster& cluster, const UnitStore* store) {
  for (const std::string& has : cluster.all_gather(store != nullptr ? "1" : "0"))
    if (has == "1") return true;
  return false;
}

void GatheredUnits::save_received(UnitStore& store, const RecordingStore& mine) const {
  for (const auto& [id, bytes] : units_)
    if (!mine.has(id.first, id.second)) store.save(id.first, id.second, bytes);
}

void GatheredUnits::save(UnitKind, std::string_view, std::string_view) {
  FP8A_CHECK(false, "a unit received from another rank was computed again");
}

GatheredUnits exchange_units(Cluster& cluster, const RecordingStore& mine, bool stopped) {
  ByteWriter w;
  w.u8(stopped ? 1 : 0);
  w.str(mine.encode());
  const std::vector<std::string> all = cluster.all_gather(w.bytes());
  GatheredUnits out;
  for (std::size_t r = 0; r < all.size(); ++r) {
    try {
      ByteReader in(all[r]);
      out.stopped_ = out.stopped_ || in.u8() != 0;
      const std::string units = in.str();
      in.expect_done();
      ByteReader u(units);
      if (u.u64() != kUnitsTag) throw DecodeError("not a list of units");
      const std::size_t n = u.count(17);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t kind = u.u8();
        if (kind > static_cast<std::uint8_t>(UnitKind::kGemmLayer)) throw DecodeError("bad unit kind");
        std::string key = u.str();
        out.units_[{static_cast<UnitKind>(kind), std::move(key)}] = u.str();
      }
      u.expect_done();
    } catch (const DecodeError& e) {
      throw internal_error("fp8a.internal.005", "the units of work received from MPI rank " + std::to_string(r) +
                                                    " do not decode: " + e.what());
    }
  }
  return out;
}

}  // namespace fp8a
