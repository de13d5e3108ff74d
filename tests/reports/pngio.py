"""PNG on the standard library (zlib + struct), for the screenshots headless Chromium writes.

decode(data) -> Image with width, height, channels and rows (one bytes object per row, unfiltered):
8-bit greyscale, RGB or RGBA (colour types 0, 2, 6), non-interlaced, filter types 0-4; anything
else raises ValueError, saying what. encode(image) -> bytes writes one back (filter 0), for crops.
The Up and Sub filters run on whole rows as big integers (bytewise addition without carries, SWAR),
so the white and flat areas of a page decode fast; Average and Paeth go byte by byte."""
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 6: 4}


class Image:
    def __init__(self, width, height, channels, rows):
        self.width, self.height, self.channels, self.rows = width, height, channels, rows

    def crop(self, x0, y0, x1, y1):
        c = self.channels
        return Image(x1 - x0, y1 - y0, c, [r[x0 * c:x1 * c] for r in self.rows[y0:y1]])

    def rgb(self, x, y):
        """The pixel at (x, y) as (r, g, b); alpha is dropped, grey repeated."""
        c = self.channels
        p = self.rows[y][x * c:(x + 1) * c]
        return (p[0], p[0], p[0]) if c == 1 else (p[0], p[1], p[2])

    def rgb_row(self, y, x0=0, x1=None):
        """Row y from x0 to x1 (exclusive) as a list of (r, g, b)."""
        x1 = self.width if x1 is None else x1
        c, row = self.channels, self.rows[y]
        if c == 1:
            return [(v, v, v) for v in row[x0:x1]]
        return [(row[i], row[i + 1], row[i + 2]) for i in range(x0 * c, x1 * c, c)]


def _bytewise_add(a, b, n):
    """Bytes a + b modulo 256 per byte, both n-byte big-endian integers (no carry between bytes)."""
    low = int.from_bytes(b"\x7f" * n, "big")
    high = int.from_bytes(b"\x80" * n, "big")
    return ((a & low) + (b & low)) ^ ((a ^ b) & high)


def _unfilter_sub(line, bpp):
    # Raw(x) = Sub(x) + Raw(x - bpp): a prefix sum with stride bpp, in log2(len) SWAR steps.
    n = len(line)
    v = int.from_bytes(line, "big")  # byte i of the row is the i-th byte from the left
    shift = bpp
    while shift < n:
        v = _bytewise_add(v, v >> (8 * shift), n)  # adds byte i - shift to byte i
        shift *= 2
    return v.to_bytes(n, "big")


def _unfilter_up(line, prev):
    n = len(line)
    return _bytewise_add(int.from_bytes(line, "big"), int.from_bytes(prev, "big"), n).to_bytes(n, "big")


def _unfilter_avg(line, prev, bpp):
    out = bytearray(line)
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        out[i] = (out[i] + ((left + prev[i]) >> 1)) & 0xFF
    return bytes(out)


def _unfilter_paeth(line, prev, bpp):
    out = bytearray(line)
    for i in range(len(out)):
        if i >= bpp:
            a, c = out[i - bpp], prev[i - bpp]
        else:
            a = c = 0
        b = prev[i]
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (out[i] + pred) & 0xFF
    return bytes(out)


def decode(data):
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG (no signature)")
    pos, header, idat = len(SIGNATURE), None, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError(f"PNG chunk {kind!r} truncated")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None or not idat:
        raise ValueError("PNG without IHDR or IDAT")
    width, height, depth, colour, compression, filt, interlace = header
    if depth != 8 or colour not in CHANNELS or compression != 0 or filt != 0 or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = CHANNELS[colour]
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    if len(raw) != height * (stride + 1):
        raise ValueError(f"PNG data is {len(raw)} bytes, expected {height * (stride + 1)}")
    rows, prev = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], raw[start + 1:start + 1 + stride]
        if ftype == 0:
            cur = bytes(line)
        elif ftype == 1:
            cur = _unfilter_sub(line, bpp)
        elif ftype == 2:
            cur = _unfilter_up(line, prev)
        elif ftype == 3:
            cur = _unfilter_avg(line, prev, bpp)
        elif ftype == 4:
            cur = _unfilter_paeth(line, prev, bpp)
        else:
            raise ValueError(f"PNG row {y}: filter type {ftype}")
        rows.append(cur)
        prev = cur
    return Image(width, height, bpp, rows)


def decode_file(path):
    with open(path, "rb") as f:
        return decode(f.read())


def _chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def encode(image, filters=(0,)):
    """The image as PNG bytes; row y uses filters[y % len(filters)] (the decoder's test uses all five)."""
    c = image.channels
    colour = {v: k for k, v in CHANNELS.items()}[c]
    raw, prev = bytearray(), bytes(image.width * c)
    for y, row in enumerate(image.rows):
        f = filters[y % len(filters)]
        raw.append(f)
        if f == 0:
            raw += row
        else:
            for i, v in enumerate(row):
                a = row[i - c] if i >= c else 0
                b = prev[i]
                d = prev[i - c] if i >= c else 0
                if f == 1:
                    pred = a
                elif f == 2:
                    pred = b
                elif f == 3:
                    pred = (a + b) >> 1
                else:
                    p = a + b - d
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - d)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else d)
                raw.append((v - pred) & 0xFF)
        prev = row
    header = struct.pack(">IIBBBBB", image.width, image.height, 8, colour, 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + _chunk(b"IEND", b"")


def self_test():
    """Random images through encode (every filter, every colour type) and back through decode."""
    import random
    rng = random.Random(15)
    for c in (1, 3, 4):
        for w, h in ((1, 1), (7, 5), (33, 9), (300, 4)):
            rows = [bytes(rng.choice((0, 255, rng.randrange(256))) for _ in range(w * c)) for _ in range(h)]
            back = decode(encode(Image(w, h, c, rows), filters=(0, 1, 2, 3, 4)))
            if (back.width, back.height, back.channels, back.rows) != (w, h, c, rows):
                raise AssertionError(f"PNG round trip differs: {w}x{h}, {c} channels")
