// Exact byte encodings of finished units of work: one shard's evaluation (TensorEvaluation) and
// one GEMM layer's rows. A checkpoint stores them (engine/unit_store.hpp) and processes of one run
// can send them to each other. Every number is kept bit for bit (floats as their bit patterns), so
// a result read back is the result computed. Little-endian, the machine's (x86-64, aarch64).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.hpp"
#include "engine/gemm_row.hpp"
#include "engine/unit_store.hpp"

namespace fp8a {

// Thrown by the decoders on bytes that are not a whole encoding of the expected kind.
struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ByteWriter {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u64(std::uint64_t v);
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void f32(float v);
  void f64(double v);
  void str(std::string_view s);
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  std::uint8_t u8();
  std::uint64_t u64();
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  float f32();
  double f64();
  std::string str();
  // A count of items that each take at least min_bytes: refuses counts the rest cannot hold.
  std::size_t count(std::size_t min_bytes);
  bool done() const { return pos_ == in_.size(); }
  void expect_done() const;

 private:
  std::string_view take(std::size_t n);
  std::string_view in_;
  std::size_t pos_ = 0;
};

// The UnitKind a byte encodes (static_cast<std::uint8_t>(kind)); unset when it is none.
std::optional<UnitKind> unit_kind_from(std::uint8_t v);

// A recipe's every field (keys of units whose result depends on it).
void write_recipe(ByteWriter& w, const Recipe& recipe);

std::string encode_tensor_evaluation(const TensorEvaluation& e);
TensorEvaluation decode_tensor_evaluation(std::string_view bytes);

// A GEMM layer's rows, one list per format (evaluate_gemm_errors' per-job results).
std::string encode_gemm_rows(const std::vector<std::vector<GemmRow>>& per_format);
std::vector<std::vector<GemmRow>> decode_gemm_rows(std::string_view bytes);

}  // namespace fp8a
