"""Bar charts as PNG without dependencies: an RGB canvas, a 5x7 bitmap font, and zlib.

One chart per scenario: a panel per metric with a Kafka bar and a Samsa bar, their values, and the
Samsa / Kafka ratio (green when Samsa is at least as good, red when worse).
"""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

from bench.compare.common import Metric, ScenarioResult, fmt

# 5x7 glyphs, 7 rows of 5 bits, top row first (8 for letters with a descender).
_GLYPHS = """
A 01110 10001 10001 11111 10001 10001 10001
B 11110 10001 10001 11110 10001 10001 11110
C 01110 10001 10000 10000 10000 10001 01110
D 11100 10010 10001 10001 10001 10010 11100
E 11111 10000 10000 11110 10000 10000 11111
F 11111 10000 10000 11110 10000 10000 10000
G 01110 10001 10000 10111 10001 10001 01111
H 10001 10001 10001 11111 10001 10001 10001
I 01110 00100 00100 00100 00100 00100 01110
J 00111 00010 00010 00010 00010 10010 01100
K 10001 10010 10100 11000 10100 10010 10001
L 10000 10000 10000 10000 10000 10000 11111
M 10001 11011 10101 10101 10001 10001 10001
N 10001 10001 11001 10101 10011 10001 10001
O 01110 10001 10001 10001 10001 10001 01110
P 11110 10001 10001 11110 10000 10000 10000
Q 01110 10001 10001 10001 10101 10010 01101
R 11110 10001 10001 11110 10100 10010 10001
S 01111 10000 10000 01110 00001 00001 11110
T 11111 00100 00100 00100 00100 00100 00100
U 10001 10001 10001 10001 10001 10001 01110
V 10001 10001 10001 10001 10001 01010 00100
W 10001 10001 10001 10101 10101 10101 01010
X 10001 10001 01010 00100 01010 10001 10001
Y 10001 10001 10001 01010 00100 00100 00100
Z 11111 00001 00010 00100 01000 10000 11111
a 00000 00000 01110 00001 01111 10001 01111
b 10000 10000 10110 11001 10001 10001 11110
c 00000 00000 01110 10000 10000 10001 01110
d 00001 00001 01101 10011 10001 10001 01111
e 00000 00000 01110 10001 11111 10000 01110
f 00110 01001 01000 11100 01000 01000 01000
g 00000 00000 01111 10001 10001 01111 00001 01110
h 10000 10000 10110 11001 10001 10001 10001
i 00100 00000 01100 00100 00100 00100 01110
j 00010 00000 00110 00010 00010 00010 10010 01100
k 10000 10000 10010 10100 11000 10100 10010
l 01100 00100 00100 00100 00100 00100 01110
m 00000 00000 11010 10101 10101 10001 10001
n 00000 00000 10110 11001 10001 10001 10001
o 00000 00000 01110 10001 10001 10001 01110
p 00000 00000 11110 10001 10001 11110 10000 10000
q 00000 00000 01111 10001 10001 01111 00001 00001
r 00000 00000 10110 11001 10000 10000 10000
s 00000 00000 01110 10000 01110 00001 11110
t 01000 01000 11100 01000 01000 01001 00110
u 00000 00000 10001 10001 10001 10011 01101
v 00000 00000 10001 10001 10001 01010 00100
w 00000 00000 10001 10001 10101 10101 01010
x 00000 00000 10001 01010 00100 01010 10001
y 00000 00000 10001 10001 10001 01111 00001 01110
z 00000 00000 11111 00010 00100 01000 11111
0 01110 10001 10011 10101 11001 10001 01110
1 00100 01100 00100 00100 00100 00100 01110
2 01110 10001 00001 00010 00100 01000 11111
3 11111 00010 00100 00010 00001 10001 01110
4 00010 00110 01010 10010 11111 00010 00010
5 11111 10000 11110 00001 00001 10001 01110
6 00110 01000 10000 11110 10001 10001 01110
7 11111 00001 00010 00100 01000 01000 01000
8 01110 10001 10001 01110 10001 10001 01110
9 01110 10001 10001 01111 00001 00010 01100
. 00000 00000 00000 00000 00000 01100 01100
, 00000 00000 00000 00000 01100 00100 01000
: 00000 01100 01100 00000 01100 01100 00000
; 00000 01100 01100 00000 01100 00100 01000
/ 00000 00001 00010 00100 01000 10000 00000
( 00010 00100 01000 01000 01000 00100 00010
) 01000 00100 00010 00010 00010 00100 01000
[ 01110 01000 01000 01000 01000 01000 01110
] 01110 00010 00010 00010 00010 00010 01110
- 00000 00000 00000 11111 00000 00000 00000
= 00000 00000 11111 00000 11111 00000 00000
+ 00000 00100 00100 11111 00100 00100 00000
% 11000 11001 00010 00100 01000 10011 00011
_ 00000 00000 00000 00000 00000 00000 11111
? 01110 10001 00001 00010 00100 00000 00100
! 00100 00100 00100 00100 00100 00000 00100
< 00010 00100 01000 10000 01000 00100 00010
> 01000 00100 00010 00001 00010 00100 01000
' 01100 00100 01000 00000 00000 00000 00000
* 00000 00100 10101 01110 10101 00100 00000
# 01010 01010 11111 01010 11111 01010 01010
@ 01110 10001 10111 10101 10111 10000 01110
"""

FONT: dict[str, list[int]] = {}
for _line in _GLYPHS.strip().splitlines():
    _ch, *_rows = _line.split()
    FONT[_ch] = [int(r, 2) for r in _rows]
