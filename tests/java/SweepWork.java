// Test fixture for `joular-ebpf sweep`: one thread ("worker") runs three methods whose work is
// a known function of n: linear does n units, quadratic n², exponential 2^n (n is small: 1 to
// 6 in the test). The loops have the same shape, so energy follows trip counts; run with
// -XX:CompileCommand=dontinline,SweepWork::* so each method keeps its frame.
//
// Energy follows work only once the JVM is quiet. A thread's energy is its share of the
// socket's (jcarbon's scheduler-time share): while the JIT compiler threads run beside it, a
// method gets a smaller share of the same watts, and the first calls run interpreted, at a
// fraction of compiled speed. Both hit the small values of n hardest, and bent the measured
// curves (x^1.93 for n², n·log n for n). So the worker first calls each method many times on a
// few trips (C2 compiles all three as whole methods, not as on-stack replacements of one long
// loop), waits for the compilers to go idle, and only then does the measured work: what it
// costs is then a constant (the warm-up) plus the known function of n.
//   java -cp <classes> SweepWork <n>
public final class SweepWork {
    static volatile long sink;
    // Trips per unit: at n = 6 linear runs about 0.3 s, quadratic and exponential about 0.7 s
    // each (a trip is 1.5-2 ns once compiled).
    static final long LINEAR_UNIT = 32_000_000L;
    static final long QUADRATIC_UNIT = 11_000_000L;
    static final long EXPONENTIAL_UNIT = 6_200_000L;
    // Warm-up: past C2's invocation threshold (Tier4InvocationThreshold is 5,000; C2 compiles
    // all three by ~70 ms with -XX:+PrintCompilation) on 4 trips per call. The warm-up's
    // samples carry the same method names, so it must stay short: at 20,000 calls of 50 trips
    // it added ~0.5 J per method at 40 W, and that constant let a·x^0.89 beat a + b·x.
    static final int WARMUP_CALLS = 10_000;
    static final long WARMUP_UNIT = 4L;

    // Each method has its own loop: a shared helper would be the leaf of every sample.
    static long linear(int n, long unit, long seed) {
        long acc = seed;
        long trips = n * unit;
        for (long i = 0; i < trips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long quadratic(int n, long unit, long seed) {
        long acc = seed;
        long trips = (long) n * n * unit;
        for (long i = 0; i < trips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long exponential(int n, long unit, long seed) {
        long acc = seed;
        long trips = (1L << n) * unit;
        for (long i = 0; i < trips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long quietMs = Long.parseLong(System.getProperty("quiet.ms", "400"));
        Thread t = new Thread(() -> {
            long acc = 1;
            for (int i = 0; i < WARMUP_CALLS; i++) {
                acc = linear(1, WARMUP_UNIT, acc);
                acc = quadratic(1, WARMUP_UNIT, acc);
                acc = exponential(0, WARMUP_UNIT, acc);
            }
            try {
                Thread.sleep(quietMs);
            } catch (InterruptedException e) {
                return;
            }
            acc = linear(n, LINEAR_UNIT, acc);
            acc = quadratic(n, QUADRATIC_UNIT, acc);
            acc = exponential(n, EXPONENTIAL_UNIT, acc);
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
