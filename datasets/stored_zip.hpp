#pragma once

// A reader for ZIP archives of stored (uncompressed) members on one disk, as np.savez and
// torch.save write them (APPNOTE.TXT 4.3). Members are returned as spans of the archive, never
// copied. The reader finds and checks the byte structure; what an error says is up to the
// caller's ZipDialect, so each format keeps its own error ids and wording.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fp8a {

// Everything the reader can find wrong. The comments name the details each fault fills in.
enum class ZipFault {
  kNoEndRecord,           // no end of central directory record; looks_like_zip
  kMultiDisk,             // disk numbers other than 0, or differing entry counts
  kZip64RecordOutside,    // a: ZIP64 end record offset, b: its locator's offset
  kZip64RecordSignature,  // a: ZIP64 end record offset
  kZip64RecordSize,       // a: ZIP64 end record offset, b: the size it declares
  kDirectoryBounds,       // a: central directory size, b: its offset, c: where it must end
  kTooManyEntries,        // a: entries announced, b: central directory size
  kEntryHeaderOverrun,    // index, a: entry offset (the fixed 46 bytes overrun)
  kEntrySignature,        // index, a: entry offset
  kEntryOverrun,          // index (name, extra field or comment overruns)
  kExtraTruncated,        // name (fewer than 4 bytes left for an extra field header)
  kExtraOverrun,          // name (an extra field's length overruns)
  kZip64ExtraShort,       // name, a: ZIP64 extra field length, b: bytes needed
  kZip64ExtraMissing,     // name (only with ZipDialect::lazy_extra_fields)
  kUnusedDirectoryBytes,  // a: bytes left after the last entry (only with exact_directory)
  kEncrypted,             // name
  kCompressed,            // name, a: compression method
  kSizeMismatch,          // name, a: compressed size, b: size
  kLocalOutside,          // name, a: local header offset, b: central directory offset
  kLocalSignature,        // name, a: local header offset
  kLocalName,             // name, a: local header offset (or the data starts past the members)
  kDataOverrun,           // name, a: size, b: data offset, c: central directory offset
};

struct ZipError {
  ZipFault fault = ZipFault::kNoEndRecord;
  std::string_view name = {};   // the member's name, where known
  std::uint64_t index = 0;      // central directory entry number
  std::uint64_t a = 0, b = 0, c = 0;
  bool looks_like_zip = false;  // kNoEndRecord: the file starts with a local header signature

  std::string entry() const { return "central directory entry " + std::to_string(index); }
};

// How one format reads and reports. `raise` must throw.
struct ZipDialect {
  void (*raise)(const ZipError& error, std::string_view where);
  // The EOCD's own disk numbers must be 0 even when ZIP64 records follow, the ZIP64 locator must
  // count exactly one disk (not 0 or 1) and the ZIP64 end record's declared size must fit.
  bool strict_end_records = false;
  // The central directory ends exactly where the end record begins and its entries fill it
  // (kDirectoryBounds, kUnusedDirectoryBytes); otherwise it need only lie before the end record.
  bool exact_directory = false;
  // Extra fields are read only when a ZIP64 value is needed, up to the first ZIP64 field, which
  // must then exist; otherwise every extra field is checked and each ZIP64 field read.
  bool lazy_extra_fields = false;
  // The local header's name is compared before the data's extent is checked (and a data start
  // past the members reads kLocalName); otherwise the extent first (kDataOverrun).
  bool local_name_first = false;
};

struct StoredZipEntry {
  std::string name;
  std::uint16_t flags = 0;   // general purpose bit flag; bit 0: encrypted
  std::uint16_t method = 0;  // compression method; 0: stored
  std::uint64_t compressed = 0;
  std::uint64_t size = 0;
  std::uint64_t local_offset = 0;
};

class StoredZip {
 public:
  // Finds and checks the end records (APPNOTE 4.3.14-4.3.16); throws through the dialect.
  StoredZip(std::span<const std::byte> bytes, std::string_view where, const ZipDialect& dialect);

  std::uint64_t entry_count() const { return entries_; }
  // Reads the next central directory entry (APPNOTE 4.3.12); call entry_count() times.
  StoredZipEntry next_entry();
  // After the last entry: with exact_directory, no bytes may be left in the central directory.
  void finish() const;
  // The bytes of a plain stored member, after checking its local header (APPNOTE 4.3.7).
  std::span<const std::byte> data(const StoredZipEntry& entry) const;

 private:
  std::uint64_t le(std::uint64_t at, int n) const;
  std::uint64_t u16(std::uint64_t at) const { return le(at, 2); }
  std::uint64_t u32(std::uint64_t at) const { return le(at, 4); }
  std::uint64_t u64(std::uint64_t at) const { return le(at, 8); }
  [[noreturn]] void fail(const ZipError& error) const;

  std::span<const std::byte> b_;
  std::string_view where_;
  const ZipDialect& d_;
  std::uint64_t entries_ = 0;
  std::uint64_t read_ = 0;      // entries read so far
  std::uint64_t cd_start_ = 0;  // the central directory; the members lie before it
  std::uint64_t cd_end_ = 0;
  std::uint64_t at_ = 0;  // the next central directory entry
};

}  // namespace fp8a
