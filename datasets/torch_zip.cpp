#include "datasets/torch_zip.hpp"

#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

#include "datasets/stored_zip.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr InputId kNotTorch = "fp8a.torch.701";
constexpr InputId kBadPickle = "fp8a.torch.702";
constexpr InputId kNotAllowed = "fp8a.torch.703";
constexpr InputId kBadTensor = "fp8a.torch.704";
constexpr InputId kCompressed = "fp8a.torch.705";
constexpr InputId kNoTensor = "fp8a.torch.706";

// Caps that keep a hostile pickle from exhausting memory or the native stack.
constexpr std::size_t kMaxStack = std::size_t{1} << 20;  // values on the machine's stack
constexpr std::size_t kMaxMarks = std::size_t{1} << 16;  // open MARKs
constexpr std::size_t kMaxMemo = std::size_t{1} << 20;   // memo entries
constexpr std::size_t kMaxDepth = 256;                   // container nesting when walking
constexpr std::size_t kMaxRank = 64;                     // dimensions of a tensor
constexpr std::size_t kMaxArgs = 8;                      // arguments of an allow-listed call
constexpr std::size_t kMaxKey = 1024;                    // bytes of a key path
constexpr std::size_t kMaxEntries = 65536;               // tensors returned plus entries skipped
constexpr std::size_t kMaxQuoted = 120;                  // characters of a name in a message

[[noreturn]] void fail(InputId id, std::string_view where, const std::string& what) {
  throw input_error(id, std::string(where) + ": " + what);
}

// Quotes a name for a message on one line (quoted_input): control bytes escaped, long names cut.
std::string quoted(std::string_view s) { return quoted_input(s, kMaxQuoted); }

std::string key_label(const std::string& key) {
  return key.empty() ? "top-level tensor" : "tensor " + quoted(key);
}

std::uint64_t load_le(std::span<const std::byte> b, std::size_t pos, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(b[pos + i]);
  return v;
}

// ---------------------------------------------------------------------------------------------
// ZIP: StoredZip reads the archive; only what torch.save writes is accepted: one disk, stored
// members. Members are checked when read, so an unused compressed member is no error.
// ---------------------------------------------------------------------------------------------

void raise_torch_zip(const ZipError& e, std::string_view where) {
  const std::string member = "member " + quoted(e.name);
  const std::string a = std::to_string(e.a), b = std::to_string(e.b), c = std::to_string(e.c);
  std::string what;
  switch (e.fault) {
    case ZipFault::kNoEndRecord:
      fail(kNotTorch, where,
           e.looks_like_zip
               ? "truncated zip archive: it starts like a zip but has no end-of-central-directory "
                 "record"
               : "not a torch.save zip archive: no end-of-central-directory record");
    case ZipFault::kEncrypted:
      fail(kCompressed, where,
           member +
               " is encrypted; only plain stored members, as torch.save writes them, are read");
    case ZipFault::kCompressed:
      fail(kCompressed, where,
           member + " is compressed (zip method " + a +
               "); only stored members, as torch.save writes them, are read");
    case ZipFault::kMultiDisk: what = "multi-disk archives are not supported"; break;
    case ZipFault::kZip64RecordOutside:
    case ZipFault::kZip64RecordSignature:
    case ZipFault::kZip64RecordSize:  // not checked in this dialect
      what = "the ZIP64 end-of-central-directory locator points to offset " + a +
             ", where no ZIP64 end record is";
      break;
    case ZipFault::kDirectoryBounds:
      what = "the central directory (" + a + " bytes at offset " + b + ") lies outside the file";
      break;
    case ZipFault::kTooManyEntries:
      what = a + " entries cannot fit in a central directory of " + b + " bytes";
      break;
    case ZipFault::kEntryHeaderOverrun:
    case ZipFault::kEntrySignature:
      what = e.entry() + " at offset " + a + " is not a central directory header";
      break;
    case ZipFault::kEntryOverrun: what = e.entry() + " overruns the central directory"; break;
    case ZipFault::kExtraTruncated: what = member + ": truncated extra field"; break;
    case ZipFault::kExtraOverrun: what = member + ": extra field overruns"; break;
    case ZipFault::kZip64ExtraShort:
    case ZipFault::kZip64ExtraMissing:  // not checked in this dialect
      what = member + ": ZIP64 extra field is too short";
      break;
    case ZipFault::kUnusedDirectoryBytes:  // not checked in this dialect
      what = a + " unused bytes at the end of the central directory";
      break;
    case ZipFault::kSizeMismatch:
      what = member + " is stored but its compressed size " + a + " differs from its size " + b;
      break;
    case ZipFault::kLocalOutside:
    case ZipFault::kLocalSignature: what = member + ": no local header at offset " + a; break;
    case ZipFault::kLocalName:
      what = member + ": the local header does not match the central directory";
      break;
    case ZipFault::kDataOverrun:
      what = member + " (" + a + " bytes at offset " + b + ") overruns the central directory";
      break;
  }
  fail(kNotTorch, where, "malformed zip archive: " + what);
}

constexpr ZipDialect kTorchZip{.raise = raise_torch_zip,
                               .strict_end_records = false,
                               .exact_directory = false,
                               .lazy_extra_fields = false,
                               .local_name_first = true};

