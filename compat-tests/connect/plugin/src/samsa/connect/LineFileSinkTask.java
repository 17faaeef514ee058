package samsa.connect;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** Appends each record's value and a newline; flush (before the worker commits the group's offsets)
 * forces the file to disk, so a committed record is in the file. */
public class LineFileSinkTask extends SinkTask {
    private FileOutputStream out;
    private String file;

    @Override public String version() { return "1.0"; }

    @Override public void start(Map<String, String> props) {
        file = props.get("file");
        try {
            out = new FileOutputStream(file, true);
        } catch (IOException e) {
            throw new ConnectException("opening " + file, e);
        }
    }

    @Override public void put(Collection<SinkRecord> records) {
        try {
            for (SinkRecord record : records) {
                out.write((record.value() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            throw new ConnectException("writing " + file, e);
        }
    }

    @Override public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            out.flush();
            out.getFD().sync();
        } catch (IOException e) {
            throw new ConnectException("flushing " + file, e);
        }
    }

    @Override public void stop() {
        try {
            if (out != null) out.close();
        } catch (IOException e) {
            throw new ConnectException("closing " + file, e);
        }
    }
}
