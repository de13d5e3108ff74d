// One tensor's amax by training step (TE's "iteration"): the series a training log gives and the
// delayed replay, the forecasts and report.html read. A flat array sorted by step: a log of 10,000
// steps x 960 tensors holds 9.6 M of them, 16 bytes each here where a std::map node took about 64
// (bench/RESULTS.md, "Read step by step, reduced as read"). Reads are std::map's (iteration in step
// order as (step, amax) pairs, find, lower_bound, at); an insert is cheap at the end, where a log's
// steps arrive, and moves the later entries elsewhere.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <utility>
#include <vector>

namespace fp8a {

class AmaxByStep {
 public:
  using value_type = std::pair<std::int64_t, float>;
  using iterator = std::vector<value_type>::iterator;
  using const_iterator = std::vector<value_type>::const_iterator;
  using const_reverse_iterator = std::vector<value_type>::const_reverse_iterator;

  AmaxByStep() = default;
  // As std::map's: the first of equal steps is kept.
  AmaxByStep(std::initializer_list<value_type> entries) {
    for (const value_type& e : entries) try_emplace(e.first, e.second);
  }

  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  const_reverse_iterator rbegin() const { return entries_.rbegin(); }
  const_reverse_iterator rend() const { return entries_.rend(); }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  const_iterator lower_bound(std::int64_t step) const { return begin() + lower_index(step); }
  iterator lower_bound(std::int64_t step) { return begin() + lower_index(step); }
  const_iterator find(std::int64_t step) const {
    const auto it = lower_bound(step);
    return it != end() && it->first == step ? it : end();
  }
  iterator find(std::int64_t step) {
    const auto it = lower_bound(step);
    return it != end() && it->first == step ? it : end();
  }
  std::size_t count(std::int64_t step) const { return find(step) != end() ? 1 : 0; }
  float at(std::int64_t step) const {
    const auto it = find(step);
    if (it == end()) throw std::out_of_range("AmaxByStep::at: no amax at this step");
    return it->second;
  }

  // Inserts (step, amax) unless the step is there; the entry and whether it was inserted.
  std::pair<iterator, bool> try_emplace(std::int64_t step, float amax) {
    if (entries_.empty() || entries_.back().first < step) {
      entries_.emplace_back(step, amax);
      return {entries_.end() - 1, true};
    }
    const auto it = lower_bound(step);
    if (it != end() && it->first == step) return {it, false};
    return {entries_.insert(it, value_type{step, amax}), true};
  }
  // The step's amax, 0 inserted where absent (as std::map's).
  float& operator[](std::int64_t step) { return try_emplace(step, 0.0f).first->second; }
  // Appends a step after every one held (a log's steps arrive in order).
  void push_back(std::int64_t step, float amax) {
    if (!entries_.empty() && entries_.back().first >= step)
      throw std::logic_error("AmaxByStep::push_back: steps must increase");
    entries_.emplace_back(step, amax);
  }
  void reserve(std::size_t n) { entries_.reserve(n); }

  friend bool operator==(const AmaxByStep&, const AmaxByStep&) = default;

 private:
  std::size_t lower_index(std::int64_t step) const {
    return static_cast<std::size_t>(
        std::lower_bound(entries_.begin(), entries_.end(), step,
                         [](const value_type& e, std::int64_t s) { return e.first < s; }) -
        entries_.begin());
  }

  std::vector<value_type> entries_;
};

}  // namespace fp8a
