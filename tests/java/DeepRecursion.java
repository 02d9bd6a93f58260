// Test fixture: a thread ("recurser") that recurses 500 calls deep and spends its time at the
// bottom, so every sample of it has 500 frames of DeepRecursion.down above its leaf: deeper
// than the profiler's walk limit. Run it with -XX:CompileCommand=dontinline,DeepRecursion::*
// so each call keeps its own frame.
//   java DeepRecursion <seconds> [warmup seconds=3]
// Prints "ready <pid>" once warmed up.
public final class DeepRecursion {
    static volatile long sink;
    static final int DEPTH = 500;

    static long spin(long x) {
        for (int i = 0; i < 200_000; i++) x = x * 6364136223846793005L + (x >>> 29) + i;
        return x;
    }

    static long down(int depth, long x) {
        if (depth == 0) return spin(x);
        return down(depth - 1, x) + depth;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        double warmup = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> {
            long acc = 1;
            while (System.nanoTime() < until) acc = down(DEPTH, acc);
            sink = acc;
        }, "recurser");
        t.start();
        Thread.sleep((long) (warmup * 1000));
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        t.join();
    }
}
