// Apache Kafka's own record code (kafka-clients) as an oracle for kproto's record batches.
//   java -cp 'lib/*' RecordsOracle.java [write DIR] [read FILE..]
//     write: DIR/<codec>.bin, one batch per codec; read: one line per batch and per record
//   (one JVM for both: starting java and compiling this file is most of the test's time)
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;

public class RecordsOracle {
    static final HexFormat HEX = HexFormat.of();

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static SimpleRecord[] records() {
        byte[] big = utf8("abcdefgh".repeat(20000));
        return new SimpleRecord[] {
            new SimpleRecord(1700000000000L, utf8("k0"), utf8("v0"),
                new Header[] {new RecordHeader("h1", utf8("hv")), new RecordHeader("h2", (byte[]) null)}),
            new SimpleRecord(1700000000005L, null, utf8("v1")),
            new SimpleRecord(1699999999990L, utf8("k2"), null),
            new SimpleRecord(1700000000010L, utf8("big"), big,
                new Header[] {new RecordHeader("\u00fc-key", new byte[] {0, (byte) 0xff})}),
        };
    }

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return HEX.formatHex(a);
    }

    public static void main(String[] args) throws Exception {
        int first = 0;
        if (args.length >= 2 && args[0].equals("write")) {
            write(Path.of(args[1]));
            first = 2;
        }
        if (args.length > first && args[first].equals("read")) {
            read(java.util.Arrays.copyOfRange(args, first + 1, args.length));
        }
    }

    static void write(Path dir) throws Exception {
        String[] names = {"none", "gzip", "snappy", "lz4", "zstd"};
        Compression[] codecs = {
            Compression.NONE, Compression.gzip().build(), Compression.snappy().build(),
            Compression.lz4().build(), Compression.zstd().build(),
        };
        for (int i = 0; i < names.length; i++) {
            MemoryRecords batch = MemoryRecords.withRecords(RecordBatch.MAGIC_VALUE_V2, 100L, codecs[i],
                TimestampType.CREATE_TIME, 1234L, (short) 5, 42, 7, false, records());
            ByteBuffer buf = batch.buffer();
            byte[] out = new byte[buf.remaining()];
            buf.get(out);
            Files.write(dir.resolve(names[i] + ".bin"), out);
        }
    }

    static void read(String[] files) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (String file : files) {
            MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Path.of(file))));
            for (RecordBatch batch : records.batches()) {
                batch.ensureValid();
                sb.append(String.format("batch %d %d %d %d %b %b %d %d %d %d%n", batch.baseOffset(), batch.lastOffset(),
                    batch.countOrNull(), batch.compressionType().id, batch.isTransactional(), batch.isControlBatch(),
                    batch.producerId(), batch.producerEpoch(), batch.baseSequence(), batch.maxTimestamp()));
                for (Record r : batch) {
                    r.ensureValid();
                    sb.append(String.format("record %d %d %s %s %d", r.offset(), r.timestamp(), hex(r.key()),
                        hex(r.value()), r.headers().length));
                    for (Header h : r.headers()) {
                        sb.append(' ').append(HEX.formatHex(utf8(h.key()))).append(' ')
                          .append(h.value() == null ? "-" : HEX.formatHex(h.value()));
                    }
                    sb.append('\n');
                }
            }
        }
        System.out.print(sb);
    }
}
