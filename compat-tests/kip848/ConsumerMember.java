// A Java (kafka-clients at the reference version) consumer with group.protocol=consumer (KIP-848), run by the
// KIP-848 tests.
// Usage: java -cp CLASSES:compat-tests/java/target/lib/* ConsumerMember BOOTSTRAP GROUP TOPIC OUT_PATH [PROTOCOL
// [GROUP_INSTANCE_ID]]
// (PROTOCOL: consumer, the default, or classic: the online-migration tests roll members from one to the other).
// Writes the same lines as consumer_worker.py: "assign P...", "revoke P...", "record P OFFSET VALUE" once the
// record's offset is committed (a failed commit reads the record again), "closed" after close() (which
// leaves the group). SIGTERM closes; SIGKILL leaves it to the session timeout.

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumerMember {
    static PrintWriter out;

    static synchronized void emit(String line) {
        out.println(line);
        out.flush();
    }

    static String partitions(Collection<TopicPartition> parts) {
        TreeSet<Integer> ids = new TreeSet<>();
        for (TopicPartition tp : parts) ids.add(tp.partition());
        StringBuilder sb = new StringBuilder();
        for (int id : ids) sb.append(' ').append(id);
        return sb.toString();
    }

    public static void main(String[] args) throws IOException {
        String bootstrap = args[0], group = args[1], topic = args[2];
        out = new PrintWriter(new FileWriter(args[3], true));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args.length > 4 ? args[4] : "consumer");
        if (args.length > 5) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[5]);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-kip848");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            consumer.wakeup();
            try { main.join(20000); } catch (InterruptedException e) { }
        }));
        long deadline = System.currentTimeMillis() + 240_000;
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) { emit("revoke" + partitions(parts)); }
            public void onPartitionsAssigned(Collection<TopicPartition> parts) { emit("assign" + partitions(parts)); }
            public void onPartitionsLost(Collection<TopicPartition> parts) { emit("revoke" + partitions(parts)); }
        });
        try {
            while (!stop.get() && System.currentTimeMillis() < deadline) {
                java.util.Set<TopicPartition> failed = new java.util.HashSet<>();
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (failed.contains(tp)) continue;  // read again from the failed record on
                    try {
                        consumer.commitSync(Map.of(tp, new OffsetAndMetadata(r.offset() + 1)));
                    } catch (WakeupException e) {
                        throw e;
                    } catch (RuntimeException e) {
                        emit("commit-failed " + r.partition() + " " + r.offset() + " " + e);
                        failed.add(tp);
                        try { consumer.seek(tp, r.offset()); } catch (RuntimeException s) { emit("seek-failed " + s); }
                        continue;
                    }
                    emit("record " + r.partition() + " " + r.offset() + " " + new String(r.value(), StandardCharsets.UTF_8));
                }
            }
        } catch (WakeupException e) {
            // shutting down
        } finally {
            consumer.close(Duration.ofSeconds(10));
            emit("closed");
        }
    }
}
