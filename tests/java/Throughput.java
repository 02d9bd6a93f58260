// Benchmark workload: N threads do fixed units of work as fast as they can. After an optional
// warm-up (JIT compilation, profiler start-up) it prints "measuring", counts the units done in the
// next S seconds and prints "ops <n>".   java Throughput <seconds> <threads> [warmup-seconds]
public final class Throughput {
    static volatile long sink;

    static long unit(long seed) {
        long acc = seed;
        for (int i = 0; i < 20_000; i++) acc = acc * 6364136223846793005L + 1442695040888963407L ^ (acc >>> 17);
        return acc;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        double warmup = args.length > 2 ? Double.parseDouble(args[2]) : 0;
        long from = System.nanoTime() + (long) (warmup * 1e9);
        long until = from + (long) (seconds * 1e9);
        long[] ops = new long[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                long n = 0, acc = id, now;
                while ((now = System.nanoTime()) < until) {
                    acc = unit(acc);
                    if (now >= from) n++;
                }
                sink += acc;
                ops[id] = n;
            }, "worker-" + t);
            ts[t].start();
        }
        long sleepMs = (from - System.nanoTime()) / 1_000_000;
        if (sleepMs > 0) Thread.sleep(sleepMs);
        System.out.println("measuring");
        System.out.flush();
        long total = 0;
        for (int t = 0; t < threads; t++) { ts[t].join(); total += ops[t]; }
        System.out.println("ops " + total);
    }
}
