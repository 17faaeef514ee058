import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/** Sends COUNT values "v-i" to partition 0 with the default (idempotent) producer; exits 0 when all are acked. */
public class IdempotentProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "2048");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "20");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, 0, null, "v-" + i)));
                if (i % 50 == 49) {
                    producer.flush();
                }
            }
            producer.flush();
            for (Future<RecordMetadata> f : futures) {
                f.get();
            }
        }
        System.out.println("acked " + count);
    }
}
