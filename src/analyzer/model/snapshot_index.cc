// src/analyzer/model/snapshot_index.cc: see snapshot_index.h; layout in docs/snapshot-index.md.
#include "analyzer/model/snapshot_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "base/varint.h"

namespace memlens::analyzer {
namespace {

constexpr char kHeaderMagic[8] = {'M', 'L', 'E', 'N', 'S', 'I', 'D', 'X'};
constexpr char kTrailerMagic[8] = {'M', 'L', 'I', 'D', 'X', 'E', 'N', 'D'};
// magic, version, the capture's first chunk checksum, its size and mtime
constexpr size_t kHeaderSize = 32;
constexpr size_t kTrailerSize = 32;  // table offset, stored size, raw size, magic
constexpr int kZstdLevel = 1;

void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

bool Compress(std::string_view raw, std::string* out) {
  out->resize(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress(out->data(), out->size(), raw.data(), raw.size(), kZstdLevel);
  if (ZSTD_isError(n)) return false;
  out->resize(n);
  return true;
}

// The sizes come from the index file, which may be damaged: memory grows with what the frame
// really holds (its header must announce raw_size), never with a size merely claimed.
bool Decompress(std::string_view stored, uint64_t raw_size, std::string* out) {
  if (ZSTD_getFrameContentSize(stored.data(), stored.size()) != raw_size) return false;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  ZSTD_inBuffer in{stored.data(), stored.size(), 0};
  out->clear();
  for (;;) {
    size_t have = out->size();
    out->resize(std::min<uint64_t>(raw_size, std::max<uint64_t>(2 * have, 1 << 16)));
    ZSTD_outBuffer o{out->data(), out->size(), have};
    size_t left = ZSTD_decompressStream(dctx.get(), &o, &in);
    out->resize(o.pos);
    if (ZSTD_isError(left)) return false;
    if (left == 0) return o.pos == raw_size && in.pos == in.size;  // the frame, whole
    if (o.pos == raw_size || (in.pos == in.size && o.pos < o.size)) return false;
  }
}

// [offset, offset + size) lies within [0, limit), without overflow.
bool Within(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

bool ReadAt(std::FILE* f, uint64_t offset, uint64_t size, std::string* out) {
  if (fseeko(f, 0, SEEK_END) != 0 || !Within(offset, size, ftello(f))) return false;
  out->resize(size);
  return fseeko(f, static_cast<off_t>(offset), SEEK_SET) == 0 &&
         std::fread(out->data(), 1, size, f) == size;
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

std::string Header(const CaptureStamp& capture) {
  std::string h(kHeaderMagic, sizeof kHeaderMagic);
  PutFixed64(&h, kIndexVersion | uint64_t{capture.first_chunk_crc} << 32);
  PutFixed64(&h, capture.size);
  PutFixed64(&h, capture.mtime_ns);
  return h;
}

}  // namespace

bool StatCapture(const std::string& path, CaptureStamp* stamp) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  stamp->size = static_cast<uint64_t>(st.st_size);
  stamp->mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + st.st_mtim.tv_nsec;
  stamp->first_chunk_crc = 0;
  File f(std::fopen(path.c_str(), "rb"), std::fclose);
  std::string crc;  // the file header (16 bytes), then the chunk header's CRC at its byte 16
  if (f && ReadAt(f.get(), 32, 4, &crc)) {
    for (int i = 0; i < 4; ++i) {
      stamp->first_chunk_crc |= uint32_t{static_cast<uint8_t>(crc[i])} << (8 * i);
    }
  }
  return true;
}

uint64_t StateReader::Next() {
  uint64_t v = 0;
  if (ok_ && !GetVarint(&p_, end_, &v)) ok_ = false;
  return ok_ ? v : 0;
}

std::string StateReader::Text() {
  uint64_t n = Next();
  if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) {
    ok_ = false;
    return {};
  }
  std::string text(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return text;
}

const IndexCheckpoint* SnapshotIndex::Before(uint64_t stop_seq) const {
  const IndexCheckpoint* best = nullptr;
  for (const auto& c : checkpoints) {
    if (c.seq <= stop_seq) best = &c;
  }
  return best;
}

const IndexCheckpoint* SnapshotIndex::BeforeTime(double seconds) const {
  // The replay of @t stops at the first mark later than t (Replayer::OnTime): a checkpoint
  // serves when no mark before it is later than t.
  const IndexCheckpoint* best = nullptr;
  for (const auto& c : checkpoints) {
    if (!(c.prev_mark_ns > seconds * 1e9)) best = &c;
  }
  return best;
}

bool IndexTurnedOff() {
  const char* env = std::getenv("MEMLENS_INDEX");
  return env && std::string(env) == "0";
}

std::vector<std::string> IndexPathsFor(const std::string& capture_path) {
  std::vector<std::string> paths{capture_path + ".index"};
  std::string cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    cache = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::string(home) + "/.cache";
  }
  char resolved[PATH_MAX];
  if (!cache.empty() && realpath(capture_path.c_str(), resolved)) {
    char name[32];
    std::snprintf(name, sizeof name, "%016zx", std::hash<std::string>{}(resolved));
    paths.push_back(cache + "/memlens/" + name + ".index");
  }
  return paths;
}

bool LoadSnapshotIndex(const std::string& capture_path, SnapshotIndex* index) {
  CaptureStamp capture;
  return StatCapture(capture_path, &capture) && LoadSnapshotIndex(capture_path, capture, index);
}

bool LoadSnapshotIndex(const std::string& capture_path, const CaptureStamp& capture,
                       SnapshotIndex* index) {
  const std::string expected = Header(capture);
  for (const std::string& path : IndexPathsFor(capture_path)) {
    File f(std::fopen(path.c_str(), "rb"), std::fclose);
    std::string header, trailer, stored, table;
    if (!f || !ReadAt(f.get(), 0, kHeaderSize, &header) || header != expected) continue;
    if (fseeko(f.get(), 0, SEEK_END) != 0) continue;
    off_t file_size = ftello(f.get());
    if (file_size < static_cast<off_t>(kHeaderSize + kTrailerSize) ||
        !ReadAt(f.get(), file_size - kTrailerSize, kTrailerSize, &trailer) ||
        std::memcmp(trailer.data() + 24, kTrailerMagic, 8) != 0) {
      continue;
    }
    uint64_t table_offset = GetFixed64(trailer.data()), stored_size = GetFixed64(trailer.data() + 8),
             raw_size = GetFixed64(trailer.data() + 16);
    if (!Within(table_offset, stored_size, file_size - kTrailerSize) ||
        table_offset + stored_size + kTrailerSize != static_cast<uint64_t>(file_size) ||
        raw_size > (uint64_t{1} << 34) || !ReadAt(f.get(), table_offset, stored_size, &stored) ||
        !Decompress(stored, raw_size, &table)) {
      continue;
    }
    SnapshotIndex out;
    out.path = path;
    StateReader r(table);
    out.image = r.Next();
    out.peak_seq = r.Next();
    out.peak_bytes = r.Next();
    out.peak_blocks = r.Next();
    out.program_end_seq = r.Next();
    uint64_t points = r.Next(), ns = 0;
    for (uint64_t i = 0; i < points && r.ok(); ++i) {
      ns += r.Next();
      uint64_t bytes = r.Next();
      out.timeline.push_back({static_cast<double>(ns) / 1e9, bytes, r.Next()});
    }
    uint64_t chunk_count = r.Next(), offset = 0;
    for (uint64_t i = 0; i < chunk_count && r.ok(); ++i) {
      IndexChunk c;
      c.offset = offset += r.Next();
      c.min_seq = r.Next();
      c.max_seq = c.min_seq + r.Next();
      out.chunks.push_back(c);
    }
    uint64_t marker_count = r.Next();
    for (uint64_t i = 0; i < marker_count && r.ok(); ++i) {
      Marker m;
      m.name = r.Text();
      m.category = r.Text();
      m.snapshot = r.Next() != 0;
      m.seq = r.Next();
      out.markers.push_back(std::move(m));
    }
    uint64_t count = r.Next();
    for (uint64_t i = 0; i < count && r.ok(); ++i) {
      IndexCheckpoint c;
      c.seq = r.Next();
      c.prev_mark_ns = r.Next();
      c.events_from_offset = r.Next();
      c.timeline_points = r.Next();
      c.blob_offset = r.Next();
      c.blob_size = r.Next();
      c.raw_size = r.Next();
      if (c.timeline_points > out.timeline.size() ||
          !Within(c.blob_offset, c.blob_size, table_offset)) {
        r = StateReader("");  // implausible: treat the index as corrupt
        break;
      }
      out.checkpoints.push_back(c);
    }
    IndexEnd& e = out.end;
    for (uint64_t* v : {&e.state.timeline_points, &e.state.blob_offset, &e.state.blob_size,
                        &e.state.raw_size, &e.metadata_offset, &e.metadata_size,
                        &e.metadata_raw_size, &e.events, &e.format_major, &e.format_minor,
                        &e.ended, &e.bytes_read}) {
      *v = r.Next();
    }
    e.state.seq = UINT64_MAX;
    e.damage = r.Text();
    if (e.state.timeline_points > out.timeline.size() ||
        !Within(e.state.blob_offset, e.state.blob_size, table_offset) ||
        !Within(e.metadata_offset, e.metadata_size, table_offset)) {
      continue;
    }
    if (!r.ok() || !r.AtEnd()) continue;
    *index = std::move(out);
    return true;
  }
  return false;
}

bool ReadCheckpointState(const SnapshotIndex& index, const IndexCheckpoint& checkpoint,
                         std::string* state) {
  File f(std::fopen(index.path.c_str(), "rb"), std::fclose);
  std::string stored;
  return f && ReadAt(f.get(), checkpoint.blob_offset, checkpoint.blob_size, &stored) &&
         Decompress(stored, checkpoint.raw_size, state);
}

bool ReadIndexMetadata(const SnapshotIndex& index, std::vector<std::string>* segments) {
  const IndexEnd& e = index.end;
  File f(std::fopen(index.path.c_str(), "rb"), std::fclose);
  std::string stored, raw;
  if (!f || e.metadata_raw_size > (uint64_t{1} << 34) ||
      !ReadAt(f.get(), e.metadata_offset, e.metadata_size, &stored) ||
      !Decompress(stored, e.metadata_raw_size, &raw)) {
    return false;
  }
  StateReader r(raw);
  segments->clear();
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) segments->push_back(r.Text());
  return r.ok() && r.AtEnd();
}

SnapshotIndexWriter::SnapshotIndexWriter(const std::string& capture_path)
    : capture_path_(capture_path) {
  if (const char* s = std::getenv("MEMLENS_INDEX_SPACING"); s && *s) {
    min_spacing_ = std::max<uint64_t>(1, std::strtoull(s, nullptr, 10));
  }
  spacing_ = min_spacing_;
  if (!StatCapture(capture_path, &capture_)) return;
  for (const std::string& path : IndexPathsFor(capture_path)) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) continue;  // not ours to replace
    if (path != capture_path + ".index") {  // the cache folder may not exist yet
      std::string dir = path.substr(0, path.rfind('/'));
      mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
      mkdir(dir.c_str(), 0755);
    }
    temp_path_ = path + ".tmp" + std::to_string(getpid());
    // Private like the capture it describes, and made afresh: never through a planted link
    // (a stale one, of a run that died with our pid, is removed first).
    unlink(temp_path_.c_str());
    int fd = open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    file_ = fd >= 0 ? fdopen(fd, "wb") : nullptr;
    if (!file_) {
      if (fd >= 0) close(fd);
      continue;
    }
    final_path_ = path;
    std::string header = Header(capture_);
    if (std::fwrite(header.data(), 1, header.size(), file_) != header.size()) {
      std::fclose(file_);
      file_ = nullptr;
      unlink(temp_path_.c_str());
      continue;
    }
    offset_ = header.size();
    return;
  }
}