FONT[" "] = [0] * 7

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
INK: Color = (34, 34, 34)
GREY: Color = (120, 120, 120)
RULE: Color = (210, 210, 210)
KAFKA: Color = (76, 114, 176)
SAMSA: Color = (221, 132, 82)
GOOD: Color = (30, 130, 60)
BAD: Color = (190, 40, 40)


class Canvas:
    def __init__(self, width: int, height: int, bg: Color = WHITE) -> None:
        self.w, self.h = width, height
        self.px = bytearray(bytes(bg) * (width * height))

    def rect(self, x: int, y: int, w: int, h: int, color: Color) -> None:
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(self.w, x + w), min(self.h, y + h)
        if x1 <= x0 or y1 <= y0:
            return
        row = bytes(color) * (x1 - x0)
        for yy in range(y0, y1):
            i = (yy * self.w + x0) * 3
            self.px[i:i + len(row)] = row

    def text(self, x: int, y: int, s: str, color: Color = INK, scale: int = 2) -> None:
        for ch in s:
            glyph = FONT.get(ch) or FONT.get(ch.upper()) or FONT["?"]
            for r, bits in enumerate(glyph):
                for c in range(5):
                    if bits & (1 << (4 - c)):
                        self.rect(x + c * scale, y + r * scale, scale, scale, color)
            x += 6 * scale

    def text_center(self, cx: int, y: int, s: str, color: Color = INK, scale: int = 2) -> None:
        self.text(cx - text_width(s, scale) // 2, y, s, color, scale)

    def png(self) -> bytes:
        stride = self.w * 3
        raw = b"".join(b"\x00" + bytes(self.px[y * stride:(y + 1) * stride]) for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(
            b"IEND", b"")


def text_width(s: str, scale: int = 2) -> int:
    return max(0, len(s) * 6 * scale - scale)


def wrap(s: str, width_chars: int) -> list[str]:
    """Word-wrap each paragraph (separated by newlines) to ``width_chars``."""
    lines: list[str] = []
    for para in s.split("\n"):
        cur = ""
        for word in para.split():
            if cur and len(cur) + 1 + len(word) > width_chars:
                lines.append(cur)
                cur = word
            else:
                cur = f"{cur} {word}" if cur else word
        lines.append(cur)
    return lines or [""]


PANEL_W, PANEL_H = 400, 310


def _panel(cv: Canvas, x: int, y: int, m: Metric) -> None:
    cv.rect(x + 6, y + 6, PANEL_W - 12, 1, RULE)
    lines = wrap(m.label, (PANEL_W - 24) // 12)[:2]
    for i, line in enumerate(lines):
        cv.text(x + 12, y + 16 + i * 20, line, INK, 2)
    cv.text(x + 12, y + 18 + len(lines) * 20, f"{m.unit}, {m.better} is better", GREY, 2)
    base = y + 250
    top = y + 92
    vals = [v for v in (m.kafka, m.samsa) if v is not None and math.isfinite(v)]
    vmax = max(vals, default=0.0) or 1.0
    for i, (name, value, status, color) in enumerate(
            (("Kafka", m.kafka, m.kafka_status, KAFKA), ("Samsa", m.samsa, m.samsa_status, SAMSA))):
        cx = x + PANEL_W // 4 + i * PANEL_W // 2 - 10 * i
        if value is None or not math.isfinite(value):
            word = status.split(":")[0] if status else "n/a"
            cv.text_center(cx, base - 40, word, BAD, 2)
        else:
            h = max(1, int((base - top - 24) * max(0.0, value) / vmax))
            cv.rect(cx - 50, base - h, 100, h, color)
            cv.text_center(cx, base - h - 20, fmt(value), INK, 2)
        cv.text_center(cx, base + 8, name, color, 2)
    cv.rect(x + 20, base, PANEL_W - 40, 2, INK)
    ratio = m.ratio
    if ratio is not None:
        good = ratio >= 1.0 if m.better == "higher" else ratio <= 1.0
        cv.text_center(x + PANEL_W // 2, base + 32, f"Samsa/Kafka = {ratio:.2f}", GOOD if good else BAD, 2)
    else:
        cv.text_center(x + PANEL_W // 2, base + 32, "Samsa/Kafka = -", GREY, 2)


def chart(result: ScenarioResult, subtitle: str) -> bytes:
    metrics = result.metrics
    cols = min(3, max(1, len(metrics)))
    rows = max(1, math.ceil(len(metrics) / cols))
    width = max(cols * PANEL_W, 32 + text_width(result.title, 3))
    sub = wrap(subtitle, (width - 32) // 12)[:12]
    header = 56 + 20 * len(sub) + 8
    error = wrap(f"error: {result.error}", (width - 32) // 12)[:6] if result.error else []
    cv = Canvas(width, header + rows * PANEL_H + 20 * len(error) + 10)
    cv.text(16, 14, result.title, INK, 3)
    for i, line in enumerate(sub):
        cv.text(16, 56 + i * 20, line, GREY, 2)
    for i, line in enumerate(error):
        cv.text(16, header + i * 20, line, BAD, 2)
    header += 20 * len(error)
    for i, m in enumerate(metrics):
        _panel(cv, (i % cols) * PANEL_W, header + (i // cols) * PANEL_H, m)
    return cv.png()


def write_chart(result: ScenarioResult, path: Path, subtitle: str) -> Path:
    path.write_bytes(chart(result, subtitle))
    return path
