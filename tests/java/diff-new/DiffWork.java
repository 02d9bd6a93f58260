// Test fixture for `joular-ebpf diff`, NEW version: tests/java/diff-base/DiffWork.java with
// hash doing twice the work (parse 4 : hash 4 : render 2). The loops have the same shape, so
// energy follows trip counts; run with -XX:CompileCommand=dontinline,DiffWork::* so each
// method keeps its frame.
//   java -cp <diff-new> DiffWork <rounds> [hash work, % of this version's]
public final class DiffWork {
    static volatile long sink;
    static final int UNIT = 40_000;
    // 4 units, scaled by the optional second argument (a percentage) to measure how small a
    // change `diff` detects.
    static int hashTrips = 4 * UNIT;

    // Each method has its own loop: a shared helper would be the leaf of every sample.
    static long parse(long seed) {
        long acc = seed;
        for (int i = 0; i < 4 * UNIT; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long hash(long seed) {
        long acc = seed;
        for (int i = 0; i < hashTrips; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long render(long seed) {
        long acc = seed;
        for (int i = 0; i < 2 * UNIT; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
        if (args.length > 1) hashTrips = (int) ((long) hashTrips * Integer.parseInt(args[1]) / 100);
        Thread t = new Thread(() -> {
            long acc = 1;
            for (int r = 0; r < rounds; r++) {
                acc = parse(acc);
                acc = hash(acc);
                acc = render(acc);
            }
            sink = acc;
        }, "worker");
        t.start();
        t.join();
    }
}
