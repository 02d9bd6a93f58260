// Test fixture: one method with two hot loops on known source lines (marked LINE:first and
// LINE:second); the first runs 6 steps for every 4 of the second.
//   java HotLines <seconds> [warmup seconds=3]
// Prints "ready <pid>" once warmed up; the busy thread is named "liner".
public final class HotLines {
    static volatile long sink;
    static final int UNIT = 20_000;

    static long twoLoops(long x) {
        for (int i = 0; i < 6 * UNIT; i++) x = x * 6364136223846793005L + (x >>> 29) + i; // LINE:first
        for (int i = 0; i < 4 * UNIT; i++) x = x * 3202034522624059733L + (x >>> 31) - i; // LINE:second
        return x;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        double warmup = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> {
            long acc = 1;
            while (System.nanoTime() < until) acc = twoLoops(acc);
            sink = acc;
        }, "liner");
        t.start();
        Thread.sleep((long) (warmup * 1000));
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        t.join();
    }
}
