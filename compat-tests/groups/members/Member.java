// A Java (kafka-clients at the reference version) group member (see member_common.py for the contract), classic protocol.
// Usage: java -cp CLASSES:compat-tests/java/target/lib/* Member BOOTSTRAP TOPIC GROUP [INSTANCE_ID]

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Member {
    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        String instance = args.length > 3 ? args[3] : null;
        int sessionMs = Integer.parseInt(System.getenv().getOrDefault("SESSION_MS", "6000"));
        double lifetimeS = Double.parseDouble(System.getenv().getOrDefault("MEMBER_LIFETIME_S", "240"));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(sessionMs));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-" + group);
        if (instance != null) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            consumer.wakeup();
            try { main.join(15000); } catch (InterruptedException e) { }
        }));
        long deadline = System.currentTimeMillis() + (long) (lifetimeS * 1000);
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) { }
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                TreeSet<Integer> ids = new TreeSet<>();
                for (TopicPartition tp : parts) ids.add(tp.partition());
                emit("{\"event\": \"assigned\", \"partitions\": " + ids.toString() + "}");
            }
        });
        try {
            while (!stop.get() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit("{\"event\": \"record\", \"p\": " + r.partition() + ", \"o\": " + r.offset() + "}");
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!offsets.isEmpty()) {
                    consumer.commitSync(offsets);
                    StringBuilder sb = new StringBuilder();
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                        if (sb.length() > 0) sb.append(", ");
                        sb.append("\"").append(e.getKey().partition()).append("\": ").append(e.getValue().offset());
                    }
                    emit("{\"event\": \"committed\", \"offsets\": {" + sb + "}}");
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            // shutting down
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }
}
