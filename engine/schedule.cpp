#include "engine/schedule.hpp"

#include <tbb/parallel_for.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "core/error.hpp"
#include "engine/unit_codec.hpp"

namespace fp8a {

namespace {

// Units by kind and key: what ranks send each other.
using UnitMap = std::map<std::pair<UnitKind, std::string>, std::string>;

constexpr std::uint64_t kUnitsTag = 0x31'73'74'69'6E'75'38'66;  // "f8units1"

// Collective: whether any rank has a store (a checkpoint). When one has, each wave starts with
// the ranks offering each other what their stores hold of the others' shares.
bool any_rank_has_store(Cluster& cluster, const UnitStore* store) {
  for (const std::string& has : cluster.all_gather(store != nullptr ? "1" : "0"))
    if (has == "1") return true;
  return false;
}

// What every rank sent in one exchange.
struct Received {
  UnitMap units;
  bool stopped = false;  // a rank stopped on a request before its last unit
};

// Collective: every rank gives its units (and whether it stopped on a request) and gets every
// rank's. Throws internal_error fp8a.internal.005 on bytes that do not decode.
Received exchange_units(Cluster& cluster, const UnitMap& mine, bool stopped) {
  ByteWriter units;
  units.u64(kUnitsTag);
  units.u64(mine.size());
  for (const auto& [id, bytes] : mine) {
    units.u8(static_cast<std::uint8_t>(id.first));
    units.str(id.second);
    units.str(bytes);
  }
  ByteWriter w;
  w.u8(stopped ? 1 : 0);
  w.str(units.bytes());
  const std::vector<std::string> all = cluster.all_gather(w.bytes());
  Received out;
  for (std::size_t r = 0; r < all.size(); ++r) {
    try {
      ByteReader in(all[r]);
      const bool stopped_there = in.u8() != 0;  // read whatever the others said
      out.stopped = out.stopped || stopped_there;
      const std::string list = in.str();
      in.expect_done();
      ByteReader u(list);
      if (u.u64() != kUnitsTag) throw DecodeError("not a list of units");
      const std::size_t n = u.count(17);
      for (std::size_t i = 0; i < n; ++i) {
        const std::optional<UnitKind> kind = unit_kind_from(u.u8());
        if (!kind) throw DecodeError("bad unit kind");
        std::string key = u.str();
        out.units[{*kind, std::move(key)}] = u.str();
      }
      u.expect_done();
    } catch (const DecodeError& e) {
      throw internal_error("fp8a.internal.005", "the units of work received from MPI rank " + std::to_string(r) +
                                                    " do not decode: " + e.what());
    }
  }
  return out;
}

// A rank's store for its own share of a wave: first the units other ranks' checkpoints offered
// it, then its own store (may be null), where what it computes is saved. Every unit that passes
// (found or saved) is kept: what this rank sends the others.
class ShareStore final : public UnitStore {
 public:
  ShareStore(const UnitMap& offered, UnitStore* own) : offered_(offered), own_(own) {}
  std::optional<std::string> load(UnitKind kind, std::string_view key) override {
    std::optional<std::string> bytes;
    if (const auto it = offered_.find({kind, std::string(key)}); it != offered_.end()) bytes = it->second;
    else if (own_ != nullptr) bytes = own_->load(kind, key);
    if (bytes) keep(kind, key, *bytes);
    return bytes;
  }
  void save(UnitKind kind, std::string_view key, std::string_view bytes) override {
    if (own_ != nullptr) own_->save(kind, key, bytes);
    keep(kind, key, bytes);
  }
  void count(UnitKind kind, std::uint64_t reused, std::uint64_t computed) override {
    if (own_ != nullptr) own_->count(kind, reused, computed);
  }
  const UnitMap& sent() const { return sent_; }  // read once the share is done

 private:
  void keep(UnitKind kind, std::string_view key, std::string_view bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    sent_[{kind, std::string(key)}] = std::string(bytes);
  }
  const UnitMap& offered_;
  UnitStore* own_;
  std::mutex mutex_;
  UnitMap sent_;
};

// Where the units other ranks own are taken from after the exchange: what every rank sent. A
// unit missing there is a bug (its owner computed it): load throws internal_error
// fp8a.internal.005 rather than letting the work compute it.
class ReceivedStore final : public UnitStore {
 public:
  explicit ReceivedStore(const UnitMap& units) : units_(units) {}
  std::optional<std::string> load(UnitKind kind, std::string_view key) override {
    const auto it = units_.find({kind, std::string(key)});
    if (it == units_.end())
      throw internal_error("fp8a.internal.005",
                           std::string("a ") + (kind == UnitKind::kShard ? "shard evaluation" : "GEMM layer") +
                               " owned by another MPI rank was not received from it");
    return it->second;
  }
  void save(UnitKind, std::string_view, std::string_view) override {
    FP8A_CHECK(false, "a unit received from another rank was computed again");
  }

