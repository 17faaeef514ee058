import java.time.Duration;
import java.util.Collections;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;

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
        Properties p = TxnCopy.producerConfig(bootstrap, group);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        int commits, aborts;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(TxnCopy.consumerConfig(bootstrap, group, 20))) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
            int[] result = TxnCopy.copy(consumer, producer, out, count, 180_000, abortsSoFar -> abortsSoFar == 0);
            commits = result[0];
            aborts = result[1];
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
