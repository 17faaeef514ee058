import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.function.IntPredicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The consume-transform-produce loop TxnLoop and TxnExactlyOnce share: the read_committed consumer of group
 * GROUP, the transactional producer (transactional.id GROUP + "-txn"), and the loop that copies each polled
 * batch of IN to OUT as "out-" + value with the consumed offsets in the same transaction, aborting the
 * transactions the caller picks (the consumer then rewinds to the committed offsets).
 */
final class TxnCopy {
    private TxnCopy() { }

    static Properties consumerConfig(String bootstrap, String group, int maxPollRecords) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPollRecords));
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return c;
    }

    static Properties producerConfig(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + "-txn");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    /** Copies until COUNT records were committed; abort.test(abortsSoFar) decides each transaction's fate.
     * Returns {commits, aborts}. */
    static int[] copy(KafkaConsumer<byte[], byte[]> consumer, KafkaProducer<byte[], byte[]> producer, String out,
                      int count, long timeoutMs, IntPredicate abort) {
        int done = 0, commits = 0, aborts = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (done < count) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("stuck after " + done + " records");
            }
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
            if (records.isEmpty()) {
                continue;
            }
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                byte[] value = ("out-" + new String(r.value())).getBytes();
                producer.send(new ProducerRecord<>(out, r.value(), value));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            if (abort.test(aborts)) {
                producer.abortTransaction();
                aborts++;
                Set<TopicPartition> assigned = consumer.assignment();
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata o = committed.get(tp);
                    consumer.seek(tp, o == null ? 0 : o.offset());
                }
            } else {
                producer.commitTransaction();
                commits++;
                done += records.count();
            }
        }
        return new int[] {commits, aborts};
    }
}
