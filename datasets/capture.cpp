#include "datasets/capture.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "datasets/safetensors.hpp"
#include "engine/core/error.hpp"

namespace fp8a {

namespace {

constexpr std::string_view kExtension = ".safetensors";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool parse_int64(std::string_view s, std::int64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

// Step from metadata, else the last run of digits in the file name (extension removed), else 0.
void resolve_step(const SafetensorsFile& st, CaptureFile* f) {
  if (auto it = st.metadata.find("step"); it != st.metadata.end()) {
    if (!parse_int64(it->second, &f->step) || f->step < 0)
      throw input_error("fp8a.capture.405", f->path + ": __metadata__ step '" + it->second +
                                                "' is not a non-negative integer");
    f->step_source = "metadata";
    return;
  }
  std::string stem = base_name(f->path);
  if (ends_with(stem, kExtension)) stem.resize(stem.size() - kExtension.size());
  auto last = stem.find_last_of("0123456789");
  if (last != std::string::npos) {
    auto first = last;
    while (first > 0 && stem[first - 1] >= '0' && stem[first - 1] <= '9') --first;
    const std::string digits = stem.substr(first, last - first + 1);
    if (!parse_int64(digits, &f->step))
      throw input_error("fp8a.capture.405", f->path + ": step " + digits +
                                                " in the file name is out of range");
    f->step_source = "file name";
    return;
  }
  f->step = 0;
  f->step_source = "default";
}

void load_file(const std::string& path, const FileSystem& fs, CaptureSet* set) {
  auto mapping = fs.map(path);
  const auto bytes = mapping->bytes();
  const SafetensorsFile st = parse_safetensors(bytes, path);
  CaptureFile info;
  info.path = path;
  info.bytes = bytes.size();
  resolve_step(st, &info);
  for (const auto& e : st.entries) {
    const std::string where = path + ": tensor '" + e.name + "': ";
    CapturedTensor t;
    if (!split_tensor_name(e.name, &t.key.layer, &t.key.role))
      throw input_error("fp8a.capture.403",
                        where + "name must be <layer>.<role> with role activation, weight or gradient");
    if (!e.dtype)
      throw input_error("fp8a.capture.401",
                        where + "dtype " + e.dtype_name + " is not supported (BF16, F16, F32)");
    if (e.numel == 0) throw input_error("fp8a.capture.402", where + "tensor is empty");
    t.key.step = info.step;
    t.file = path;
    t.tensor_name = e.name;
    t.view = make_tensor_view(bytes.data() + e.begin, *e.dtype, e.shape);
    set->tensors.push_back(std::move(t));
  }
  info.tensor_count = st.entries.size();
  set->files.push_back(std::move(info));
  set->mappings.push_back(std::move(mapping));
}

}  // namespace

bool natural_less(std::string_view a, std::string_view b) {
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && is_digit(a[ie])) ++ie;
      while (je < b.size() && is_digit(b[je])) ++je;
      // Compare numerically without overflow: strip leading zeros, then length, then digits.
      std::string_view da = a.substr(i, ie - i), db = b.substr(j, je - j);
      da.remove_prefix(std::min(da.find_first_not_of('0'), da.size()));
      db.remove_prefix(std::min(db.find_first_not_of('0'), db.size()));
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

bool operator<(const CaptureKey& a, const CaptureKey& b) {
  if (a.step != b.step) return a.step < b.step;
  if (a.layer != b.layer) {
    if (natural_less(a.layer, b.layer)) return true;
    if (natural_less(b.layer, a.layer)) return false;
    return a.layer < b.layer;  // "x01" vs "x1": same number, any fixed order
  }
  return a.role < b.role;
}

bool split_tensor_name(const std::string& name, std::string* layer, Role* role) {
  const auto dot = name.find_last_of('.');
  if (dot == std::string::npos || dot == 0) return false;
  if (!role_from_name(std::string_view(name).substr(dot + 1), role)) return false;
  *layer = name.substr(0, dot);
  return true;
}

CaptureSet load_captures(const std::vector<std::string>& paths, const FileSystem& fs) {
  CaptureSet set;
  std::vector<std::string> files;
  for (const auto& p : paths) {
    switch (fs.kind(p)) {
      case FileSystem::Kind::kMissing:
        throw input_error("fp8a.io.101", p + ": no such file or directory");
      case FileSystem::Kind::kFile:
        files.push_back(p);
        break;
      case FileSystem::Kind::kDirectory: {
        std::size_t found = 0;
        for (auto& f : fs.list_files_recursive(p)) {
          if (ends_with(f, kExtension)) {
            files.push_back(std::move(f));
            ++found;
          }
        }
        if (found == 0)
          throw input_error("fp8a.io.103", p + ": directory holds no *.safetensors captures");
        break;
      }
      case FileSystem::Kind::kOther:
        throw input_error("fp8a.io.102", p + ": not a regular file or directory");
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (const auto& f : files) load_file(f, fs, &set);

  // Stable: of two equal keys the one from the earlier file (in path order) comes first.
  std::stable_sort(set.tensors.begin(), set.tensors.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  for (std::size_t i = 1; i < set.tensors.size(); ++i) {
    const auto& a = set.tensors[i - 1];
    const auto& b = set.tensors[i];
    if (a.key == b.key)
      throw input_error("fp8a.capture.404",
                        "step " + std::to_string(b.key.step) + " tensor '" + b.tensor_name +
                            "' appears in both " + a.file + " and " + b.file);
  }
  return set;
}

}  // namespace fp8a
