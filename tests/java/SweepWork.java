// Test fixture for `joular-ebpf sweep`: one thread ("worker") runs three methods whose work is
// a known function of n: linear does n units, quadratic n², exponential 2^n (n is small: 1 to
// 6 in the test). The loops have the same shape, so energy follows trip counts; run with
// -XX:CompileCommand=dontinline,SweepWork::* so each method keeps its frame.
//   java -cp <classes> SweepWork <n>
public final class SweepWork {
    static volatile long sink;
    // Trips per unit: at n = 6 linear runs about 0.3 s, quadratic and exponential about 0.7 s
    // each (a trip is 1.5-2 ns once compiled).
    static final long LINEAR_UNIT = 32_000_000L;
    static final long QUADRATIC_UNIT = 11_000_000L;
    static final long EXPONENTIAL_UNIT = 6_200_000L;

    // Each method has its own loop: a shared helper would be the leaf of every sample.
    static long linear(int n, long seed) {
        long acc = seed;
        long trips = n * LINEAR_UNIT;
        for (long i = 0; i < trips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long quadratic(int n, long seed) {
        long acc = seed;
        long trips = (long) n * n * QUADRATIC_UNIT;
        for (long i = 0; i < trips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long exponential(int n, long seed) {
        long acc = seed;
        long trips = (1L << n) * EXPONENTIAL_UNIT;
        for (long i = 0; i < trips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        Thread t = new Thread(() -> {
            long acc = 1;
            acc = linear(n, acc);
            acc = quadratic(n, acc);
            acc = exponential(n, acc);
            sink = acc;
        }, "worker");
        t.start();
        t.join();
        // The JVM stays up for a few profiler cycles after the work: code compiled in the last
        // cycle of a JVM that has exited can no longer be named ([unknown JIT code]), and here
        // that would be most of a short run's exponential.
        Thread.sleep(Long.parseLong(System.getProperty("linger.ms", "600")));
    }
}
