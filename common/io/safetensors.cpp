// safetensors reader/writer (see safetensors.h). JSON via nlohmann-json; validation mirrors
// safetensors/src/tensor.rs (Metadata::validate, read_metadata) and the writer mirrors its
// `prepare` + serialize (sort, offsets, 8-byte space padding).
#include "common/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <limits>
#include <set>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/io/atomic_file.h"

namespace lf {
namespace {

constexpr uint64_t kMaxHeaderSize = 100000000;  // safetensors MAX_HEADER_SIZE

struct DTypeRow {
  DType dtype;
  const char* name;
  size_t size;
  int writer_rank;  // position in the Rust crate's `enum Dtype` (derive(Ord)); writer sorts desc
};

const DTypeRow kDTypes[] = {
    {DType::BOOL, "BOOL", 1, 0},       {DType::U8, "U8", 1, 1},
    {DType::I8, "I8", 1, 2},           {DType::F8_E5M2, "F8_E5M2", 1, 3},
    {DType::F8_E4M3, "F8_E4M3", 1, 4}, {DType::I16, "I16", 2, 5},
    {DType::U16, "U16", 2, 6},         {DType::F16, "F16", 2, 7},
    {DType::BF16, "BF16", 2, 8},       {DType::I32, "I32", 4, 9},
    {DType::U32, "U32", 4, 10},        {DType::F32, "F32", 4, 11},
    {DType::F64, "F64", 8, 12},        {DType::I64, "I64", 8, 13},
    {DType::U64, "U64", 8, 14},
};

const DTypeRow& row(DType dtype) {
  for (const auto& r : kDTypes) {
    if (r.dtype == dtype) return r;
  }
  throw std::invalid_argument("unknown DType value " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

size_t dtype_size(DType dtype) { return row(dtype).size; }
std::string dtype_name(DType dtype) { return row(dtype).name; }

DType parse_dtype(const std::string& name) {
  for (const auto& r : kDTypes) {
    if (name == r.name) return r.dtype;
  }
  throw std::invalid_argument("unknown safetensors dtype '" + name + "'");
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reader

struct SafetensorsFile::Storage {
  const uint8_t* base = nullptr;
  uint64_t size = 0;
  void* map = nullptr;  // non-null when memory-mapped
  std::vector<uint8_t> owned;
  ~Storage() {
    if (map != nullptr) ::munmap(map, size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path, bool use_mmap) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw std::runtime_error(path + ": cannot open (" + std::strerror(err) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot open (fstat: " + std::strerror(err) + ")");
  }
  auto storage = std::make_shared<Storage>();
  storage->size = static_cast<uint64_t>(st.st_size);
  if (storage->size < 8) {
    ::close(fd);
    throw std::runtime_error(path + ": invalid safetensors: file is " +
                             std::to_string(storage->size) +
                             " bytes, expected at least 8 (header length)");
  }
  if (use_mmap) {
    void* m = ::mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error(path + ": cannot open (mmap: " + std::strerror(err) + ")");
    }
    storage->map = m;
    storage->base = static_cast<const uint8_t*>(m);
  } else {
    storage->owned.resize(storage->size);
    uint64_t got = 0;
    while (got < storage->size) {
      ssize_t r = ::read(fd, storage->owned.data() + got, storage->size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        int err = r < 0 ? errno : EIO;
        ::close(fd);
        throw std::runtime_error(path + ": cannot open (read: " + std::strerror(err) + ")");
      }
      got += static_cast<uint64_t>(r);
    }
    storage->base = storage->owned.data();
  }
  ::close(fd);
  SafetensorsFile f;
  f.path_ = path;
  f.storage_ = std::move(storage);
  f.parse();
  return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& label) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  storage->size = storage->owned.size();
  storage->base = storage->owned.data();
  SafetensorsFile f;
  f.path_ = label;
  f.storage_ = std::move(storage);
  if (f.storage_->size < 8) {
    throw std::runtime_error(label + ": invalid safetensors: file is " +
                             std::to_string(f.storage_->size) +
                             " bytes, expected at least 8 (header length)");
  }
  f.parse();
  return f;
}

void SafetensorsFile::parse() {
  using nlohmann::json;
  auto fail = [this](const std::string& what) {
    return std::runtime_error(path_ + ": invalid safetensors: " + what);
  };
  const uint8_t* base = storage_->base;
  const uint64_t file_size = storage_->size;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];
  if (n > kMaxHeaderSize) {
    throw fail("header length " + std::to_string(n) + " exceeds the limit of " +
               std::to_string(kMaxHeaderSize) + " bytes");
  }
  if (n > file_size - 8) {
    throw fail("header length " + std::to_string(n) + " runs past the end of the " +
               std::to_string(file_size) + "-byte file");
  }
  const char* header = reinterpret_cast<const char*>(base + 8);
  if (n == 0 || header[0] != '{') throw fail("header does not start with '{'");

  // nlohmann keeps the last of duplicate keys; the reference rejects them, so track keys per
  // open object while parsing.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (ev == json::parse_event_t::key && !open_objects.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(header, header + n, cb);
  } catch (const json::exception& e) {
    throw fail(std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) throw fail("duplicate key \"" + duplicate + "\" in header");
  if (!doc.is_object()) throw fail("header is not a JSON object");

  data_offset_ = 8 + n;
  const uint64_t buffer_size = file_size - data_offset_;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object()) throw fail("__metadata__ is not a JSON object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          throw fail("__metadata__ value for \"" + m.key() + "\" is not a string");
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) throw fail("entry \"" + key + "\" is not a JSON object");
    TensorInfo info;
    info.name = key;
    auto dt = v.find("dtype");
    auto shape = v.find("shape");
    auto offsets = v.find("data_offsets");
    if (dt == v.end() || shape == v.end() || offsets == v.end()) {
      throw fail("entry \"" + key + "\" lacks dtype, shape or data_offsets");
    }
    if (!dt->is_string()) throw fail("entry \"" + key + "\": dtype is not a string");
    try {
      info.dtype = parse_dtype(dt->get<std::string>());
    } catch (const std::invalid_argument& e) {
      throw fail("entry \"" + key + "\": " + e.what());
    }
    if (!shape->is_array()) throw fail("entry \"" + key + "\": shape is not an array");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : *shape) {
      if (!d.is_number_unsigned()) {
        throw fail("entry \"" + key + "\": shape holds a value that is not a non-negative integer");
      }
      uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
      info.shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
      numel *= dim;
    }
    const uint64_t esize = dtype_size(info.dtype);
    if (overflow || (numel != 0 && numel > std::numeric_limits<uint64_t>::max() / esize)) {
      throw fail("entry \"" + key + "\": shape size overflows");
    }
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      throw fail("entry \"" + key +
                 "\": data_offsets is not [BEGIN, END] of non-negative integers");
    }
    info.begin = (*offsets)[0].get<uint64_t>();
    info.end = (*offsets)[1].get<uint64_t>();
    if (info.end < info.begin) {
      throw fail("entry \"" + key + "\": data_offsets [" + std::to_string(info.begin) + ", " +
                 std::to_string(info.end) + "] end before they begin");
    }
    if (info.end - info.begin != numel * esize) {
      throw fail("entry \"" + key + "\": data_offsets span " +
                 std::to_string(info.end - info.begin) + " bytes, expected " +
                 std::to_string(numel * esize) + " (numel " + std::to_string(numel) + " x " +
                 std::to_string(esize) + ")");
    }
    tensors_.push_back(std::move(info));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t expect = 0;
  for (const TensorInfo& t : tensors_) {
    if (t.begin != expect) {
      throw fail("entry \"" + t.name + "\" begins at " + std::to_string(t.begin) +
                 (t.begin < expect ? " inside the previous tensor" : " leaving a hole") +
                 " (expected " + std::to_string(expect) + ")");
    }
    expect = t.end;
  }
  if (expect != buffer_size) {
    throw fail("tensors cover " + std::to_string(expect) + " bytes but the byte buffer holds " +
               std::to_string(buffer_size));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* SafetensorsFile::data(const TensorInfo& info) const {
  return storage_->base + data_offset_ + info.begin;
}

uint64_t SafetensorsFile::data_size() const { return storage_->size - data_offset_; }
const uint8_t* SafetensorsFile::data_section() const { return storage_->base + data_offset_; }

// ---------------------------------------------------------------------------------------------
// Writer

void SafetensorsWriter::add_view(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                 const void* data, size_t nbytes) {
  if (name.empty() || name == "__metadata__") {
    throw std::invalid_argument("safetensors writer: invalid tensor name \"" + name + "\"");
  }
  if (names_.count(name)) {
    throw std::invalid_argument("safetensors writer: tensor \"" + name + "\" added twice");
  }
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw std::invalid_argument("safetensors writer: tensor \"" + name + "\" has negative dim " +
                                  std::to_string(d));
    }
    numel *= static_cast<uint64_t>(d);
  }
  if (numel * dtype_size(dtype) != nbytes) {
    throw std::invalid_argument("safetensors writer: tensor \"" + name + "\" has " +
                                std::to_string(nbytes) + " bytes, expected " +
                                std::to_string(numel * dtype_size(dtype)) + " for its shape and " +
                                dtype_name(dtype));
  }
  names_.insert(name);
  Entry e{name, dtype, std::move(shape), {}, static_cast<const uint8_t*>(data), nbytes};
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t nbytes) {
  add_view(name, dtype, std::move(shape), data, nbytes);
  Entry& e = entries_.back();
  const auto* p = static_cast<const uint8_t*>(data);
  if (nbytes > 0) e.owned.assign(p, p + nbytes);
  e.view = nullptr;
}

