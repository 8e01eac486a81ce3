/*
 * End-to-end latency of Kafka's own Java clients at a fixed rate, measured as `clusterctl perf e2e` measures it:
 * the Java-client side of bench/perf_vs_java.py's end-to-end comparison (Kafka's EndToEndLatency tool keeps one
 * record in flight, so it cannot run at a fixed rate).
 *
 * Run from a Kafka distribution's class path as a single-file program (JDK 11+), e.g.
 *   kafka-run-class.sh bench/E2ELatencyAtRate.java BOOTSTRAP TOPIC RECORDS RATE SIZE [WARM_UP_SECONDS]
 *
 * A producer (acks=1, linger.ms=0, as EndToEndLatency sets) sends RECORDS records of SIZE bytes at RATE records/s
 * in bursts of about a millisecond's worth; each record carries a run id, its sequence number and the
 * System.nanoTime() read just before its send call. A consumer thread, assigned every partition at its end offset
 * before the first send (fetch.max.wait.ms and fetch.min.bytes at the Java defaults: the broker answers as soon as
 * one byte is there), reads them; a record's latency is the time its poll returned minus its send stamp. Measuring
 * starts once a warm-up record has made the whole trip and, with WARM_UP_SECONDS, after that many seconds at
 * RATE whose records are not counted (this JVM's JIT warms up in them; ours has no JIT). Prints one line:
 *   e2e: records R received N achieved/s X p50 A p99 B p99.9 C max D cpu_s S
 * (latencies in ms to the microsecond; S: this process's CPU seconds from the first send until the reader is done)
 */

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

public class E2ELatencyAtRate {
    static final long WARM_UP = -1L;
    static final long WARM_RATE = -2L;  // records of the untimed phase at RATE

    public static void main(String[] args) throws Exception {
        if (args.length != 5 && args.length != 6) {
            System.err.println("usage: E2ELatencyAtRate BOOTSTRAP TOPIC RECORDS RATE SIZE [WARM_UP_SECONDS]");
            System.exit(2);
        }
        String brokers = args[0];
        String topic = args[1];
        int records = Integer.parseInt(args[2]);
        double rate = Double.parseDouble(args[3]);
        int size = Math.max(24, Integer.parseInt(args[4]));
        double warmUpSeconds = args.length > 5 ? Double.parseDouble(args[5]) : 0.0;
        long runId = new Random().nextLong();
        Properties pp = new Properties();
        pp.put("bootstrap.servers", brokers);
        pp.put("acks", "1");
        pp.put("linger.ms", "0");
        pp.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        Properties cp = new Properties();
        cp.put("bootstrap.servers", brokers);
        cp.put("group.id", "e2e-at-rate-" + System.currentTimeMillis());
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = consumer.partitionsFor(topic).stream()
                    .map(p -> new TopicPartition(p.topic(), p.partition())).collect(Collectors.toList());
            consumer.assign(tps);
            consumer.seekToEnd(tps);
            tps.forEach(consumer::position);
            long[] lat = new long[records];
            int[] got = new int[1];
            AtomicBoolean primed = new AtomicBoolean();
            AtomicBoolean stop = new AtomicBoolean();
            Thread reader = new Thread(() -> {
                while (got[0] < records && !stop.get()) {
                    var batch = consumer.poll(Duration.ofMillis(100));
                    long now = System.nanoTime();
                    for (ConsumerRecord<byte[], byte[]> r : batch) {
                        ByteBuffer b = ByteBuffer.wrap(r.value());
                        if (b.getLong(0) != runId) continue;
                        long seq = b.getLong(8);
                        if (seq == WARM_UP) {
                            primed.set(true);
                        } else if (seq >= 0 && seq < records && lat[(int) seq] == 0) {
                            lat[(int) seq] = Math.max(1, now - b.getLong(16));
                            got[0]++;
                        }
                    }
                }
            });
            reader.start();
            while (!primed.get()) {
                producer.send(new ProducerRecord<>(topic, payload(size, runId, WARM_UP)));
                Thread.sleep(50);
            }
            pace(producer, topic, size, runId, (int) (warmUpSeconds * rate), rate, true);
            long cpu0 = cpuNanos();
            long start = System.nanoTime();
            int sent = pace(producer, topic, size, runId, records, rate, false);
            double seconds = (System.nanoTime() - start) / 1e9;
            reader.join(30_000);
            stop.set(true);
            reader.join();
            double cpu = (cpuNanos() - cpu0) / 1e9;
            long[] seen = Arrays.stream(lat).filter(v -> v > 0).sorted().toArray();
            int n = seen.length;
            System.out.printf("e2e: records %d received %d achieved/s %.1f p50 %.3f p99 %.3f p99.9 %.3f max %.3f cpu_s %.2f%n",
                    records, n, sent / seconds, pct(seen, 0.5), pct(seen, 0.99), pct(seen, 0.999),
                    n == 0 ? 0.0 : seen[n - 1] / 1e6, cpu);
        }
    }

    /** Send `count` records at `rate` in bursts of about a millisecond's worth, numbered from 0 (or all
     * WARM_RATE: `warm`); the number sent. */
    static int pace(KafkaProducer<byte[], byte[]> producer, String topic, int size, long runId, int count,
                    double rate, boolean warm) {
        int burst = Math.max(1, (int) (rate / 1000));
        long start = System.nanoTime();
        int sent = 0;
        while (sent < count) {
            long elapsed = System.nanoTime() - start;
            int due = (int) Math.min(count, (long) (elapsed * rate / 1e9) + 1);
            if (due - sent >= burst || (due > sent && due == count)) {
                for (; sent < due; sent++) {
                    producer.send(new ProducerRecord<>(topic, payload(size, runId, warm ? WARM_RATE : sent)));
                }
            } else {
                LockSupport.parkNanos(Math.max((long) ((sent + burst - 1) / rate * 1e9) - elapsed, 100_000));
            }
        }
        return sent;
    }

    /** This process's CPU time (all threads, ns). */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /** A SIZE-byte value: run id, sequence number, then the send stamp, taken here just before the send call. */
    static byte[] payload(int size, long runId, long seq) {
        ByteBuffer b = ByteBuffer.allocate(size);
        b.putLong(0, runId).putLong(8, seq).putLong(16, System.nanoTime());
        return b.array();
    }

    /** EndToEndLatency's percentile: the value at index (int) (n * q) of the sorted latencies, in ms. */
    static double pct(long[] sorted, double q) {
        return sorted.length == 0 ? 0.0 : sorted[Math.min(sorted.length - 1, (int) (sorted.length * q))] / 1e6;
    }
}