SnapshotIndexWriter::~SnapshotIndexWriter() {
  if (file_) {  // never finished: leave nothing behind
    std::fclose(file_);
    unlink(temp_path_.c_str());
  }
}

bool SnapshotIndexWriter::WriteBlob(std::string_view raw, uint64_t* offset, uint64_t* stored_size) {
  std::string stored;
  if (!Compress(raw, &stored) || std::fwrite(stored.data(), 1, stored.size(), file_) != stored.size()) {
    std::fclose(file_);  // a full disk: no index this time
    file_ = nullptr;
    unlink(temp_path_.c_str());
    return false;
  }
  *offset = offset_;
  *stored_size = stored.size();
  offset_ += stored.size();
  return true;
}

void SnapshotIndexWriter::Add(uint64_t seq, std::string_view state, uint64_t timeline_points) {
  if (!file_ || stopped_) return;
  IndexCheckpoint c;
  if (!WriteBlob(state, &c.blob_offset, &c.blob_size)) return;
  c.seq = seq;
  c.timeline_points = timeline_points;
  c.raw_size = state.size();
  checkpoints_.push_back(c);
  spacing_ = std::max(min_spacing_, 4 * c.blob_size);
}

void SnapshotIndexWriter::SetEnd(std::string_view state, uint64_t timeline_points, uint64_t events,
                                 const std::vector<std::string>& metadata,
                                 const ReadStatus& status) {
  if (!file_ || stopped_) return;
  IndexEnd end;
  if (!WriteBlob(state, &end.state.blob_offset, &end.state.blob_size)) return;
  end.state.seq = UINT64_MAX;
  end.state.timeline_points = timeline_points;
  end.state.raw_size = state.size();
  std::string raw;
  PutVarint(&raw, metadata.size());
  for (const std::string& segment : metadata) {
    PutVarint(&raw, segment.size());
    raw += segment;
  }
  if (!WriteBlob(raw, &end.metadata_offset, &end.metadata_size)) return;
  end.metadata_raw_size = raw.size();
  end.events = events;
  end.format_major = status.format_major;
  end.format_minor = status.format_minor;
  end.ended = status.ended;
  end.bytes_read = status.bytes_read;
  end.damage = status.damage;
  end_ = std::move(end);
}