void SafetensorsWriter::set_metadata(std::map<std::string, std::string> metadata) {
  metadata_ = std::move(metadata);
  has_metadata_ = true;
}

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::ordered() const {
  std::vector<const Entry*> out;
  for (const Entry& e : entries_) out.push_back(&e);
  std::sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) {
    int ra = row(a->dtype).writer_rank, rb = row(b->dtype).writer_rank;
    if (ra != rb) return ra > rb;
    return a->name < b->name;
  });
  return out;
}

namespace {

// JSON string literal as serde_json writes it (same escapes as nlohmann's dump: \" \\ \b \f \n
// \r \t, other controls as \u00xx, everything else raw UTF-8).
std::string json_string(const std::string& s, const char* what) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("safetensors writer: ") + what + " \"" + s +
                                "\" is not valid UTF-8");
  }
}

}  // namespace

std::string SafetensorsWriter::header() const {
  std::string h = "{";
  bool first = true;
  if (has_metadata_) {
    h += "\"__metadata__\":{";
    bool mfirst = true;
    for (const auto& kv : metadata_) {
      if (!mfirst) h += ',';
      mfirst = false;
      h += json_string(kv.first, "metadata key");
      h += ':';
      h += json_string(kv.second, "metadata value");
    }
    h += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const Entry* e : ordered()) {
    if (!first) h += ',';
    first = false;
    h += json_string(e->name, "tensor name");
    h += ":{\"dtype\":\"" + dtype_name(e->dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < e->shape.size(); ++i) {
      if (i) h += ',';
      h += std::to_string(e->shape[i]);
    }
    h += "],\"data_offsets\":[" + std::to_string(offset) + ",";
    offset += e->nbytes;
    h += std::to_string(offset) + "]}";
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

SafetensorsWriter::Image SafetensorsWriter::image() const {
  Image img;
  const std::string h = header();
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) img.head.push_back(static_cast<char>(n >> (8 * i)));
  img.head += h;
  img.size = img.head.size();
  for (const Entry* e : ordered()) {
    if (e->nbytes == 0) continue;
    img.tensors.emplace_back(e->bytes(), e->nbytes);
    img.size += e->nbytes;
  }
  return img;
}

std::vector<uint8_t> SafetensorsWriter::serialize() const {
  const Image img = image();
  std::vector<uint8_t> out;
  out.reserve(img.size);
  img.visit([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

FileDigest SafetensorsWriter::write_atomic(const std::string& path) const {
  const Image img = image();
  // Above a few MiB the hash runs on a second thread while this one writes (both only read the
  // same bytes), so a checkpoint costs about its write, not its write plus its hash.
  constexpr uint64_t kHashAsideBytes = 4u << 20;
  const bool aside = img.size >= kHashAsideBytes;
  std::future<std::string> hashed;
  if (aside) {
    hashed = std::async(std::launch::async, [&img] {
      Sha256 h;
      img.visit([&](const uint8_t* p, size_t n) { h.update(p, n); });
      return h.hex_digest();
    });
  }
  AtomicFileWriter out(
      path, aside ? AtomicFileWriter::Hashing::kNone : AtomicFileWriter::Hashing::kSha256);
  img.visit([&](const uint8_t* p, size_t n) { out.write(p, n); });
  FileDigest digest = out.commit();
  if (aside) digest.sha256 = hashed.get();
  return digest;
}

std::string SafetensorsWriter::data_sha256() const {
  Sha256 hash;
  for (const Entry* e : ordered()) hash.update(e->bytes(), e->nbytes);
  return hash.hex_digest();
}

std::vector<uint8_t> SafetensorsWriter::image_bytes(uint64_t offset, size_t len) const {
  std::vector<uint8_t> out;
  uint64_t at = 0;  // image offset of the current piece
  const uint64_t end = offset + len;
  image().visit([&](const uint8_t* p, size_t n) {
    const uint64_t lo = std::max(at, offset), hi = std::min<uint64_t>(at + n, end);
    if (lo < hi) out.insert(out.end(), p + (lo - at), p + (hi - at));
    at += n;
  });
  return out;
}

}  // namespace lf
