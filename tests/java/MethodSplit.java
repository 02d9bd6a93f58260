// Test fixture: one thread ("splitter") spends a known share of its CPU time in each of three
// distinct methods: alpha 60%, beta 30%, gamma 10%. The three loops have the same shape and
// differ only in trip count (6:3:1), so compiled code runs them at the same speed; no clock is
// read inside them (a clock call in the hot loop skews JFR's sampler).
// Run with -XX:CompileCommand=dontinline,MethodSplit::* so each stays a frame of its own.
//   java MethodSplit <seconds>
public final class MethodSplit {
    static volatile long sink;
    static final int UNIT = 40_000;

    static long alpha(long seed) {
        long acc = seed;
        for (int i = 0; i < 6 * UNIT; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long beta(long seed) {
        long acc = seed;
        for (int i = 0; i < 3 * UNIT; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long gamma(long seed) {
        long acc = seed;
        for (int i = 0; i < UNIT; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> {
            long acc = 1;
            while (System.nanoTime() < until) {
                acc = alpha(acc);
                acc = beta(acc);
                acc = gamma(acc);
            }
            sink = acc;
        }, "splitter");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        t.join();
    }
}
