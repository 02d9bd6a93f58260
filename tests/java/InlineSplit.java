// Test fixture: a hot method whose two small callees C2 inlines (no CompileCommand), with a
// known work split. `work` runs `left` 3 times and `right` 2 times per call; both are the
// same loop of UNIT steps, so left does 60% of the work and right 40%, however fast the code
// runs (interpreted, C1 or C2). Each step depends on the previous one, so no compiler can
// merge or drop the loops. A call of `work` is long (5 x UNIT steps), so the thread's own
// loop in Spinner.run turns rarely and is not compiled on-stack (OSR) during a test: the
// shape stays left/right inlined into a compiled `work`, called by an interpreted run().
//   java InlineSplit <seconds> [warmup seconds=3]
// Prints "ready <pid>" once warmed up. The busy thread is named "inliner"; its Runnable is
// InlineSplit$Spinner, so its Java callers are Spinner.run and java.lang.Thread.run.
public final class InlineSplit {
    static volatile long sink;
    static final int UNIT = 100_000;

    static long left(long x) {
        for (int i = 0; i < UNIT; i++) x = x * 6364136223846793005L + (x >>> 29) + i;
        return x;
    }

    static long right(long x) {
        for (int i = 0; i < UNIT; i++) x = x * 6364136223846793005L + (x >>> 29) + i;
        return x;
    }

    static long work(long x) {
        x = left(x);
        x = right(x);
        x = left(x);
        x = right(x);
        x = left(x);
        return x;
    }

    static final class Spinner implements Runnable {
        final long untilNanos;

        Spinner(long untilNanos) {
            this.untilNanos = untilNanos;
        }

        @Override
        public void run() {
            long acc = 1;
            while (System.nanoTime() < untilNanos) acc = work(acc);
            sink = acc;
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        double warmup = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        long start = System.nanoTime();
        Thread t = new Thread(new Spinner(start + (long) (seconds * 1e9)), "inliner");
        t.start();
        Thread.sleep((long) (warmup * 1000));
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        t.join();
    }
}
