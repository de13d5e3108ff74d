// NumPy .npy files and .npz archives (np.save / np.savez), validated without copying.
//
// .npy layout (numpy/lib/_format_impl.py: its module docstring and _read_array_header):
//   - magic "\x93NUMPY", major and minor version bytes: 1.0 (2-byte little-endian header
//     length), 2.0 or 3.0 (4-byte little-endian header length);
//   - header text: a Python dict literal with exactly the keys 'descr', 'fortran_order' and
//     'shape', in any order, space-padded and ended by '\n' (readers must not rely on the padding
//     or alignment); NumPy refuses headers of more than 10000 characters by default, so do we;
//   - the raw array data, prod(shape) * itemsize bytes, up to the end of the file.
// The header is parsed by a small hand-written parser of Python literals (strings in single or
// double quotes without escapes, True/False, integers, tuples and lists); anything else is refused,
// and nothing is ever evaluated or unpickled.
//
// Accepted dtypes ('descr' as written):
//   '<f4' '=f4'              -> F32
//   '<f2' '=f2'              -> F16
//   '<V2' '|V2' '=V2' '<u2' '=u2' -> BF16, only with NpyRawDType::kBf16 (--npy-dtype bf16):
//       np.save writes ml_dtypes.bfloat16 as 2-byte void '<V2', and a .view(np.uint16) as '<u2'.
// '=' (native order) is taken to mean little-endian. Refused: big-endian, float64, object arrays
// (pickled), structured dtypes (a list 'descr'), every other dtype. fortran_order True is accepted
// only when the element order is the same as in C order (at most one dimension larger than 1).
// The data must fill the rest of the file exactly: a shorter file is truncated, a longer one has
// trailing bytes. Empty arrays (a dimension of 0) are accepted here.
//
// .npz: a zip archive of "<name>.npy" members. list_npz reads the end of central directory record
// (and the ZIP64 end record when a ZIP64 locator precedes it), the central directory (sizes and
// offsets from there, ZIP64 extra fields when they are 0xFFFFFFFF) and each local header, and
// returns the members' bytes in central directory order. Only stored members (method 0, what
// np.savez writes) are accepted; compressed ones (np.savez_compressed) are refused, since this
// project maps files without copying and has no zlib. CRC-32s are not checked.
//
// Errors are input errors with one-line messages "<where>: ...":
//   fp8a.npy.601 not an .npy file (magic, version)      fp8a.npy.604 size mismatch / overflow
//   fp8a.npy.602 bad header                             fp8a.npy.605 bad zip structure (.npz)
//   fp8a.npy.603 unsupported dtype or layout            fp8a.npy.606 compressed .npz member
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a {

inline constexpr std::size_t kNpyMaxHeaderChars = 10000;  // NumPy's _MAX_HEADER_SIZE
inline constexpr std::size_t kNpyMaxDims = 64;            // NumPy's NPY_MAXDIMS

// One array of a .npy file (or of one member of a .npz archive), validated; data points into the
// bytes.
struct NpyArray {
  std::string descr;                // as written, e.g. "<f4", "<V2", "<u2"
  std::vector<std::int64_t> shape;  // () -> empty (one element)
  DType dtype = DType::kF32;        // resolved input type
  const std::byte* data = nullptr;
  std::uint64_t data_bytes = 0;
};

// How to read 2-byte void / uint16 data (--npy-dtype bf16).
enum class NpyRawDType { kNone, kBf16 };

// Parses a whole .npy file. where names the file (and member) in messages, e.g. "a.npy" or
// "acts.npz:x.npy".
NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view where, NpyRawDType raw);

// Lists the members of a .npz (a zip archive written by np.savez): name without the ".npy" suffix
// -> the member's bytes, in central directory order. Two members with the same name (after the
// suffix is removed) are refused. where names the archive in messages.
std::vector<std::pair<std::string, std::span<const std::byte>>> list_npz(
    std::span<const std::byte> bytes, std::string_view where);

}  // namespace fp8a
