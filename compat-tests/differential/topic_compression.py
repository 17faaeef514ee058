"""Topic ``compression.type`` (issue 14 item 3): the codec a broker stores a produced batch in, and the records
read back from it.

Kafka's LogValidator keeps a v2 batch as it came when the topic's codec is ``producer`` or the batch's own
(offsets assigned in place, the CRC unchanged), and otherwise rebuilds it in the topic's codec
(``uncompressed``: none). So for each topic type this produces an uncompressed batch, one in the topic's
own codec and one in another, fetches them raw and records per batch the stored codec (attributes & 7),
whether the broker kept the producer's bytes (the CRC, which covers everything from the attributes on, is
the one sent) and the decoded records. The compressed bytes themselves are not compared: Kafka's Java
codecs and Samsa's write different (equally valid) streams, so a rebuilt batch's length and CRC differ.
"""

from __future__ import annotations

from typing import Any

from differential.framework import Ctx, err, jsonable, scenario
from samsa.kproto.records import decode_batches

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_IDS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
# topic compression.type -> the codecs of the batches produced to it: none, the topic's own, another one
PRODUCED_CODECS = {
    "gzip": (NONE, GZIP, ZSTD),
    "snappy": (NONE, SNAPPY, LZ4),
    "lz4": (NONE, LZ4, GZIP),
    "zstd": (NONE, ZSTD, SNAPPY),
    "uncompressed": (NONE, GZIP, LZ4),
    "producer": (NONE, GZIP, ZSTD),
}
RECORDS: list[Any] = [
    (b"key", b"value", ()),
    (None, b"null key", [("h", b"1"), ("h", b"2"), ("null", None), ("utf8-\u00e9", b"\xff\x00")]),
    (b"null value", None, ()),
    (b"\x00\x01binary", b"\xfe" * 300, ()),  # compressible, so a codec changes the batch's length
]


def _batches(data: bytes | None, sent_crcs: dict[int, int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for h, recs in decode_batches(data or b"", max_decompressed_bytes=1 << 26):
        out.append({
            "base_offset": h.base_offset,
            "last_offset_delta": h.last_offset_delta,
            "stored_codec": h.attributes & 0x07,
            "kept_as_sent": sent_crcs.get(h.base_offset) == h.crc,
            "max_timestamp": h.max_timestamp,
            "records": [{"offset": r.offset, "timestamp": r.timestamp_ms, "key": jsonable(r.key),
                         "value": jsonable(r.value), "headers": [[x.key, jsonable(x.value)] for x in r.headers]}
                        for r in recs],
        })
    return out


@scenario
def topic_compression_type(ctx: Ctx) -> Any:
    """Batches in every codec produced to topics of every compression.type: stored codec and records."""
    c = ctx.connect()
    out: dict[str, Any] = {}
    for topic_type, codecs in PRODUCED_CODECS.items():
        t = ctx.topic(topic_type)
        step: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1, {"compression.type": topic_type}))}
        produced, sent_crcs = [], {}
        for i, codec in enumerate(codecs):
            batch = ctx.batch(RECORDS, ts=i * 1000, compression=codec)
            p = ctx.produce(c, t, 0, batch, version=9)
            produced.append({"codec": codec, "error": err(p), "base_offset": p.base_offset})
            sent_crcs[p.base_offset] = next(iter(decode_batches(batch, max_decompressed_bytes=1 << 26)))[0].crc
        step["produced"] = produced
        f = ctx.fetch(c, t, 0, 0)
        step["fetch"] = {"error": err(f), "high_watermark": f.high_watermark,
                         "batches": _batches(f.records, sent_crcs)}
        # the codec each batch was stored in, in one line (what the issue asks to compare)
        step["stored_codecs"] = [b["stored_codec"] for b in step["fetch"]["batches"]]
        out[topic_type] = step
    return out