 private:
  const UnitMap& units_;
};

class Scheduler {
 public:
  Scheduler(const RunContext& context, std::span<const Unit> units, const UnitWork& work)
      : context_(context), units_(units), work_(work) {}

  std::uint64_t bytes(std::size_t u) const {
    std::uint64_t b = 0;
    for (const TensorView* v : units_[u].inputs) b += v->byte_size();
    return b;
  }

  // One process: every unit of [begin, end) computed with the run's store.
  void run_wave(std::size_t begin, std::size_t end) {
    tbb::parallel_for(begin, end, [&](std::size_t u) { run_own(u, context_.store); });
    if (stopped_) throw StopRequested();
  }

  // Over several ranks: the wave's units shared out by cost; each rank computes its own
  // (keeping what it finds and computes), all are exchanged, and every rank completes the
  // others' units from what they sent. With a checkpoint on some rank (rank 0's), the ranks
  // first offer what their stores hold of the others' units, so that a resumed run over several
  // ranks reuses all of it; a rank with a store saves there what the others computed, so that it
  // holds the whole run.
  void run_wave_shared(std::size_t begin, std::size_t end, bool offers) {
    Cluster& cluster = *context_.cluster;
    std::vector<std::uint64_t> costs;
    for (std::size_t u = begin; u < end; ++u) costs.push_back(units_[u].cost);
    const std::vector<int> owner = assign_balanced(costs, cluster.size());
    const auto mine = [&](std::size_t u) { return owner[u - begin] == cluster.rank(); };
    Received offered;
    if (offers) {
      UnitMap offer;
      if (context_.store != nullptr)
        for (std::size_t u = begin; u < end; ++u)
          for (std::size_t k = 0; !mine(u) && k < units_[u].keys.size(); ++k)
            if (auto b = context_.store->load(units_[u].kind, units_[u].keys[k]))
              offer[{units_[u].kind, units_[u].keys[k]}] = std::move(*b);
      offered = exchange_units(cluster, offer, false);
    }
    ShareStore share(offered.units, context_.store);
    tbb::parallel_for(begin, end, [&](std::size_t u) {
      if (mine(u)) run_own(u, &share);
    });
    const Received all = exchange_units(cluster, share.sent(), stopped_);
    if (all.stopped) throw StopRequested();
    if (context_.store != nullptr)
      for (const auto& [id, bytes] : all.units)
        if (share.sent().count(id) == 0) context_.store->save(id.first, id.second, bytes);
    ReceivedStore received(all.units);
    tbb::parallel_for(begin, end, [&](std::size_t u) {
      if (mine(u)) return;
      work_.compute(u, &received);
      report(u);
    });
  }

 private:
  // A unit this rank owns, unless a stop was requested: computed, then its inputs released (the
  // resident set holds the units being computed, not all read so far).
  void run_own(std::size_t u, UnitStore* store) {
    if (stop_requested(context_.stop)) {
      stopped_ = true;
      return;
    }
    work_.compute(u, store);
    for (const TensorView* v : units_[u].inputs) v->release();
    report(u);
  }
  void report(std::size_t u) const {
    if (context_.progress != nullptr) context_.progress->unit_done(units_[u].name, bytes(u));
  }

  const RunContext& context_;
  std::span<const Unit> units_;
  const UnitWork& work_;
  std::atomic<bool> stopped_{false};
};

}  // namespace

void run_units(const RunContext& context, std::string_view stage, std::span<const Unit> units,
               const UnitWork& work) {
  Scheduler scheduler(context, units, work);
  if (context.progress != nullptr) {
    std::uint64_t total = 0;
    for (std::size_t u = 0; u < units.size(); ++u) total += scheduler.bytes(u);
    context.progress->begin_stage(stage, units.size(), total);
  }
  const bool shared = is_distributed(context.cluster);
  const bool offers = shared && any_rank_has_store(*context.cluster, context.store);
  for (std::size_t begin = 0; begin < units.size();) {
    std::size_t end = begin + 1;
    while (end < units.size() && units[end].wave == units[begin].wave) ++end;
    if (shared) scheduler.run_wave_shared(begin, end, offers);
    else scheduler.run_wave(begin, end);
    if (work.wave_done) work.wave_done(begin, end);
    begin = end;
  }
  if (context.progress != nullptr) context.progress->end_stage();
}

void load_or_compute(UnitStore* store, UnitKind kind, const std::string& key,
                     const std::function<bool(std::string_view bytes)>& take,
                     const std::function<std::string()>& compute) {
  if (store == nullptr) {
    compute();
    return;
  }
  bool taken = false;
  if (const auto bytes = store->load(kind, key)) {
    try {
      taken = take(*bytes);
    } catch (const DecodeError&) {
      // Not a whole unit (another build's layout): computed again.
    }
  }
  store->count(kind, taken ? 1 : 0, taken ? 0 : 1);
  if (!taken) store->save(kind, key, compute());
}

}  // namespace fp8a
