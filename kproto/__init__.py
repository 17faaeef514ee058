"""Kafka's wire protocol, sans-IO: bytes in, values out, values in, bytes out.

framing      4-byte size-prefixed frames from any split of the stream (FrameReader, frame)
messages     request/response headers and every message body via kio (parse, decode, encode)
batch        record batch v2 headers: parse, CRC32C, the leader's in-place rewrites
records      records inside batches: decode, scan, encode, transaction control records
compression  gzip / xerial snappy / lz4 frame / zstd, with a hard bound on decompressed size
wire         kio entities of any version built from plain values (build, ms, field)
errors       ProtocolError (close the connection) and Kafka's ErrorCode
"""
