#include "datasets/capture.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "datasets/npy.hpp"
#include "datasets/safetensors.hpp"
#include "datasets/torch_zip.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr std::string_view kCaptureExtensions[] = {".safetensors", ".npy", ".npz", ".pt"};

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool parse_int64(std::string_view s, std::int64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

// The last run of digits in `name` as a step; false when there is none. Out of range is an error.
bool last_number(const std::string& name, const std::string& path, std::int64_t* step) {
  const auto last = name.find_last_of("0123456789");
  if (last == std::string::npos) return false;
  auto first = last;
  while (first > 0 && name[first - 1] >= '0' && name[first - 1] <= '9') --first;
  const std::string digits = name.substr(first, last - first + 1);
  if (!parse_int64(digits, step))
    throw input_error("fp8a.capture.405", path + ": step " + digits + " in the file name is out of range");
  return true;
}

std::string strip_extension(std::string name) {
  const auto dot = name.find_last_of('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

std::string parent_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "";
  return base_name(path.substr(0, slash));
}

// Step from metadata, else the last number in the file name (extension removed), else 0.
void resolve_step(const std::map<std::string, std::string>& metadata, const std::string& name,
                  CaptureFile* f) {
  if (auto it = metadata.find("step"); it != metadata.end()) {
    if (!parse_int64(it->second, &f->step) || f->step < 0)
      throw input_error("fp8a.capture.405", f->path + ": __metadata__ step " + quoted_input(it->second) +
                                                " is not a non-negative integer");
    f->step_source = "metadata";
    return;
  }
  if (last_number(name, f->path, &f->step)) {
    f->step_source = "file name";
    return;
  }
  f->step = 0;
  f->step_source = "default";
}

// One tensor found in a file, before it becomes a CapturedTensor.
struct FoundTensor {
  std::string name;  // <layer>.<role>
  std::string dtype_name;
  std::optional<DType> dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t numel = 0;
  const std::byte* data = nullptr;
};

void add_tensors(const std::vector<FoundTensor>& found, const CaptureFile& info,
                 const TensorStorage* storage, CaptureSet* set) {
  for (const auto& e : found) {
    const std::string where = info.path + ": tensor " + quoted_input(e.name) + ": ";
    CapturedTensor t;
    if (e.name.size() > kMaxNameBytes)
      throw input_error("fp8a.capture.410", where + "name longer than " + std::to_string(kMaxNameBytes) +
                                                " bytes (real module names are under 300)");
    if (!split_tensor_name(e.name, &t.key.layer, &t.key.role))
      throw input_error("fp8a.capture.403",
                        where + "name must be <layer>.<role> with role activation, weight or gradient");
    if (!e.dtype)
      throw input_error("fp8a.capture.401",
                        where + "dtype " + e.dtype_name + " is not supported (BF16, F16, F32)");
    if (e.numel == 0) throw input_error("fp8a.capture.402", where + "tensor is empty");
    t.key.step = info.step;
    t.rank = info.rank;
    t.file = info.path;
    t.file_identity = info.identity;
    t.tensor_name = e.name;
    t.view = make_tensor_view(e.data, *e.dtype, e.shape, storage);
    set->tensors.push_back(std::move(t));
  }
}

std::uint64_t product(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

FoundTensor from_npy(const NpyArray& a, std::string name) {
  FoundTensor t;
  t.name = std::move(name);
  t.dtype = a.dtype;
  t.dtype_name = a.descr;
  t.shape = a.shape;
  t.numel = product(a.shape);
  t.data = a.data;
  return t;
}

// TE DumpTensors (debug/features/dump_tensors.py TensorLogger.save_tensor, every release since
// TE 2.15): {log_dir}/tensor_dumps/rank_<R>/iter_<NNNNNN>/<layer>_<tensor>.pt, holding a dict with
// "high_precision"; layer and tensor with '/', '\\', ':', '*', '?', '"', '<', '>', '|', ' ' and
// '.' made '_'. The step is the iter_ folder's number; the tensor name, the text after the last
// '_', one of TE's (activation, weight, gradient, output, wgrad, dgrad; another .pt in the folder
// is read as any torch.save file). Also read: the pull request's earlier
// <layer>_<tensor>_iter_<NNNNNN>.pt (TE #2645 before its review moved the iteration into a folder),
// which no release writes. Returns false for other names; step_source: where the step came from.
bool parse_te_dump_name(const std::string& path, const std::string& stem, std::string* layer, std::string* tensor,
                        std::int64_t* step, std::string* step_source) {
  std::string head;
  const std::string folder = parent_name(path);
  const bool in_iter_folder = folder.rfind("iter_", 0) == 0 && folder.size() > 5 &&
                              std::all_of(folder.begin() + 5, folder.end(), [](char c) { return c >= '0' && c <= '9'; });
  *step_source = in_iter_folder ? "folder name" : "file name";
  if (in_iter_folder) {
    if (!parse_int64(std::string_view(folder).substr(5), step)) return false;
    head = stem;
  } else {
    const auto iter = stem.rfind("_iter_");
    if (iter == std::string::npos) return false;
    if (!parse_int64(std::string_view(stem).substr(iter + 6), step)) return false;
    head = stem.substr(0, iter);
  }
  const auto us = head.find_last_of('_');
  if (us == std::string::npos || us == 0) return false;
  *layer = head.substr(0, us);
  *tensor = head.substr(us + 1);
  // In an iter_ folder only TE's tensor names make a dump: another .pt there is read as any other.
  static constexpr std::string_view kTeTensors[] = {"activation", "weight", "gradient", "output", "wgrad", "dgrad"};
  return !in_iter_folder || std::find(std::begin(kTeTensors), std::end(kTeTensors), *tensor) != std::end(kTeTensors);
}

namespace {

// A folder named rank_<R> or rank<R> (R a number up to 1e6): its rank, else -1.
std::int64_t folder_rank(std::string folder) {
  if (folder.rfind("rank", 0) != 0) return -1;
  folder.erase(0, 4);
  if (!folder.empty() && folder[0] == '_') folder.erase(0, 1);
  std::int64_t r = -1;
  return parse_int64(folder, &r) && r >= 0 && r <= 1'000'000 ? r : -1;
}
bool rank_folder(const std::string& folder) { return folder_rank(folder) >= 0; }

}  // namespace

// The rank from __metadata__["rank"], else the nearest folder named rank_<R> or rank<R>, else -1.
int resolve_rank(const std::map<std::string, std::string>& metadata, const std::string& path) {
  std::int64_t r = -1;
  if (auto it = metadata.find("rank"); it != metadata.end()) {
    if (!parse_int64(it->second, &r) || r < 0 || r > 1'000'000)
      throw input_error("fp8a.capture.408", path + ": __metadata__ rank " + quoted_input(it->second) +
                                                " is not a non-negative integer");
    return static_cast<int>(r);
  }
  std::string dir = path;
  for (auto slash = dir.find_last_of('/'); slash != std::string::npos && slash > 0;
       slash = dir.find_last_of('/')) {
    dir.resize(slash);
    if (const std::int64_t folder = folder_rank(base_name(dir)); folder >= 0) return static_cast<int>(folder);
  }
  return -1;
}

// Records one file's tokens per step in the set: the first says it, every other must agree.
void record_tokens(CaptureSet* set, std::int64_t tokens, const std::string& file, std::string how) {
  CaptureTokens& t = set->tokens;
  if (t.tokens_per_step == 0) {
    t = {tokens, file, std::move(how)};
    return;
  }
  if (t.tokens_per_step != tokens)
    throw input_error("fp8a.capture.412", file + ": tokens per step " + std::to_string(tokens) + " but " + t.file +
                                              " says " + std::to_string(t.tokens_per_step) +
                                              ": captures of one run record one number");
}

bool parse_tokens(std::string_view text, std::int64_t* tokens) {
  return parse_int64(text, tokens) && *tokens >= 1 && *tokens <= kMaxTokensPerStep;
}

// __metadata__["tokens_per_step"] (with "tokens_per_step_source" given/counted), when present.
void resolve_tokens(const std::map<std::string, std::string>& metadata, const std::string& path, CaptureSet* set) {
  const auto it = metadata.find("tokens_per_step");
  if (it == metadata.end()) return;
  std::int64_t tokens = 0;
  if (!parse_tokens(it->second, &tokens))
    throw input_error("fp8a.capture.411", path + ": __metadata__ tokens_per_step " + quoted_input(it->second) +
                                              " is not an integer from 1 to 10^12");
  const auto how = metadata.find("tokens_per_step_source");
  const bool known = how != metadata.end() && (how->second == "given" || how->second == "counted");
  record_tokens(set, tokens, path, known ? how->second : std::string());
}

// The largest fp8a_capture.json read: a line or two of JSON.
constexpr std::size_t kCaptureDescriptionMaxBytes = 4096;

// fp8a_capture.json: exactly {"tokens_per_step": N}, N an integer from 1 to 10^12.
void load_description(const std::string& path, const FileSystem& fs, CaptureSet* set) {
  using nlohmann::json;
  auto mapping = fs.map(path);
  const auto bytes = mapping->bytes();
  auto bad = [&](const std::string& why) {
    return input_error("fp8a.capture.413", path + ": " + why + "; expected {\"tokens_per_step\": N}");
  };
  if (bytes.size() > kCaptureDescriptionMaxBytes)
    throw bad(std::to_string(bytes.size()) + " bytes, more than the " + std::to_string(kCaptureDescriptionMaxBytes) +
              " a capture description may have");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.find('\0') != std::string_view::npos || text.starts_with("\xEF\xBB\xBF"))
    throw bad("not JSON text (a NUL byte or a byte-order mark)");
  int keys = 0;  // top-level keys, repeated ones counted each time (nlohmann keeps the last)
  const json doc = json::parse(
      text,
      [&keys](int depth, json::parse_event_t event, json&) {
        if (event == json::parse_event_t::key && depth == 1) ++keys;
        return true;
      },
      false);
  if (doc.is_discarded() || !doc.is_object()) throw bad("not a JSON object");
  const auto it = doc.find("tokens_per_step");
  if (keys != 1 || it == doc.end())
    throw bad(keys > 1 ? "more than one key" : "no tokens_per_step");
  std::int64_t tokens = 0;
  if (!it->is_number_integer() || !parse_tokens(it->dump(), &tokens))
    throw bad("tokens_per_step " + quoted_input(it->dump()) + " is not an integer from 1 to 10^12");
  record_tokens(set, tokens, path, "");
}

bool is_description(const std::string& path) { return base_name(path) == kCaptureDescriptionName; }

void load_file(const std::string& path, const FileSystem& fs, const CaptureOptions& options,
               CaptureSet* set) {
  if (is_description(path)) return load_description(path, fs, set);
  auto mapping = fs.map(path);
  const auto bytes = mapping->bytes();
  CaptureFile info;
  info.path = path;
  info.bytes = bytes.size();
  info.identity = mapping->identity();
  const std::string name = base_name(path);
  std::vector<FoundTensor> found;
  if (name.ends_with(".npy")) {
    // One array; the file name is the tensor name, the step the last number of the folder, or of
    // the folder above a rank folder (step_N/rank_R/: R is the rank, not the step).
    const NpyArray a = parse_npy(bytes, path, options.npy_dtype);
    found.push_back(from_npy(a, strip_extension(name)));
    std::string folder = parent_name(path);
    if (rank_folder(folder)) {
      const std::string above = path.substr(0, path.find_last_of('/'));
      folder = parent_name(above);
    }
    if (last_number(folder, path, &info.step)) info.step_source = "folder name";
    else info.step_source = "default";
  } else if (name.ends_with(".npz")) {
    for (const auto& [member, member_bytes] : list_npz(bytes, path))
      found.push_back(from_npy(parse_npy(member_bytes, path + ":" + member + ".npy", options.npy_dtype), member));
    resolve_step({}, strip_extension(name), &info);
  } else if (name.ends_with(".pt")) {
    std::vector<std::string> skipped;
    const auto tensors = read_torch_save(bytes, path, &skipped);
    std::string layer, tensor;
    if (parse_te_dump_name(path, strip_extension(name), &layer, &tensor, &info.step, &info.step_source)) {
      Role role;
      if (!role_from_name(tensor, &role)) {
        info.note = "TE dump of '" + tensor + "', not a GEMM operand fp8-advisor evaluates; skipped";
        set->files.push_back(std::move(info));
        set->mappings.push_back(std::move(mapping));
        return;
      }
      const TorchTensor* hp = nullptr;
      for (const auto& t : tensors)
        if (t.key == "high_precision" || tensors.size() == 1) hp = &t;
      if (hp == nullptr)
        throw input_error("fp8a.capture.407", path + ": TE tensor dump without a 'high_precision' tensor");
      FoundTensor f;
      f.name = layer + "." + tensor;
      f.dtype = hp->dtype;
      f.shape = hp->shape;
      f.numel = product(hp->shape);
      f.data = hp->data;
      found.push_back(f);
    } else {
      for (const auto& t : tensors) {
        FoundTensor f;
        f.name = t.key;
        f.dtype = t.dtype;
        f.shape = t.shape;
        f.numel = product(t.shape);
        f.data = t.data;
        found.push_back(f);
      }
      resolve_step({}, strip_extension(name), &info);
    }
  } else {
    const SafetensorsFile st = parse_safetensors(bytes, path);
    resolve_step(st.metadata, strip_extension(name), &info);
    info.rank = resolve_rank(st.metadata, path);
    resolve_tokens(st.metadata, path, set);
    for (const auto& e : st.entries) {
      FoundTensor f;
      f.name = e.name;
      f.dtype = e.dtype;
      f.dtype_name = e.dtype_name;
      f.shape = e.shape;
      f.numel = e.numel;
      f.data = bytes.data() + e.begin;
      found.push_back(f);
    }
  }
  if (!name.ends_with(".safetensors")) info.rank = resolve_rank({}, path);
  add_tensors(found, info, mapping.get(), set);
  info.tensor_count = found.size();
  set->files.push_back(std::move(info));
  set->mappings.push_back(std::move(mapping));
}

bool is_capture_file(const std::string& path) {
  for (std::string_view ext : kCaptureExtensions)
    if (path.ends_with(ext)) return true;
  return false;
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

CaptureSet load_captures(const std::vector<std::string>& paths, const FileSystem& fs,
                         const CaptureOptions& options) {
  CaptureSet set;
  std::vector<std::string> files;
  for (const auto& p : paths) {
    switch (fs.kind(p)) {
      case FileSystem::Kind::kMissing:
        throw input_error("fp8a.io.101", p + ": no such file or directory");
      case FileSystem::Kind::kFile:
        // A text file given as a capture is a mistake with a known fix, not a bad safetensors
        // header ("header length 7954892051032929395" for an amax trace).
        for (std::string_view ext : {".csv", ".log", ".txt", ".json"})
          if (p.ends_with(ext) && !is_description(p))
            throw input_error("fp8a.io.106", p + ": a text file, not a capture (.safetensors, .npy, .npz, .pt); "
                                                 "an amax trace or nvdlfw_inspect log goes to --training-log");
        files.push_back(p);
        break;
      case FileSystem::Kind::kDirectory: {
        std::size_t found = 0;
        for (auto& f : fs.list_files_recursive(p)) {
          if (is_capture_file(f)) {
            files.push_back(std::move(f));
            ++found;
          } else if (is_description(f)) {
            files.push_back(std::move(f));
          }
        }
        if (found == 0)
          throw input_error("fp8a.io.103", p + ": directory holds no captures "
                                             "(*.safetensors, *.npy, *.npz, *.pt)");
        break;
      }
      case FileSystem::Kind::kOther:
        throw input_error("fp8a.io.102", p + ": not a regular file or directory");
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (const auto& f : files) load_file(f, fs, options, &set);

  // Stable: of two equal keys the one from the earlier file (in path order) comes first.
  std::stable_sort(set.tensors.begin(), set.tensors.end(), [](const auto& a, const auto& b) {
    if (a.key == b.key) return a.rank < b.rank;
    return a.key < b.key;
  });
  for (std::size_t i = 1; i < set.tensors.size(); ++i) {
    const auto& a = set.tensors[i - 1];
    const auto& b = set.tensors[i];
    if (a.key == b.key && (a.rank == b.rank || a.rank < 0))
      throw input_error("fp8a.capture.404",
                        "step " + std::to_string(b.key.step) + " tensor " + quoted_input(b.tensor_name) +
                            " appears in both " + a.file + " and " + b.file +
                            (a.rank == b.rank && a.rank >= 0
                                 ? " (same rank " + std::to_string(a.rank) + ")"
                                 : std::string()));
  }
  return set;
}

MissingRoles missing_roles(const CaptureSet& set) {
  MissingRoles m;
  // Tensors are sorted by (step, layer, role): one run per (step, layer).
  for (std::size_t i = 0; i < set.tensors.size();) {
    const CaptureKey& first = set.tensors[i].key;
    std::array<bool, 3> seen{};
    for (; i < set.tensors.size() && set.tensors[i].key.step == first.step && set.tensors[i].key.layer == first.layer; ++i)
      seen[static_cast<std::size_t>(set.tensors[i].key.role)] = true;
    ++m.layer_steps;
    for (std::size_t r = 0; r < 3; ++r) m.missing[r] += !seen[r];
  }
  return m;
}

void check_captures_unchanged(const CaptureSet& set) {
  for (const auto& m : set.mappings) m->check_unchanged();
}

}  // namespace fp8a
