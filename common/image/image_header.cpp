// Container walkers for read_image_header (see header). Layouts: PNG (ISO/IEC 15948, eXIf from
// the PNG 1.5 extensions), JPEG (ITU T.81 markers, EXIF 2.3 APP1), WebP (RIFF container,
// VP8/VP8L/VP8X chunk headers as in libwebp's WebPGetInfo), BMP (BITMAPCOREHEADER /
// BITMAPINFOHEADER). Every read is bounds-checked; structure errors stop the walk.
#include "common/image/image_header.h"

#include <climits>
#include <cstring>

namespace lf {
namespace {

std::uint32_t be16(const std::uint8_t* p) { return (std::uint32_t{p[0]} << 8) | p[1]; }
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}
std::uint32_t le16(const std::uint8_t* p) { return p[0] | (std::uint32_t{p[1]} << 8); }
std::uint32_t le24(const std::uint8_t* p) { return le16(p) | (std::uint32_t{p[2]} << 16); }
std::uint32_t le32(const std::uint8_t* p) { return le24(p) | (std::uint32_t{p[3]} << 24); }

// Sizes above INT_MAX cannot be represented in the int fields; they are refused by any pixel
// limit anyway, so saturate rather than wrap.
int to_int(std::uint64_t v) { return v > static_cast<std::uint64_t>(INT_MAX) ? INT_MAX : int(v); }

const std::uint8_t kExifPrefix[6] = {'E', 'x', 'i', 'f', 0, 0};

void set_exif(ImageHeader& h, std::size_t offset, std::size_t size) {
  h.exif_offset = offset;
  h.exif_size = size;
}

void read_png(const std::uint8_t* d, std::size_t n, ImageHeader& h) {
  std::size_t pos = 8;
  bool first = true;
  while (pos + 8 <= n) {
    const std::uint64_t len = be32(d + pos);
    const std::uint8_t* type = d + pos + 4;
    const std::size_t body = pos + 8;
    if (first && std::memcmp(type, "IHDR", 4) == 0 && len >= 8 && body + 8 <= n) {
      h.width = to_int(be32(d + body));
      h.height = to_int(be32(d + body + 4));
    }
    first = false;
    if (std::memcmp(type, "eXIf", 4) == 0 && h.exif_size == 0 && body < n) {
      const std::size_t avail = n - body < len ? n - body : static_cast<std::size_t>(len);
      set_exif(h, body, avail);
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      break;
    }
    // eXIf should precede IDAT but is also found after it (Pillow reads it there too), so the
    // walk goes on through the IDAT chunk headers: a seek per chunk, nothing decompressed.
    pos = body + static_cast<std::size_t>(len) + 4;  // + CRC
  }
}

bool is_sof(std::uint8_t m) {
  // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

void read_jpeg(const std::uint8_t* d, std::size_t n, ImageHeader& h) {
  std::size_t pos = 2;
  while (pos < n) {
    if (d[pos] != 0xFF) return;  // not at a marker: malformed, leave it to the decoder
    while (pos < n && d[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= n) return;
    const std::uint8_t m = d[pos++];
    if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length field
    if (m == 0xD9) return;
    if (m == 0xDA) {
      // Entropy-coded data follows; there 0xFF is always followed by 0x00 (stuffing) or a
      // marker, and the only FF D9 is the EOI (progressive scans are separated by other
      // markers). One memchr pass over the data: cheap next to decoding it.
      h.truncated = true;
      const std::uint8_t* p = d + pos;
      const std::uint8_t* end = d + n;
      while (p < end && (p = static_cast<const std::uint8_t*>(std::memchr(p, 0xFF, end - p)))) {
        if (p + 1 < end && p[1] == 0xD9) {
          h.truncated = false;
          break;
        }
        ++p;
      }
      return;
    }
    if (pos + 2 > n) return;
    const std::size_t len = be16(d + pos);
    if (len < 2) return;
    const std::size_t body = pos + 2;
    if (is_sof(m) && h.width == 0 && len >= 7 && body + 5 <= n) {
      // precision(1) height(2) width(2); height 0 means "defined by DNL later": unknown here.
      h.height = static_cast<int>(be16(d + body + 1));
      h.width = static_cast<int>(be16(d + body + 3));
      if (h.height == 0) h.width = 0;
    } else if (m == 0xE1 && h.exif_size == 0 && len >= 2 + 6 + 8 && body + 6 <= n &&
               std::memcmp(d + body, kExifPrefix, 6) == 0) {
      const std::size_t end = pos + len < n ? pos + len : n;
      set_exif(h, body + 6, end - (body + 6));
    }
    pos += len;
  }
}

void read_webp(const std::uint8_t* d, std::size_t n, ImageHeader& h) {
  std::size_t pos = 12;
  bool have_canvas = false;
  while (pos + 8 <= n) {
    const std::uint8_t* fourcc = d + pos;
    const std::size_t len = le32(d + pos + 4);
    const std::uint8_t* p = d + pos + 8;
    const std::size_t avail = n - (pos + 8) < len ? n - (pos + 8) : len;
    if (std::memcmp(fourcc, "VP8X", 4) == 0 && avail >= 10) {
      h.width = static_cast<int>(1 + le24(p + 4));
      h.height = static_cast<int>(1 + le24(p + 7));
      have_canvas = true;
    } else if (std::memcmp(fourcc, "VP8 ", 4) == 0 && !have_canvas && avail >= 10 &&
               p[3] == 0x9D && p[4] == 0x01 && p[5] == 0x2A) {
      h.width = static_cast<int>(le16(p + 6) & 0x3FFF);
      h.height = static_cast<int>(le16(p + 8) & 0x3FFF);
    } else if (std::memcmp(fourcc, "VP8L", 4) == 0 && !have_canvas && avail >= 5 &&
               p[0] == 0x2F) {
      const std::uint32_t bits = le32(p + 1);
      h.width = static_cast<int>((bits & 0x3FFF) + 1);
      h.height = static_cast<int>(((bits >> 14) & 0x3FFF) + 1);
    } else if (std::memcmp(fourcc, "EXIF", 4) == 0 && h.exif_size == 0 && avail > 0) {
      set_exif(h, pos + 8, avail);
    }
    pos += 8 + len + (len & 1);  // chunks are padded to even sizes
  }
}

void read_bmp(const std::uint8_t* d, std::size_t n, ImageHeader& h) {
  if (n < 18 + 4) return;
  const std::uint32_t dib = le32(d + 14);
  if (dib == 12) {  // BITMAPCOREHEADER: 16-bit unsigned sizes
    h.width = static_cast<int>(le16(d + 18));
    h.height = static_cast<int>(le16(d + 20));
  } else if (dib >= 40 && n >= 26) {  // BITMAPINFOHEADER and later: signed; height < 0 = top-down
    const std::int64_t w = static_cast<std::int32_t>(le32(d + 18));
    std::int64_t hh = static_cast<std::int32_t>(le32(d + 22));
    if (hh < 0) hh = -hh;
    h.width = w > 0 ? to_int(static_cast<std::uint64_t>(w)) : 0;
    h.height = to_int(static_cast<std::uint64_t>(hh));
  }
  if (h.width <= 0 || h.height <= 0) h.width = h.height = 0;
}

}  // namespace

ImageHeader read_image_header(const std::uint8_t* d, std::size_t n) {
  ImageHeader h;
  static const std::uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n >= 8 && std::memcmp(d, kPng, 8) == 0) {
    h.format = "png";
    read_png(d, n, h);
  } else if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
    h.format = "jpeg";
    read_jpeg(d, n, h);
  } else if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) {
    h.format = "webp";
    read_webp(d, n, h);
  } else if (n >= 2 && d[0] == 'B' && d[1] == 'M') {
    h.format = "bmp";
    read_bmp(d, n, h);
  }
  // Some writers put "Exif\0\0" in front of the TIFF bytes of a PNG eXIf / WebP EXIF chunk.
  if (h.exif_size >= 6 && std::memcmp(d + h.exif_offset, kExifPrefix, 6) == 0) {
    h.exif_offset += 6;
    h.exif_size -= 6;
  }
  if (h.width <= 0 || h.height <= 0) h.width = h.height = 0;
  return h;
}

}  // namespace lf
