// The bundled demo workload: a small "application" whose methods cost clearly different
// amounts of CPU, on three threads, so the profiler's method and thread tables have
// something to tell.   java -XX:+PreserveFramePointer EnergyDemo <seconds>
import java.math.BigInteger;
import java.util.Arrays;
import java.util.Random;

public final class EnergyDemo {
    static volatile long sink;

    /** CPU-heavy: arbitrary-precision arithmetic (JDK work charged to the app with --filter). */
    static BigInteger factorial(int n) {
        BigInteger r = BigInteger.ONE;
        for (int i = 2; i <= n; i++) r = r.multiply(BigInteger.valueOf(i));
        return r;
    }

    /** Memory-heavy: sort a fresh random array. */
    static long sortRandom(Random rnd, int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = rnd.nextInt();
        Arrays.sort(a);
        return a[n / 2];
    }

    /** Branchy integer work: count primes below n. */
    static int countPrimes(int n) {
        int count = 0;
        outer:
        for (int i = 2; i < n; i++) {
            for (int d = 2; (long) d * d <= i; d++) if (i % d == 0) continue outer;
            count++;
        }
        return count;
    }

    /** String building: the kind of work that hides in logging code. */
    static int buildReport(int lines) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < lines; i++) sb.append("line ").append(i).append(": ").append(i * 31).append('\n');
        return sb.length();
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 8;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread math = new Thread(() -> {
            while (System.nanoTime() < until) sink += factorial(2000).bitLength() + countPrimes(20000);
        }, "math-worker");
        Thread data = new Thread(() -> {
            Random rnd = new Random(42);
            while (System.nanoTime() < until) {
                sink += sortRandom(rnd, 100_000) + buildReport(2000);
                try { Thread.sleep(5); } catch (InterruptedException e) { return; }
            }
        }, "data-worker");
        math.start();
        data.start();
        math.join();
        data.join();
        System.out.println("EnergyDemo done");
    }
}
