package samsa.connect;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** Each complete line after the stored position becomes a record; the source offset is
 * {"position": the byte after the line}, under the source partition {"filename": the file}, so a
 * restarted worker resumes after the last line it committed. */
public class LineFileSourceTask extends SourceTask {
    private static final int MAX_LINES_PER_POLL = 1000;
    private static final long IDLE_WAIT_MS = 100;
    private String file;
    private String topic;
    private Map<String, String> sourcePartition;
    private long position;

    @Override public String version() { return "1.0"; }

    @Override public void start(Map<String, String> props) {
        file = props.get("file");
        topic = props.get("topic");
        sourcePartition = Map.of("filename", file);
        Map<String, Object> stored = context.offsetStorageReader().offset(sourcePartition);
        position = stored != null && stored.get("position") instanceof Number n ? n.longValue() : 0L;
    }

    @Override public List<SourceRecord> poll() throws InterruptedException {
        List<SourceRecord> records = new ArrayList<>();
        try (RandomAccessFile in = new RandomAccessFile(file, "r")) {
            long length = in.length();
            if (length > position) {
                byte[] bytes = new byte[(int) Math.min(length - position, 1 << 20)];
                in.seek(position);
                in.readFully(bytes);
                int start = 0;
                for (int i = 0; i < bytes.length && records.size() < MAX_LINES_PER_POLL; i++) {
                    if (bytes[i] != '\n') continue;
                    String line = new String(bytes, start, i - start, StandardCharsets.UTF_8);
                    long next = position + i + 1;
                    records.add(new SourceRecord(sourcePartition, Map.of("position", next), topic, null,
                                                 null, null, Schema.STRING_SCHEMA, line));
                    start = i + 1;
                }
                if (!records.isEmpty()) {
                    position = (Long) records.get(records.size() - 1).sourceOffset().get("position");
                }
            }
        } catch (IOException e) {
            throw new ConnectException("reading " + file, e);
        }
        if (records.isEmpty()) {
            Thread.sleep(IDLE_WAIT_MS);
            return null;
        }
        return records;
    }

    @Override public void stop() { }
}