using ZipEntry = StoredZipEntry;

// The archive's members by name, each read on demand.
class Zip {
 public:
  Zip(std::span<const std::byte> bytes, std::string_view where)
      : zip_(bytes, where, kTorchZip), where_(where) {
    entries_.reserve(static_cast<std::size_t>(zip_.entry_count()));
    for (std::uint64_t i = 0; i < zip_.entry_count(); ++i) {
      ZipEntry z = zip_.next_entry();
      if (!by_name_.emplace(z.name, entries_.size()).second)
        fail(kNotTorch, where_,
             "malformed zip archive: member " + quoted(z.name) + " appears twice");
      entries_.push_back(std::move(z));
    }
  }

  const std::vector<ZipEntry>& entries() const { return entries_; }

  const ZipEntry* find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &entries_[it->second];
  }

  // The bytes of a stored member.
  std::span<const std::byte> data(const ZipEntry& z) const { return zip_.data(z); }

 private:
  StoredZip zip_;
  std::string_view where_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

// ---------------------------------------------------------------------------------------------
// Torch dtypes and storage classes (torch/storage.py _dtype_to_storage_type_map, _new_dtypes).
// ---------------------------------------------------------------------------------------------

struct TorchDType {
  std::string_view name;     // torch.<name>
  std::string_view storage;  // torch.<storage>; empty for dtypes saved with an UntypedStorage
  std::size_t itemsize;
  std::optional<DType> dtype;  // set for the types fp8-advisor evaluates
};

const TorchDType kTorchDTypes[] = {
    {"float32", "FloatStorage", 4, DType::kF32},
    {"float16", "HalfStorage", 2, DType::kF16},
    {"bfloat16", "BFloat16Storage", 2, DType::kBF16},
    {"float64", "DoubleStorage", 8, std::nullopt},
    {"int64", "LongStorage", 8, std::nullopt},
    {"int32", "IntStorage", 4, std::nullopt},
    {"int16", "ShortStorage", 2, std::nullopt},
    {"int8", "CharStorage", 1, std::nullopt},
    {"uint8", "ByteStorage", 1, std::nullopt},
    {"bool", "BoolStorage", 1, std::nullopt},
    {"complex64", "ComplexFloatStorage", 8, std::nullopt},
    {"complex128", "ComplexDoubleStorage", 16, std::nullopt},
    {"qint8", "QInt8Storage", 1, std::nullopt},
    {"quint8", "QUInt8Storage", 1, std::nullopt},
    {"qint32", "QInt32Storage", 4, std::nullopt},
    {"quint4x2", "QUInt4x2Storage", 1, std::nullopt},
    {"quint2x4", "QUInt2x4Storage", 1, std::nullopt},
    {"complex32", "", 4, std::nullopt},
    {"float8_e4m3fn", "", 1, std::nullopt},
    {"float8_e5m2", "", 1, std::nullopt},
    {"float8_e4m3fnuz", "", 1, std::nullopt},
    {"float8_e5m2fnuz", "", 1, std::nullopt},
    {"float8_e8m0fnu", "", 1, std::nullopt},
    {"float4_e2m1fn_x2", "", 1, std::nullopt},
    {"uint16", "", 2, std::nullopt},
    {"uint32", "", 4, std::nullopt},
    {"uint64", "", 8, std::nullopt},
    {"bits8", "", 1, std::nullopt},
    {"bits16", "", 2, std::nullopt},
    {"bits1x8", "", 1, std::nullopt},
    {"bits2x4", "", 1, std::nullopt},
    {"bits4x2", "", 1, std::nullopt},
};

// ---------------------------------------------------------------------------------------------
// Pickle values. Containers, strings and the rest live in arenas owned by the machine; a Value
// refers to them by index, so memo sharing and even cycles are plain indices.
// ---------------------------------------------------------------------------------------------

enum class Kind : std::uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kOther,  // a harmless leaf: an int wider than 64 bits, a torch.device
  kStr,
  kTuple,
  kList,
  kDict,  // items hold key, value, key, value, ...
  kGlobal,
  kStorage,
  kTensor,
  kOpaque,  // a Transformer Engine object, never built
};

struct Value {
  Kind kind = Kind::kNone;
  std::int64_t i = 0;     // kBool, kInt
  double f = 0;           // kFloat
  std::uint32_t ref = 0;  // index into the arena of its kind
};

enum class G : std::uint8_t {
  kRebuildV2,
  kRebuildV3,
  kRebuildParameter,
  kRebuildParameterWithState,
  kRebuildFromTypeV2,
  kTensorType,
  kOrderedDict,
  kTypedStorage,
  kUntypedStorage,
  kDtype,
  kSize,
  kDevice,
  kTeClass,
  kGetattr,
};

struct Global {
  G kind;
  std::string name;                   // module.name
  const TorchDType* dtype = nullptr;  // kTypedStorage, kDtype
};

struct Storage {
  std::string key;
  const TorchDType* dtype = nullptr;  // nullptr for an UntypedStorage
  std::span<const std::byte> data;
};

