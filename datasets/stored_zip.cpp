#include "datasets/stored_zip.hpp"

#include <cstdlib>
#include <optional>

namespace fp8a {

namespace {

// Signatures and fixed sizes of the records (APPNOTE.TXT 4.3.7, 4.3.12, 4.3.14-4.3.16).
constexpr std::uint32_t kEocdSig = 0x06054b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::uint32_t kZip64EocdSig = 0x06064b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint64_t kEocdBytes = 22;
constexpr std::uint64_t kMaxComment = 0xFFFF;
constexpr std::uint64_t kZip64LocatorBytes = 20;
constexpr std::uint64_t kZip64EocdBytes = 56;
constexpr std::uint64_t kCentralBytes = 46;
constexpr std::uint64_t kLocalBytes = 30;
constexpr std::uint64_t kSaturated32 = 0xFFFFFFFF;  // "see the ZIP64 extra field" (4.4.8)
constexpr std::uint64_t kSaturated16 = 0xFFFF;
constexpr std::uint64_t kZip64ExtraId = 0x0001;  // 4.5.3

}  // namespace

std::uint64_t StoredZip::le(std::uint64_t at, int n) const {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(b_[at + i]);
  return v;
}

void StoredZip::fail(const ZipError& error) const {
  d_.raise(error, where_);
  std::abort();  // raise always throws
}

StoredZip::StoredZip(std::span<const std::byte> bytes, std::string_view where,
                     const ZipDialect& dialect)
    : b_(bytes), where_(where), d_(dialect) {
  const std::uint64_t n = b_.size();
  // End of central directory (4.3.16): the last record whose comment reaches exactly to the end
  // of the file; the comment is at most 64 KiB.
  std::optional<std::uint64_t> eocd;
  if (n >= kEocdBytes) {
    const std::uint64_t lowest = n - kEocdBytes > kMaxComment ? n - kEocdBytes - kMaxComment : 0;
    for (std::uint64_t p = n - kEocdBytes + 1; p-- > lowest;) {
      if (u32(p) == kEocdSig && p + kEocdBytes + u16(p + 20) == n) {
        eocd = p;
        break;
      }
    }
  }
  if (!eocd)
    fail({.fault = ZipFault::kNoEndRecord, .looks_like_zip = n >= 4 && u32(0) == kLocalSig});
  const std::uint64_t e = *eocd;
  std::uint64_t disk = u16(e + 4);
  std::uint64_t cd_disk = u16(e + 6);
  if (d_.strict_end_records && (disk != 0 || cd_disk != 0)) fail({.fault = ZipFault::kMultiDisk});
  std::uint64_t entries_here = u16(e + 8);
  entries_ = u16(e + 10);
  std::uint64_t cd_size = u32(e + 12);
  cd_start_ = u32(e + 16);
  std::uint64_t cd_limit = e;  // the central directory ends before the next record

  // ZIP64 end of central directory locator (4.3.15), just before the EOCD, and the ZIP64 end
  // record (4.3.14) it points to, whose 64-bit values replace the EOCD's.
  if (e >= kZip64LocatorBytes && u32(e - kZip64LocatorBytes) == kZip64LocatorSig) {
    const std::uint64_t loc = e - kZip64LocatorBytes;
    const std::uint64_t total_disks = u32(loc + 16);
    if (u32(loc + 4) != 0 || (d_.strict_end_records ? total_disks != 1 : total_disks > 1))
      fail({.fault = ZipFault::kMultiDisk});
    const std::uint64_t rec = u64(loc + 8);
    if (rec > loc || loc - rec < kZip64EocdBytes)
      fail({.fault = ZipFault::kZip64RecordOutside, .a = rec, .b = loc});
    if (u32(rec) != kZip64EocdSig) fail({.fault = ZipFault::kZip64RecordSignature, .a = rec});
    // The size of the record counts the bytes after its first 12 (4.3.14.1).
    const std::uint64_t rec_size = u64(rec + 4);
    if (d_.strict_end_records && (rec_size < kZip64EocdBytes - 12 || rec_size > loc - rec - 12))
      fail({.fault = ZipFault::kZip64RecordSize, .a = rec, .b = rec_size});
    disk = u32(rec + 16);
    cd_disk = u32(rec + 20);
    entries_here = u64(rec + 24);
    entries_ = u64(rec + 32);
    cd_size = u64(rec + 40);
    cd_start_ = u64(rec + 48);
    cd_limit = rec;
  }
  if (disk != 0 || cd_disk != 0 || entries_here != entries_) fail({.fault = ZipFault::kMultiDisk});
  if (cd_start_ > cd_limit ||
      (d_.exact_directory ? cd_size != cd_limit - cd_start_ : cd_size > cd_limit - cd_start_))
    fail({.fault = ZipFault::kDirectoryBounds, .a = cd_size, .b = cd_start_, .c = cd_limit});
  // Each entry takes at least 46 bytes, so this bounds the callers' loops by the file.
  if (entries_ > cd_size / kCentralBytes)
    fail({.fault = ZipFault::kTooManyEntries, .a = entries_, .b = cd_size});
  cd_end_ = cd_start_ + cd_size;
  at_ = cd_start_;
}

StoredZipEntry StoredZip::next_entry() {
  const std::uint64_t p = at_;
  const std::uint64_t i = read_++;
  if (cd_end_ - p < kCentralBytes)
    fail({.fault = ZipFault::kEntryHeaderOverrun, .index = i, .a = p});
  if (u32(p) != kCentralSig) fail({.fault = ZipFault::kEntrySignature, .index = i, .a = p});
  StoredZipEntry z;
  z.flags = static_cast<std::uint16_t>(u16(p + 8));
  z.method = static_cast<std::uint16_t>(u16(p + 10));
  z.compressed = u32(p + 20);
  z.size = u32(p + 24);
  const std::uint64_t name_len = u16(p + 28);
  const std::uint64_t extra_len = u16(p + 30);
  const std::uint64_t comment_len = u16(p + 32);
  std::uint64_t disk_start = u16(p + 34);
  z.local_offset = u32(p + 42);
  if (cd_end_ - p - kCentralBytes < name_len + extra_len + comment_len)
    fail({.fault = ZipFault::kEntryOverrun, .index = i});
  z.name.assign(reinterpret_cast<const char*>(b_.data() + p + kCentralBytes), name_len);

  // ZIP64 extended information (4.5.3): 8-byte values for the saturated fields, in the order
  // size, compressed size, local header offset, then a 4-byte disk number.
  const auto needed = [&] {
    return 8 * (std::uint64_t{z.size == kSaturated32} + (z.compressed == kSaturated32) +
                (z.local_offset == kSaturated32)) +
           4 * std::uint64_t{disk_start == kSaturated16};
  };
  if (!d_.lazy_extra_fields || needed() > 0) {
    bool found = false;
    const std::uint64_t x_end = p + kCentralBytes + name_len + extra_len;
    for (std::uint64_t x = p + kCentralBytes + name_len; x < x_end;) {
      if (x_end - x < 4) fail({.fault = ZipFault::kExtraTruncated, .name = z.name});
      const std::uint64_t id = u16(x);
      const std::uint64_t len = u16(x + 2);
      if (len > x_end - x - 4) fail({.fault = ZipFault::kExtraOverrun, .name = z.name});
      if (id == kZip64ExtraId) {
        const std::uint64_t want = needed();
        if (len < want)
          fail({.fault = ZipFault::kZip64ExtraShort, .name = z.name, .a = len, .b = want});
        std::uint64_t q = x + 4;
        for (std::uint64_t* field : {&z.size, &z.compressed, &z.local_offset})
          if (*field == kSaturated32) {
            *field = u64(q);
            q += 8;
          }
        if (disk_start == kSaturated16) disk_start = u32(q);
        found = true;
        if (d_.lazy_extra_fields) break;
      }
      x += 4 + len;
    }
    if (d_.lazy_extra_fields && !found)
      fail({.fault = ZipFault::kZip64ExtraMissing, .name = z.name});
  }
  if (disk_start != 0) fail({.fault = ZipFault::kMultiDisk});
  at_ = p + kCentralBytes + name_len + extra_len + comment_len;
  return z;
}

void StoredZip::finish() const {
  if (d_.exact_directory && at_ != cd_end_)
    fail({.fault = ZipFault::kUnusedDirectoryBytes, .a = cd_end_ - at_});
}

std::span<const std::byte> StoredZip::data(const StoredZipEntry& z) const {
  if (z.flags & 1) fail({.fault = ZipFault::kEncrypted, .name = z.name});  // 4.4.4 bit 0
  if (z.method != 0) fail({.fault = ZipFault::kCompressed, .name = z.name, .a = z.method});
  if (z.compressed != z.size)
    fail({.fault = ZipFault::kSizeMismatch, .name = z.name, .a = z.compressed, .b = z.size});

  // Local file header (4.3.7): its own name and extra field lengths place the data; its sizes are
  // not used (np.savez writes 0xFFFFFFFF there with a ZIP64 extra field).
  const std::uint64_t h = z.local_offset;
  if (h > cd_start_ || cd_start_ - h < kLocalBytes)
    fail({.fault = ZipFault::kLocalOutside, .name = z.name, .a = h, .b = cd_start_});
  if (u32(h) != kLocalSig) fail({.fault = ZipFault::kLocalSignature, .name = z.name, .a = h});
  const std::uint64_t name_len = u16(h + 26);
  const std::uint64_t start = h + kLocalBytes + name_len + u16(h + 28);
  // Only called when start <= cd_start_, so the name lies inside the file.
  const auto name_differs = [&] {
    return std::string_view(reinterpret_cast<const char*>(b_.data() + h + kLocalBytes),
                            name_len) != z.name;
  };
  if (d_.local_name_first && (start > cd_start_ || name_differs()))
    fail({.fault = ZipFault::kLocalName, .name = z.name, .a = h});
  if (start > cd_start_ || z.size > cd_start_ - start)
    fail({.fault = ZipFault::kDataOverrun, .name = z.name, .a = z.size, .b = start,
          .c = cd_start_});
  if (!d_.local_name_first && name_differs())
    fail({.fault = ZipFault::kLocalName, .name = z.name, .a = h});
  return b_.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(z.size));
}

}  // namespace fp8a
