// A Java (kafka-clients) group member for bench/kip848.py --client java, with either group protocol.
// Usage: java -cp CLASSES:compat-tests/java/target/lib/* Kip848Member BOOTSTRAP TOPIC GROUP PROTOCOL SESSION_MS HEARTBEAT_MS
// The same contract as kip848_member.py: PROTOCOL `consumer` (the broker's group.consumer.* settings apply, so
// SESSION_MS and HEARTBEAT_MS are not sent) or `classic` (session.timeout.ms and heartbeat.interval.ms are the
// member's; the client's default assignors, range first: eager). One JSON object per line on stdout, "t" on
// the machine's monotonic clock (System.nanoTime, CLOCK_MONOTONIC as Python's time.monotonic on Linux):
// {"event": "subscribed"}, {"event": "owned", "partitions": [...]} after every assign, revoke or loss,
// {"event": "polled", "p": P} when a poll returned records of partition P. SIGTERM closes the consumer (it
// leaves the group); the program ends by itself after 300 s.

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Kip848Member {
    static final TreeSet<Integer> owned = new TreeSet<>();

    static synchronized void emit(String event, String fields) {
        System.out.println("{\"event\": \"" + event + "\", \"t\": " + (System.nanoTime() / 1e9) + fields + "}");
        System.out.flush();
    }

    static void changed(Collection<TopicPartition> parts, boolean add) {
        for (TopicPartition tp : parts) {
            if (add) owned.add(tp.partition()); else owned.remove(tp.partition());
        }
        emit("owned", ", \"partitions\": " + owned.toString());
    }

    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        p.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args[4]);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, args[5]);
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            consumer.wakeup();
            try { main.join(20000); } catch (InterruptedException e) { }
        }));
        long deadline = System.currentTimeMillis() + 300_000;
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) { changed(parts, false); }
            public void onPartitionsAssigned(Collection<TopicPartition> parts) { changed(parts, true); }
            public void onPartitionsLost(Collection<TopicPartition> parts) { changed(parts, false); }
        });
        emit("subscribed", "");
        try {
            while (!stop.get() && System.currentTimeMillis() < deadline) {
                TreeSet<Integer> polled = new TreeSet<>();
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(50))) polled.add(r.partition());
                for (int partition : polled) emit("polled", ", \"p\": " + partition);
            }
        } catch (WakeupException e) {
            // shutting down
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }
}