void SnapshotIndexWriter::Restat() {
  if (file_ && !StatCapture(capture_path_, &capture_)) {
    std::fclose(file_);
    file_ = nullptr;
    unlink(temp_path_.c_str());
  }
}

bool SnapshotIndexWriter::Finish(SnapshotIndex* index,
                                 const std::vector<format::TimeRecord>& times) {
  if (!file_) return false;
  // The first chunk holding an event at or after a checkpoint: a running maximum over the
  // chunks in file order is monotonic, so a binary search finds it.
  const std::vector<IndexChunk>& chunks = index->chunks;
  std::vector<uint64_t> running_max;
  uint64_t best = 0;
  for (const auto& chunk : chunks) running_max.push_back(best = std::max(best, chunk.max_seq));
  for (IndexCheckpoint& c : checkpoints_) {
    auto first = std::lower_bound(running_max.begin(), running_max.end(), c.seq);
    c.events_from_offset =
        first == running_max.end() ? UINT64_MAX : chunks[first - running_max.begin()].offset;
    auto mark = std::lower_bound(times.begin(), times.end(), c.seq,
                                 [](const format::TimeRecord& t, uint64_t s) { return t.seq < s; });
    c.prev_mark_ns = mark == times.begin() ? 0 : std::prev(mark)->monotonic_ns;
  }
  index->checkpoints = checkpoints_;
  std::string table;
  PutVarint(&table, index->image);
  PutVarint(&table, index->peak_seq);
  PutVarint(&table, index->peak_bytes);
  PutVarint(&table, index->peak_blocks);
  PutVarint(&table, index->program_end_seq);
  PutVarint(&table, index->timeline.size());
  uint64_t last_ns = 0;
  for (const TimelinePoint& p : index->timeline) {
    uint64_t ns = static_cast<uint64_t>(std::llround(p.seconds * 1e9));
    PutVarint(&table, ns - last_ns);
    PutVarint(&table, p.heap_bytes);
    PutVarint(&table, p.heap_bytes_var);
    last_ns = ns;
  }
  PutVarint(&table, chunks.size());
  uint64_t last_offset = 0;
  for (const IndexChunk& c : chunks) {
    PutVarint(&table, c.offset - last_offset);
    PutVarint(&table, c.min_seq);
    PutVarint(&table, c.max_seq - c.min_seq);
    last_offset = c.offset;
  }
  PutVarint(&table, index->markers.size());
  for (const Marker& m : index->markers) {
    for (const std::string* text : {&m.name, &m.category}) {
      PutVarint(&table, text->size());
      table += *text;
    }
    PutVarint(&table, m.snapshot);
    PutVarint(&table, m.seq);
  }
  PutVarint(&table, checkpoints_.size());
  for (const IndexCheckpoint& c : checkpoints_) {
    for (uint64_t v : {c.seq, c.prev_mark_ns, c.events_from_offset, c.timeline_points,
                       c.blob_offset, c.blob_size, c.raw_size}) {
      PutVarint(&table, v);
    }
  }
  if (stopped_) end_ = IndexEnd();
  const IndexEnd& e = end_;
  for (uint64_t v : {e.state.timeline_points, e.state.blob_offset, e.state.blob_size,
                     e.state.raw_size, e.metadata_offset, e.metadata_size, e.metadata_raw_size,
                     e.events, e.format_major, e.format_minor, e.ended, e.bytes_read}) {
    PutVarint(&table, v);
  }
  PutVarint(&table, e.damage.size());
  table += e.damage;
  index->end = end_;
  std::string stored;
  bool written = Compress(table, &stored);
  uint64_t stored_size = stored.size();
  PutFixed64(&stored, offset_);
  PutFixed64(&stored, stored_size);
  PutFixed64(&stored, table.size());
  stored.append(kTrailerMagic, sizeof kTrailerMagic);
  written = written && std::fwrite(stored.data(), 1, stored.size(), file_) == stored.size();
  // The header last: the capture's size and time may have been taken again since (Restat).
  std::string header = Header(capture_);
  written = written && fseeko(file_, 0, SEEK_SET) == 0 &&
            std::fwrite(header.data(), 1, header.size(), file_) == header.size();
  written = std::fclose(file_) == 0 && written;
  file_ = nullptr;
  if (!written || std::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    unlink(temp_path_.c_str());
    return false;
  }
  index->path = final_path_;
  return true;
}

}  // namespace memlens::analyzer
