// Java client (kafka-clients at the reference version) compat scenario: the same steps and checks as
// compat-tests/clients/scenario_common.py.
// Usage: java -cp 'target/classes:target/lib/*' Scenario BOOTSTRAP TOPIC
// Exit 0 and a JSON summary on stdout; 1 and "MISMATCH [java]: ..." on stderr on a mismatch; 2 on errors.

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Scenario {
    static final String CLIENT = "java";
    static final int PARTITIONS = 3;
    static final int N_RECORDS = 30;
    static final int N_KEYS = 5;
    static final int TS_STEP = 10;

    static class Mismatch extends RuntimeException {
        Mismatch(String msg) {
            super(msg);
        }
    }

    static class Rec {
        int i;
        String key;
        String value;
        long ts;
        Map<String, String> headers = new TreeMap<>();
        int partition = -1;
        long offset = -1;
    }

    static void expect(boolean cond, String msg) {
        if (!cond) throw new Mismatch(msg);
    }

    static List<Rec> plan(long t0) {
        List<Rec> recs = new ArrayList<>();
        for (int i = 0; i < N_RECORDS; i++) {
            Rec r = new Rec();
            r.i = i;
            r.key = "key-" + (i % N_KEYS);
            r.value = "value-" + i;
            r.ts = t0 + (long) TS_STEP * i;
            r.headers.put("idx", Integer.toString(i));
            recs.add(r);
        }
        return recs;
    }

    static void checkMetadata(Map<Integer, Integer> leaders, Set<Integer> brokers) {
        expect(!brokers.isEmpty(), "metadata lists no brokers");
        expect(new TreeSet<>(leaders.keySet()).equals(new TreeSet<>(List.of(0, 1, 2))),
            "expected partitions [0, 1, 2], metadata has " + new TreeSet<>(leaders.keySet()));
        leaders.forEach((p, l) -> expect(brokers.contains(l),
            "partition " + p + ": leader " + l + " is not one of the brokers " + brokers));
    }

    static void checkProduced(List<Rec> recs) {
        Map<String, Set<Integer>> byKey = new TreeMap<>();
        for (Rec r : recs) {
            expect(r.partition >= 0 && r.partition < PARTITIONS, "record " + r.i + ": acked partition " + r.partition);
            byKey.computeIfAbsent(r.key, k -> new TreeSet<>()).add(r.partition);
        }
        byKey.forEach((k, ps) -> expect(ps.size() == 1, "key " + k + " went to several partitions: " + ps));
        for (int p = 0; p < PARTITIONS; p++) {
            final int pp = p;
            List<Long> offs = recs.stream().filter(r -> r.partition == pp).map(r -> r.offset).collect(Collectors.toList());
            for (int j = 0; j < offs.size(); j++) {
                expect(offs.get(j) == j, "partition " + p + ": acked offsets in send order are " + offs);
            }
        }
    }

    static void checkConsumed(List<Rec> recs, List<Rec> consumed) {
        expect(consumed.size() == recs.size(), "consumed " + consumed.size() + " records, produced " + recs.size());
        for (int p = 0; p < PARTITIONS; p++) {
            final int pp = p;
            List<Rec> want = recs.stream().filter(r -> r.partition == pp).collect(Collectors.toList());
            List<Rec> got = consumed.stream().filter(r -> r.partition == pp).collect(Collectors.toList());
            List<Long> wo = want.stream().map(r -> r.offset).collect(Collectors.toList());
            List<Long> go = got.stream().map(r -> r.offset).collect(Collectors.toList());
            expect(wo.equals(go), "partition " + p + ": consumed offsets " + go + ", expected " + wo);
            for (int j = 0; j < want.size(); j++) {
                Rec w = want.get(j);
                Rec g = got.get(j);
                String where = "partition " + p + " offset " + w.offset;
                expect(w.key.equals(g.key), where + ": key " + g.key + ", expected " + w.key);
                expect(w.value.equals(g.value), where + ": value " + g.value + ", expected " + w.value);
                expect(w.ts == g.ts, where + ": timestamp " + g.ts + ", expected " + w.ts);
                expect(w.headers.equals(g.headers), where + ": headers " + g.headers + ", expected " + w.headers);
            }
        }
    }

    static Long expectedOffsetForTime(List<Rec> recs, int p, long t) {
        return recs.stream().filter(r -> r.partition == p && r.ts >= t).map(r -> r.offset).min(Long::compare).orElse(null);
    }

    static List<Long> offsetTimes(List<Rec> recs) {
        long min = recs.stream().mapToLong(r -> r.ts).min().getAsLong();
        long max = recs.stream().mapToLong(r -> r.ts).max().getAsLong();
        return List.of(min - 1000, recs.get(N_RECORDS / 2).ts, max + 1000);
    }

    static void checkOffsets(List<Rec> recs, Map<Integer, Long> earliest, Map<Integer, Long> latest,
                             Map<Long, Map<Integer, Long>> byTime, String how) {
        for (int p = 0; p < PARTITIONS; p++) {
            final int pp = p;
            long n = recs.stream().filter(r -> r.partition == pp).count();
            expect(Long.valueOf(0).equals(earliest.get(p)), how + ": partition " + p + ": earliest " + earliest.get(p) + ", expected 0");
            expect(Long.valueOf(n).equals(latest.get(p)), how + ": partition " + p + ": latest " + latest.get(p) + ", expected " + n);
        }
        byTime.forEach((t, got) -> {
            for (int p = 0; p < PARTITIONS; p++) {
                Long want = expectedOffsetForTime(recs, p, t);
                Long g = got.get(p);
                expect(want == null ? g == null : want.equals(g), how + ": partition " + p + ": offset for time " + t
                    + " is " + g + ", expected " + want + " (first offset with timestamp >= " + t + ")");
            }
        });
    }

    static String json(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String run(String bootstrap, String topic) throws Exception {
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        common.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");

        Properties ap = new Properties();
        ap.putAll(common);
        ap.put(AdminClientConfig.CLIENT_ID_CONFIG, "compat-java-admin");
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            Map<Integer, Integer> leaders = new TreeMap<>();
            Set<Integer> brokers = new TreeSet<>();
            long deadline = System.currentTimeMillis() + 15000;
            while (true) {
                leaders.clear();
                brokers.clear();
                try {
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS).get(topic);
                    for (TopicPartitionInfo pi : d.partitions()) {
                        leaders.put(pi.partition(), pi.leader() == null ? -1 : pi.leader().id());
                    }
                    for (Node n : admin.describeCluster().nodes().get(20, TimeUnit.SECONDS)) brokers.add(n.id());
                } catch (java.util.concurrent.ExecutionException e) {
                    if (System.currentTimeMillis() > deadline) throw e;
                }
                boolean ready = leaders.size() == PARTITIONS && leaders.values().stream().allMatch(l -> l >= 0);
                if (ready || System.currentTimeMillis() > deadline) break;
                Thread.sleep(200);
            }
            checkMetadata(leaders, brokers);
        }

        List<Rec> recs = plan((System.currentTimeMillis() / 1000 - 60) * 1000);
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "compat-java-producer");
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        // Idempotence stays at the Java default (on with acks=all): InitProducerId and sequence checks are exercised.
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (Rec r : recs) {
                RecordHeaders headers = new RecordHeaders();
                r.headers.forEach((k, v) -> headers.add(k, v.getBytes()));
                // partition null: the default partitioner (murmur2 of the key)
                futures.add(producer.send(new ProducerRecord<>(topic, null, r.ts, r.key, r.value, headers)));
            }
            producer.flush();
            for (int j = 0; j < recs.size(); j++) {
                RecordMetadata md = futures.get(j).get(30, TimeUnit.SECONDS);
                recs.get(j).partition = md.partition();
                recs.get(j).offset = md.offset();
            }
        }
        checkProduced(recs);

        Properties cp = new Properties();
        cp.putAll(common);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "compat-java-consumer");
        // no group.id: assign() + seek, no group coordinator, no commits
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            List<Rec> consumed = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30000;
            while (consumed.size() < recs.size() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> m : consumer.poll(Duration.ofMillis(500))) {
                    Rec c = new Rec();
                    c.key = m.key();
                    c.value = m.value();
                    c.ts = m.timestamp();
                    c.partition = m.partition();
                    c.offset = m.offset();
                    for (Header h : m.headers()) c.headers.put(h.key(), new String(h.value()));
                    consumed.add(c);
                }
            }
            checkConsumed(recs, consumed);

            Function<Map<TopicPartition, Long>, Map<Integer, Long>> byPartition =
                m -> m.entrySet().stream().collect(Collectors.toMap(e -> e.getKey().partition(), Map.Entry::getValue));
            Map<Long, Map<Integer, Long>> byTime = new LinkedHashMap<>();
            for (long t : offsetTimes(recs)) {
                Map<TopicPartition, Long> query = new HashMap<>();
                for (TopicPartition tp : tps) query.put(tp, t);
                Map<Integer, Long> res = new HashMap<>();
                consumer.offsetsForTimes(query, Duration.ofSeconds(20)).forEach(
                    (tp, ot) -> res.put(tp.partition(), ot == null ? null : ot.offset()));
                byTime.put(t, res);
            }
            checkOffsets(recs, byPartition.apply(consumer.beginningOffsets(tps, Duration.ofSeconds(20))),
                byPartition.apply(consumer.endOffsets(tps, Duration.ofSeconds(20))), byTime, "consumer");
        }

        try (Admin admin = Admin.create(ap)) {
            Function<OffsetSpec, Map<Integer, Long>> list = spec -> {
                Map<TopicPartition, OffsetSpec> q = new HashMap<>();
                for (TopicPartition tp : tps) q.put(tp, spec);
                try {
                    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
                        admin.listOffsets(q).all().get(30, TimeUnit.SECONDS);
                    Map<Integer, Long> out = new HashMap<>();
                    // the admin client answers offset -1 when no record is that recent
                    res.forEach((tp, info) -> out.put(tp.partition(), info.offset() < 0 ? null : info.offset()));
                    return out;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            };
            Map<Long, Map<Integer, Long>> byTime = new LinkedHashMap<>();
            for (long t : offsetTimes(recs)) byTime.put(t, list.apply(OffsetSpec.forTimestamp(t)));
            checkOffsets(recs, list.apply(OffsetSpec.earliest()), list.apply(OffsetSpec.latest()), byTime, "admin");

            // MAX_TIMESTAMP (KIP-734): the record with the largest timestamp, here the last of each partition
            Map<TopicPartition, OffsetSpec> q = new HashMap<>();
            for (TopicPartition tp : tps) q.put(tp, OffsetSpec.maxTimestamp());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res = admin.listOffsets(q).all().get(30, TimeUnit.SECONDS);
            for (TopicPartition tp : tps) {
                ListOffsetsResult.ListOffsetsResultInfo info = res.get(tp);
                List<Rec> mine = recs.stream().filter(r -> r.partition == tp.partition()).collect(Collectors.toList());
                String got = info.offset() < 0 ? "none" : info.offset() + "@" + info.timestamp();
                String want = mine.isEmpty() ? "none" : mine.get(mine.size() - 1).offset + "@" + mine.get(mine.size() - 1).ts;
                expect(got.equals(want), "admin: partition " + tp.partition() + ": max-timestamp offset@timestamp is "
                    + got + ", expected " + want);
            }
        }

        StringBuilder sb = new StringBuilder();
        sb.append("{\"client\": ").append(json(CLIENT)).append(", \"key_partition\": {");
        Map<String, Integer> kp = new TreeMap<>();
        for (Rec r : recs) kp.put(r.key, r.partition);
        sb.append(kp.entrySet().stream().map(e -> json(e.getKey()) + ": " + e.getValue()).collect(Collectors.joining(", ")));
        sb.append("}, \"partition_counts\": {");
        List<String> counts = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            final int part = p;
            counts.add(json(Integer.toString(p)) + ": " + recs.stream().filter(r -> r.partition == part).count());
        }
        sb.append(String.join(", ", counts)).append("}, \"records\": [");
        sb.append(recs.stream().map(r -> "[" + r.partition + ", " + r.offset + ", " + json(r.key) + ", " + json(r.value) + "]")
            .collect(Collectors.joining(", ")));
        sb.append("]}");
        return sb.toString();
    }

    public static void main(String[] args) {
        if (args.length != 2) {
            System.err.println("usage: Scenario BOOTSTRAP TOPIC");
            System.exit(2);
        }
        long timeoutMs = 1000L * Long.parseLong(System.getenv().getOrDefault("SCENARIO_TIMEOUT", "90"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(timeoutMs);
                System.err.println("ERROR [" + CLIENT + "]: scenario did not finish within " + timeoutMs / 1000 + "s");
                Runtime.getRuntime().halt(2);
            } catch (InterruptedException e) {
                // finished in time
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            String out = run(args[0], args[1]);
            System.out.println(out);
            System.out.flush();
            Runtime.getRuntime().halt(0);
        } catch (Mismatch e) {
            System.err.println("MISMATCH [" + CLIENT + "]: " + e.getMessage());
            Runtime.getRuntime().halt(1);
        } catch (Throwable e) {
            e.printStackTrace();
            System.err.println("ERROR [" + CLIENT + "]: the scenario raised (see above)");
            System.err.flush();
            Runtime.getRuntime().halt(2);
        }
    }
}