struct Tensor {
  std::uint32_t storage = 0;
  const TorchDType* dtype = nullptr;
  std::int64_t offset = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kOther: return "object";
    case Kind::kStr: return "str";
    case Kind::kTuple: return "tuple";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kGlobal: return "global";
    case Kind::kStorage: return "storage";
    case Kind::kTensor: return "tensor";
    case Kind::kOpaque: return "Transformer Engine object";
  }
  return "value";
}

const char* opcode_name(std::uint8_t op) {
  switch (op) {
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case '.': return "STOP";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 0x8a: return "LONG1";
    case 'G': return "BINFLOAT";
    case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case '}': return "EMPTY_DICT";
    case ']': return "EMPTY_LIST";
    case ')': return "EMPTY_TUPLE";
    case '(': return "MARK";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 0x81: return "NEWOBJ";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
  }
  return nullptr;
}

class Unpickler {
 public:
  Unpickler(std::span<const std::byte> pickle, std::string member, const Zip& zip,
            std::string data_prefix, std::string_view where)
      : p_(pickle),
        member_(std::move(member)),
        zip_(zip),
        data_prefix_(std::move(data_prefix)),
        where_(where) {}

  Value run() {
    while (pos_ < p_.size()) {
      op_pos_ = pos_;
      op_ = static_cast<std::uint8_t>(p_[pos_++]);
      if (opcode_name(op_) == nullptr) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02x", op_);
        fail(kBadPickle, where_,
             "malformed pickle at byte " + std::to_string(op_pos_) + " of " + escaped_input(member_, kMaxQuoted) +
                 ": unknown or unsupported opcode " + buf);
      }
      if (op_ == '.') {
        if (stack_.size() <= floor()) bad("the stack is empty");
        return stack_.back();
      }
      step();
    }
    op_pos_ = pos_;
    op_ = 0;
    bad("the pickle ends without STOP");
  }

  // Walks the object from the root, collecting tensors and recording skipped entries. Each
  // container is expanded once; key paths are kept as parent links and spelled out only for the
  // entries reported, so shared references cannot multiply memory.
  void collect(const Value& root, std::vector<TorchTensor>* out,
               std::vector<std::string>* skipped) {
    struct Item {
      Value v;
      std::uint32_t node;  // path node of this item; kRoot for the root
      std::size_t depth;
    };
    std::vector<Item> todo{{root, kRoot, 0}};
    std::vector<bool> seen(seqs_.size(), false);
    while (!todo.empty()) {
      const Item it = todo.back();
      todo.pop_back();
      const Value& v = it.v;
      switch (v.kind) {
        case Kind::kTensor:
          count_entry(out, skipped);
          take_tensor(tensors_[v.ref], key_of(it.node), out, skipped);
          break;
        case Kind::kOpaque: {
          count_entry(out, skipped);
          const std::string key = key_of(it.node);
          skipped->push_back((key.empty() ? std::string("(top level)") : key) + ": " +
                             opaque_[v.ref]);
          break;
        }
        case Kind::kTuple:
        case Kind::kList:
        case Kind::kDict: {
          if (seen[v.ref]) break;
          seen[v.ref] = true;
          if (it.depth >= kMaxDepth)
            walk_error("objects nested more than " + std::to_string(kMaxDepth) + " levels deep");
          const auto& items = seqs_[v.ref];
          const bool dict = v.kind == Kind::kDict;
          for (std::size_t i = items.size(); i >= (dict ? 2 : 1); i -= dict ? 2 : 1) {
            PathNode n{it.node, {}, static_cast<std::int64_t>(dict ? 0 : i - 1), !dict};
            if (dict) {
              const Value& k = items[i - 2];
              if (k.kind == Kind::kStr) {
                n.name = strs_[k.ref];
              } else if (k.kind == Kind::kInt) {
                n.number = k.i;
                n.numeric = true;
              } else {
                n.name = k.kind == Kind::kBool   ? (k.i ? "True" : "False")
                         : k.kind == Kind::kNone ? "None"
                                                 : "?";
              }
            }
            nodes_.push_back(n);
            todo.push_back(
                {items[i - 1], static_cast<std::uint32_t>(nodes_.size() - 1), it.depth + 1});
          }
          break;
        }
        default: break;  // a non-tensor leaf
      }
    }
  }

 private:
  // ---- key paths ----
  static constexpr std::uint32_t kRoot = 0xFFFFFFFF;
  struct PathNode {
    std::uint32_t parent = kRoot;
    std::string_view name;    // a string dict key (a view into strs_), "True", "None", ...
    std::int64_t number = 0;  // an int dict key or a list / tuple index
    bool numeric = false;
  };

  std::string key_of(std::uint32_t node) const {
    std::vector<std::string> parts;
    std::size_t length = 0;
    for (std::uint32_t n = node; n != kRoot; n = nodes_[n].parent) {
      const PathNode& p = nodes_[n];
      parts.push_back(p.numeric ? std::to_string(p.number)
                                : std::string(p.name.substr(0, kMaxKey + 1)));
      length += parts.back().size() + 1;
      if (length > kMaxKey + 1)
        walk_error("a key path is longer than " + std::to_string(kMaxKey) + " bytes");
    }
    std::string key;
    for (std::size_t i = parts.size(); i-- > 0;) key += parts[i] + (i ? "." : "");
    return key;
  }

  void count_entry(const std::vector<TorchTensor>* out,
                   const std::vector<std::string>* skipped) const {
    if (out->size() + skipped->size() >= kMaxEntries)
      walk_error("more than " + std::to_string(kMaxEntries) + " tensors");
  }

  [[noreturn]] void walk_error(const std::string& what) const {
    fail(kBadPickle, where_, "malformed pickle " + escaped_input(member_, kMaxQuoted) + ": " + what);
  }

  // ---- stack, marks, memo ----
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  void push(Value v) {
    if (stack_.size() >= kMaxStack)
      bad("the stack holds more than " + std::to_string(kMaxStack) + " values");
    stack_.push_back(v);
  }

  Value pop() {
    if (stack_.size() <= floor()) bad("stack underflow");
    const Value v = stack_.back();
    stack_.pop_back();
    return v;
  }

  Value& top() {
    if (stack_.size() <= floor()) bad("stack underflow");
    return stack_.back();
  }

  std::vector<Value> pop_mark() {
    if (marks_.empty()) bad("no MARK to pop");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  void memo_put(std::uint64_t index) {
    const Value v = top();
    if (memo_.size() >= kMaxMemo && memo_.find(index) == memo_.end())
      bad("the memo holds more than " + std::to_string(kMaxMemo) + " entries");
    memo_[index] = v;
  }

  Value memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) bad("memo entry " + std::to_string(index) + " was never stored");
    return it->second;
  }

  // ---- reading operands ----
  std::size_t need(std::uint64_t n) {
    if (n > p_.size() - pos_) bad("needs " + std::to_string(n) + " more bytes but the pickle ends");
    const std::size_t at = pos_;
    pos_ += static_cast<std::size_t>(n);
    return at;
  }

  std::uint64_t read_le(int n) { return load_le(p_, need(static_cast<std::uint64_t>(n)), n); }

  std::string read_text(std::uint64_t n) {
    const std::size_t at = need(n);
    return std::string(reinterpret_cast<const char*>(p_.data() + at), static_cast<std::size_t>(n));
  }

  std::string read_line() {
    std::size_t end = pos_;
    while (end < p_.size() && p_[end] != std::byte{'\n'}) ++end;
    if (end == p_.size()) bad("the line is not terminated before the pickle ends");
    std::string s(reinterpret_cast<const char*>(p_.data() + pos_), end - pos_);
    pos_ = end + 1;
    return s;
  }

  // ---- building values ----
  Value make(Kind k, std::vector<Value> items = {}) {
    seqs_.push_back(std::move(items));
    return {k, 0, 0, static_cast<std::uint32_t>(seqs_.size() - 1)};
  }

  Value make_str(std::string s) {
    strs_.push_back(std::move(s));
    return {Kind::kStr, 0, 0, static_cast<std::uint32_t>(strs_.size() - 1)};
  }

  Value make_global(Global g) {
    globals_.push_back(std::move(g));
    return {Kind::kGlobal, 0, 0, static_cast<std::uint32_t>(globals_.size() - 1)};
  }

  Value make_opaque(std::string name) {
    opaque_.push_back(std::move(name));
    return {Kind::kOpaque, 0, 0, static_cast<std::uint32_t>(opaque_.size() - 1)};
  }

  static bool is_seq(const Value& v) { return v.kind == Kind::kTuple || v.kind == Kind::kList; }

  // The allow-list. Called when GLOBAL / STACK_GLOBAL is read, before the name is used.
  Global resolve(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    auto g = [&](G k, const TorchDType* dt = nullptr) { return Global{k, full, dt}; };
    if (module == "torch._utils") {
      if (name == "_rebuild_tensor_v2") return g(G::kRebuildV2);
      if (name == "_rebuild_tensor_v3") return g(G::kRebuildV3);
      if (name == "_rebuild_parameter") return g(G::kRebuildParameter);
      if (name == "_rebuild_parameter_with_state") return g(G::kRebuildParameterWithState);
    }
    if (module == "torch._tensor" && name == "_rebuild_from_type_v2")
      return g(G::kRebuildFromTypeV2);
    if ((module == "torch" || module == "torch._tensor") && name == "Tensor")
      return g(G::kTensorType);
    if (module == "torch.nn.parameter" && name == "Parameter") return g(G::kTensorType);
    if (module == "collections" && name == "OrderedDict") return g(G::kOrderedDict);
    if ((module == "torch" || module == "torch.storage") && name == "UntypedStorage")
      return g(G::kUntypedStorage);
    if (module == "torch") {
      if (name == "Size") return g(G::kSize);
      if (name == "device") return g(G::kDevice);
      for (const auto& t : kTorchDTypes) {
        if (name == t.name) return g(G::kDtype, &t);
        if (!t.storage.empty() && name == t.storage) return g(G::kTypedStorage, &t);
      }
    }
    if (module == "transformer_engine_torch" || module == "transformer_engine" ||
        module.rfind("transformer_engine.", 0) == 0)
      return g(G::kTeClass);
    if ((module == "builtins" || module == "__builtin__") && name == "getattr")
      return g(G::kGetattr);
    fail(kNotAllowed, where_,
         "pickle global " + quoted(full) +
             " is not allowed: only tensors, storages, dtypes and (Ordered)dicts, lists and "
             "tuples of them are read, and no pickle code is run");
  }

  // ('storage', storage class, key, location, numel) -> the member data/<key>.
  Value persistent_load(const Value& pid) {
    const bool shape_ok = pid.kind == Kind::kTuple && seqs_[pid.ref].size() == 5;
    const auto* items = shape_ok ? &seqs_[pid.ref] : nullptr;
    if (!shape_ok || (*items)[0].kind != Kind::kStr || strs_[(*items)[0].ref] != "storage" ||
        (*items)[1].kind != Kind::kGlobal ||
        (globals_[(*items)[1].ref].kind != G::kTypedStorage &&
         globals_[(*items)[1].ref].kind != G::kUntypedStorage) ||
        (*items)[2].kind != Kind::kStr || (*items)[3].kind != Kind::kStr ||
        (*items)[4].kind != Kind::kInt || (*items)[4].i < 0)
      bad("the persistent id is not ('storage', storage class, key, location, numel)");
    const Global& cls = globals_[(*items)[1].ref];
    Storage s;
    s.key = strs_[(*items)[2].ref];
    s.dtype = cls.kind == G::kTypedStorage ? cls.dtype : nullptr;
    const std::string member = data_prefix_ + s.key;
    const ZipEntry* z = zip_.find(member);
    if (z == nullptr)
      fail(kBadTensor, where_,
           "storage " + quoted("data/" + s.key) + " is missing: no member " + quoted(member));
    s.data = zip_.data(*z);
    const auto numel = static_cast<std::uint64_t>((*items)[4].i);
    std::uint64_t nbytes = numel;
    if (s.dtype != nullptr && __builtin_mul_overflow(numel, s.dtype->itemsize, &nbytes))
      fail(kBadTensor, where_,
           "storage " + quoted("data/" + s.key) + ": " + std::to_string(numel) +
               " elements overflow");
    if (nbytes != s.data.size())
      fail(kBadTensor, where_,
           "storage " + quoted("data/" + s.key) + " holds " + std::to_string(s.data.size()) +
               " bytes but the pickle declares " +
               (s.dtype != nullptr ? std::to_string(numel) + " " + std::string(s.dtype->name) +
                                         " elements (" + std::to_string(nbytes) + " bytes)"
                                   : std::to_string(nbytes) + " bytes"));
    storages_.push_back(std::move(s));
    return {Kind::kStorage, 0, 0, static_cast<std::uint32_t>(storages_.size() - 1)};
  }

  std::vector<std::int64_t> int_list(const Value& v, const char* what) {
    if (!is_seq(v)) bad(std::string(what) + " is a " + kind_name(v.kind) + ", not a tuple of ints");
    if (seqs_[v.ref].size() > kMaxRank)
      bad(std::string(what) + " has " + std::to_string(seqs_[v.ref].size()) +
          " dimensions, more than " + std::to_string(kMaxRank));
    std::vector<std::int64_t> out;
    for (const auto& x : seqs_[v.ref]) {
      if (x.kind != Kind::kInt) bad(std::string(what) + " holds a " + kind_name(x.kind));
      out.push_back(x.i);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
  // [, metadata]); _v3 adds the dtype after backward_hooks.
  Value rebuild_tensor(const Global& fn, const std::vector<Value>& a) {
    const bool v3 = fn.kind == G::kRebuildV3;
    const std::size_t base = v3 ? 7 : 6;
    if (a.size() != base && a.size() != base + 1)
      bad(fn.name + " takes " + std::to_string(base) + " or " + std::to_string(base + 1) +
          " arguments, not " + std::to_string(a.size()));
    if (a[0].kind != Kind::kStorage) bad(fn.name + ": the first argument is not a storage");
    if (a[1].kind != Kind::kInt) bad(fn.name + ": the storage offset is not an int");
    Tensor t;
    t.storage = a[0].ref;
    t.offset = a[1].i;
    t.shape = int_list(a[2], "the size");
    t.stride = int_list(a[3], "the stride");
    if (t.shape.size() != t.stride.size())
      bad(fn.name + ": size " + shape_text(t.shape) + " and stride " + shape_text(t.stride) +
          " differ in length");
    if (v3) {
      if (a[6].kind != Kind::kGlobal || globals_[a[6].ref].kind != G::kDtype)
        bad(fn.name + ": the dtype argument is not a torch dtype");
      t.dtype = globals_[a[6].ref].dtype;
    } else {
      t.dtype = storages_[t.storage].dtype;
      if (t.dtype == nullptr) bad(fn.name + ": an untyped storage needs _rebuild_tensor_v3");
    }
    tensors_.push_back(std::move(t));
    return {Kind::kTensor, 0, 0, static_cast<std::uint32_t>(tensors_.size() - 1)};
  }

  // REDUCE: the callable is always an allow-listed global, interpreted here; nothing runs.
  Value call(const Value& f, const Value& args, bool nested = false) {
    if (f.kind != Kind::kGlobal) bad("calls a " + std::string(kind_name(f.kind)));
    if (args.kind != Kind::kTuple)
      bad("the arguments are a " + std::string(kind_name(args.kind)) + ", not a tuple");
    const Global fn = globals_[f.ref];
    if (fn.kind == G::kTeClass) return make_opaque(fn.name);  // arguments not needed
    if (seqs_[args.ref].size() > kMaxArgs)
      bad(fn.name + " called with " + std::to_string(seqs_[args.ref].size()) + " arguments");
    const std::vector<Value> a = seqs_[args.ref];  // a copy: make() below may move seqs_
    switch (fn.kind) {
      case G::kRebuildV2:
      case G::kRebuildV3: return rebuild_tensor(fn, a);
      case G::kRebuildParameter:
      case G::kRebuildParameterWithState: {
        const std::size_t n = fn.kind == G::kRebuildParameter ? 3 : 4;
        if (a.size() != n || (a[0].kind != Kind::kTensor && a[0].kind != Kind::kOpaque))
          bad(fn.name + " takes a tensor and " + std::to_string(n - 1) + " more arguments");
        return a[0];
      }
      case G::kRebuildFromTypeV2: {
        // (func, new_type, args, state): a tensor rebuilt by func, then given the type and state.
        if (nested || a.size() != 4 || a[0].kind != Kind::kGlobal || a[1].kind != Kind::kGlobal)
          bad(fn.name + " takes (rebuild function, tensor type, arguments, state)");
        const Global& type = globals_[a[1].ref];
        if (type.kind == G::kTeClass) return make_opaque(type.name);
        if (type.kind != G::kTensorType) bad(fn.name + ": " + type.name + " is not a tensor type");
        return call(a[0], a[2], true);
      }
      case G::kOrderedDict:
        if (!a.empty()) bad("collections.OrderedDict with arguments is not supported");
        return make(Kind::kDict);
      case G::kSize:
        if (a.size() != 1 || !is_seq(a[0])) bad("torch.Size takes one tuple");
        return a[0];
      case G::kDevice: return {Kind::kOther, 0, 0, 0};
      case G::kTeClass: return make_opaque(fn.name);
      case G::kGetattr:
        // getattr(<TE class>, name): how pickle writes a classmethod such as
        // Float8Tensor._make_in_reduce_ex. Allowed on Transformer Engine classes only.
        if (a.size() == 2 && a[0].kind == Kind::kGlobal && globals_[a[0].ref].kind == G::kTeClass &&
            a[1].kind == Kind::kStr)
          return make_global(Global{G::kTeClass, globals_[a[0].ref].name, nullptr});
        fail(kNotAllowed, where_,
             "pickle global " + quoted(fn.name) +
                 " is allowed only on Transformer Engine classes; no pickle code is run");
      case G::kTensorType:
      case G::kTypedStorage:
      case G::kUntypedStorage:
      case G::kDtype: break;
    }
    bad(fn.name + " cannot be called");
  }

  // ---- one opcode ----
  void step() {
    switch (op_) {
      case 0x80: {
        const auto v = read_le(1);
        if (v > 5) bad("unsupported pickle protocol " + std::to_string(v));
        return;
      }
      case 0x95: {
        const auto n = read_le(8);
        if (n > p_.size() - pos_)
          bad("the frame of " + std::to_string(n) + " bytes overruns the pickle");
        return;
      }
      case 'N': return push({Kind::kNone, 0, 0, 0});
      case 0x88: return push({Kind::kBool, 1, 0, 0});
      case 0x89: return push({Kind::kBool, 0, 0, 0});
      case 'J':
        return push(
            {Kind::kInt, static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4))), 0, 0});
      case 'K': return push({Kind::kInt, static_cast<std::int64_t>(read_le(1)), 0, 0});
      case 'M': return push({Kind::kInt, static_cast<std::int64_t>(read_le(2)), 0, 0});
      case 0x8a: {
        const auto n = static_cast<int>(read_le(1));
        if (n > 8) {
          need(static_cast<std::uint64_t>(n));
          return push({Kind::kOther, 0, 0, 0});
        }
        std::uint64_t v = n == 0 ? 0 : read_le(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);  // sign
        return push({Kind::kInt, static_cast<std::int64_t>(v), 0, 0});
      }
      case 'G': {
        const std::size_t at = need(8);
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<std::uint8_t>(p_[at + i]);
        double d;
        std::memcpy(&d, &bits, 8);
        return push({Kind::kFloat, 0, d, 0});
      }
      case 'X': return push(make_str(read_text(read_le(4))));
      case 0x8c: return push(make_str(read_text(read_le(1))));
      case 0x8d: return push(make_str(read_text(read_le(8))));
      case '}': return push(make(Kind::kDict));
      case ']': return push(make(Kind::kList));
      case ')': return push(make(Kind::kTuple));
      case '(':
        if (marks_.size() >= kMaxMarks)
          bad("more than " + std::to_string(kMaxMarks) + " MARKs are open");
        marks_.push_back(stack_.size());
        return;
      case 't': return push(make(Kind::kTuple, pop_mark()));
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<Value> items(static_cast<std::size_t>(op_ - 0x84));
        for (std::size_t i = items.size(); i-- > 0;) items[i] = pop();
        return push(make(Kind::kTuple, std::move(items)));
      }
      case 'q': return memo_put(read_le(1));
      case 'r': return memo_put(read_le(4));
      case 0x94: return memo_put(memo_.size());
      case 'h': return push(memo_get(read_le(1)));
      case 'j': return push(memo_get(read_le(4)));
      case 'c': {
        std::string module = read_line();
        std::string name = read_line();
        return push(make_global(resolve(module, name)));
      }
      case 0x93: {
        const Value name = pop();
        const Value module = pop();
        if (module.kind != Kind::kStr || name.kind != Kind::kStr)
          bad("module and name are not strings");
        return push(make_global(resolve(strs_[module.ref], strs_[name.ref])));
      }
      case 'Q': return push(persistent_load(pop()));
      case 'R': {
        const Value args = pop();
        const Value f = pop();
        return push(call(f, args));
      }
      case 0x81: {
        const Value args = pop();
        const Value cls = pop();
        if (args.kind != Kind::kTuple) bad("the arguments are not a tuple");
        if (cls.kind == Kind::kGlobal && globals_[cls.ref].kind == G::kTeClass)
          return push(make_opaque(globals_[cls.ref].name));
        if (cls.kind == Kind::kGlobal && globals_[cls.ref].kind == G::kOrderedDict)
          return push(make(Kind::kDict));
        bad("cannot create an instance of a " + (cls.kind == Kind::kGlobal
                                                     ? globals_[cls.ref].name
                                                     : std::string(kind_name(cls.kind))));
      }
      case 'b': {
        pop();  // the state: attributes of a tensor, a TE object or a dict subclass; not needed
        const Value& target = top();
        if (target.kind != Kind::kTensor && target.kind != Kind::kOpaque &&
            target.kind != Kind::kDict && target.kind != Kind::kOther)
          bad("cannot set the state of a " + std::string(kind_name(target.kind)));
        return;
      }
      case 's': {
        const Value v = pop();
        const Value k = pop();
        const Value d = top();
        if (d.kind != Kind::kDict)
          bad("the target is a " + std::string(kind_name(d.kind)) + ", not a dict");
        seqs_[d.ref].push_back(k);
        seqs_[d.ref].push_back(v);
        return;
      }
      case 'u': {
        std::vector<Value> items = pop_mark();
        const Value d = top();
        if (d.kind != Kind::kDict)
          bad("the target is a " + std::string(kind_name(d.kind)) + ", not a dict");
        if (items.size() % 2 != 0) bad("an odd number of keys and values");
        auto& dst = seqs_[d.ref];
        dst.insert(dst.end(), items.begin(), items.end());
        return;
      }
      case 'a': {
        const Value v = pop();
        const Value l = top();
        if (l.kind != Kind::kList)
          bad("the target is a " + std::string(kind_name(l.kind)) + ", not a list");
        seqs_[l.ref].push_back(v);
        return;
      }
      case 'e': {
        std::vector<Value> items = pop_mark();
        const Value l = top();
        if (l.kind != Kind::kList)
          bad("the target is a " + std::string(kind_name(l.kind)) + ", not a list");
        auto& dst = seqs_[l.ref];
        dst.insert(dst.end(), items.begin(), items.end());
        return;
      }
      case '0': pop(); return;
      case '1': pop_mark(); return;
      case '2': return push(top());
    }
    bad("unhandled opcode");  // every named opcode has a case above
  }

  // ---- tensors ----
  void take_tensor(const Tensor& t, const std::string& key, std::vector<TorchTensor>* out,
                   std::vector<std::string>* skipped) {
    const Storage& s = storages_[t.storage];
    const std::size_t item = t.dtype->itemsize;
    const auto where_text = [&] {
      return key_label(key) + " (shape " + shape_text(t.shape) + ", stride " + shape_text(t.stride) +
             ", storage offset " + std::to_string(t.offset) + ")";
    };
    if (t.offset < 0) fail(kBadTensor, where_, where_text() + ": negative storage offset");
    std::uint64_t numel = 1;
    std::uint64_t last = static_cast<std::uint64_t>(t.offset);  // element index of the last element
    bool overflow = false;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] < 0 || t.stride[i] < 0)
        fail(kBadTensor, where_, where_text() + ": negative size or stride");
      const auto n = static_cast<std::uint64_t>(t.shape[i]);
      std::uint64_t span = 0;
      overflow |= __builtin_mul_overflow(numel, n, &numel);
      if (n > 0) {
        overflow |= __builtin_mul_overflow(n - 1, static_cast<std::uint64_t>(t.stride[i]), &span);
        overflow |= __builtin_add_overflow(last, span, &last);
      }
    }
    std::uint64_t end_bytes = 0;  // bytes of the storage the tensor reaches
    if (numel == 0 && !overflow) {
      overflow |= __builtin_mul_overflow(static_cast<std::uint64_t>(t.offset), item, &end_bytes);
    } else {
      overflow |= __builtin_add_overflow(last, std::uint64_t{1}, &last);
      overflow |= __builtin_mul_overflow(last, item, &end_bytes);
    }
    if (overflow) fail(kBadTensor, where_, where_text() + ": its extent overflows");
    if (end_bytes > s.data.size())
      fail(kBadTensor, where_,
           where_text() + " reaches byte " + std::to_string(end_bytes) + " of storage " +
               quoted("data/" + s.key) + ", which holds " + std::to_string(s.data.size()) +
               " bytes");
    if (!t.dtype->dtype) {
      skipped->push_back((key.empty() ? std::string("(top level)") : key) + ": " +
                         std::string(t.dtype->name));
      return;
    }
    if (numel > 0) {
      std::int64_t expected = 1;
      for (std::size_t i = t.shape.size(); i-- > 0;) {
        if (t.shape[i] != 1 && t.stride[i] != expected)
          fail(kBadTensor, where_,
               where_text() + " is not contiguous; save tensor.contiguous() instead");
        expected *= t.shape[i];
      }
    }
    TorchTensor r;
    r.key = key;
    r.dtype = *t.dtype->dtype;
    r.shape = t.shape;
    r.data = s.data.data() + static_cast<std::size_t>(t.offset) * item;
    out->push_back(std::move(r));
  }

  [[noreturn]] void bad(const std::string& what) const {
    const char* name = op_ == 0 ? nullptr : opcode_name(op_);
    fail(kBadPickle, where_,
         "malformed pickle at byte " + std::to_string(op_pos_) + " of " + escaped_input(member_, kMaxQuoted) +
             (name != nullptr ? std::string(" (") + name + ")" : std::string()) + ": " + what);
  }

  std::span<const std::byte> p_;
  std::string member_;
  const Zip& zip_;
  std::string data_prefix_;  // "<top>/data/"
  std::string_view where_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::uint8_t op_ = 0;

  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value> memo_;

  std::vector<std::vector<Value>> seqs_;  // tuples, lists, dicts
  std::vector<std::string> strs_;
  std::vector<Global> globals_;
  std::vector<PathNode> nodes_;
  std::vector<Storage> storages_;
  std::vector<Tensor> tensors_;
  std::vector<std::string> opaque_;
};

