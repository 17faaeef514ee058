import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Exactly-once read-process-write with the Java producer on whichever transaction path the broker's
 * finalized transaction.version selects (V2: no AddPartitionsToTxn/AddOffsetsToTxn, an epoch bump per
 * transaction). Reads COUNT records of IN in group GROUP, writes "out-" + value to OUT and commits the
 * offsets with sendOffsetsToTransaction; the first transaction is aborted (the consumer rewinds).
 * Then a zombie: this producer opens a transaction with "zombie", a second producer with the same
 * transactional.id initializes (fencing the first and aborting its transaction) and commits "from-second";
 * the first producer's commit must fail. Prints "commits=N aborts=M fenced=<exception>".
 */
public class TxnExactlyOnce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String in = args[1];
        String out = args[2];
        String group = args[3];
        int count = Integer.parseInt(args[4]);
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + "-txn");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        int done = 0, commits = 0, aborts = 0;
        long deadline = System.currentTimeMillis() + 180_000;
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
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
                if (aborts == 0) {
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
        }
        // The zombie: an open transaction when a second instance with the same transactional.id starts.
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(out, "zombie".getBytes())).get();
        String fenced = "none";
        try (KafkaProducer<byte[], byte[]> second = new KafkaProducer<>(p)) {
            second.initTransactions();
            second.beginTransaction();
            second.send(new ProducerRecord<>(out, "from-second".getBytes()));
            second.commitTransaction();
            try {
                producer.send(new ProducerRecord<>(out, "zombie-2".getBytes())).get();
                producer.commitTransaction();
            } catch (Exception e) {
                Throwable cause = e.getCause() != null && !(e instanceof KafkaException) ? e.getCause() : e;
                fenced = cause.getClass().getSimpleName();
            }
        }
        producer.close(Duration.ofSeconds(5));
        System.out.println("commits=" + commits + " aborts=" + aborts + " fenced=" + fenced);
    }
}
