import java.util.Collections;
import java.util.Random;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * Transactional consume-transform-produce (issue 5): reads COUNT records of IN in group GROUP, writes
 * "out-" + value to OUT and commits the consumed offsets in the same transaction; about a third of the
 * transactions are aborted and the consumer rewinds to the committed offsets. Exits 0 once COUNT
 * records were committed, printing "commits=N aborts=M".
 */
public class TxnLoop {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String in = args[1];
        String out = args[2];
        String group = args[3];
        int count = Integer.parseInt(args[4]);
        Random random = new Random(7);
        int[] result;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(TxnCopy.consumerConfig(bootstrap, group, 25));
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(TxnCopy.producerConfig(bootstrap, group))) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
            result = TxnCopy.copy(consumer, producer, out, count, 240_000, aborts -> random.nextDouble() < 0.35);
        }
        System.out.println("commits=" + result[0] + " aborts=" + result[1]);
    }
}