// torch.save's legacy format starts with the pickled magic number 0x1950a86a20f9469cfc6c:
// PROTO n, LONG1 of 10 bytes.
bool is_legacy_torch_save(std::span<const std::byte> b) {
  static constexpr std::uint8_t kMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                            0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (b.size() < 2 + sizeof kMagic || static_cast<std::uint8_t>(b[0]) != 0x80) return false;
  for (std::size_t i = 0; i < sizeof kMagic; ++i)
    if (static_cast<std::uint8_t>(b[2 + i]) != kMagic[i]) return false;
  return true;
}

}  // namespace

std::vector<TorchTensor> read_torch_save(std::span<const std::byte> bytes, std::string_view where,
                                         std::vector<std::string>* skipped) {
  if (is_legacy_torch_save(bytes))
    fail(kNotTorch, where,
         "legacy torch.save format (_use_new_zipfile_serialization=False) is not supported; "
         "re-save it with torch.save(obj, path) in the default zip format");
  const Zip zip(bytes, where);

  // The one top folder holding data.pkl.
  std::vector<std::string> tops;
  for (const auto& e : zip.entries()) {
    constexpr std::string_view kPkl = "/data.pkl";
    if (e.name.size() > kPkl.size() && e.name.ends_with(kPkl)) {
      const std::string top = e.name.substr(0, e.name.size() - kPkl.size());
      if (top.find('/') == std::string::npos) tops.push_back(top);
    }
  }
  if (tops.empty()) fail(kNotTorch, where, "not a torch.save archive: no <folder>/data.pkl member");
  if (tops.size() > 1)
    fail(kNotTorch, where,
         "not a torch.save archive: data.pkl in several top folders (" + quoted(tops[0]) + ", " +
             quoted(tops[1]) + ")");
  const std::string& top = tops[0];
  if (const ZipEntry* order = zip.find(top + "/byteorder")) {
    const auto b = zip.data(*order);
    const std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
    if (text != "little")
      fail(kNotTorch, where,
           "byteorder is " + quoted(text) + "; only little-endian torch.save archives are read");
  }
  const std::string pkl_name = top + "/data.pkl";
  const auto pkl = zip.data(*zip.find(pkl_name));

  Unpickler vm(pkl, pkl_name, zip, top + "/data/", where);
  const Value root = vm.run();
  std::vector<TorchTensor> out;
  std::vector<std::string> skipped_here;
  vm.collect(root, &out, &skipped_here);
  if (out.empty()) {
    std::string what = "no bfloat16, float16 or float32 tensor in the file";
    if (!skipped_here.empty()) {
      what += " (skipped: ";
      for (std::size_t i = 0; i < skipped_here.size() && i < 4; ++i)
        what += (i ? ", " : "") + escaped_input(skipped_here[i], kMaxQuoted);
      if (skipped_here.size() > 4) what += ", ...";
      what += ")";
    }
    fail(kNoTensor, where, what);
  }
  if (skipped != nullptr) skipped->insert(skipped->end(), skipped_here.begin(), skipped_here.end());
  return out;
}

}  // namespace fp8a
