// Test fixture: a hot compiled method called from an interpreted one. Thread "caller" runs
// `drive`, which the test keeps interpreted (-XX:CompileCommand=exclude,InterpretedCaller::drive),
// in a loop that calls `hot`, which C2 compiles. Every sample of `hot` has `drive` as its
// caller; a walk that skips the interpreted frame would put `hot` under `run` instead.
// With `tiny`, `drive` calls `tiny`, a compiled method of a few instructions, instead: each
// call goes through the interpreter's call sequence and the I2C adapter, so many samples
// land in them, with the interpreted `drive` as their caller.
//   java -XX:CompileCommand=exclude,InterpretedCaller::drive InterpretedCaller <seconds> [tiny]
public final class InterpretedCaller {
    static volatile long sink;

    static long hot(long seed) {
        long acc = seed;
        for (int i = 0; i < 200_000; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long tiny(long seed) {
        return seed * 6364136223846793005L + (seed >>> 29);
    }

    static long drive(long until, boolean tinyCallee) {
        long acc = 1;
        int odd = 0;
        while (System.nanoTime() < until) {
            if (tinyCallee) {
                for (int i = 0; i < 1000; i++) {
                    acc = tiny(acc);
                    // One word more on the expression stack at this call (`odd`, pushed
                    // first): the two calls leave their return addresses at slots of both
                    // 16-byte alignments, so every run meets both ways the I2C adapter
                    // realigns sp.
                    odd += (int) tiny(acc);
                }
            } else {
                acc = hot(acc);
            }
        }
        return acc + odd;
    }

    static void run(long until, boolean tinyCallee) {
        sink = drive(until, tinyCallee);
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        boolean tinyCallee = args.length > 1 && args[1].equals("tiny");
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> run(until, tinyCallee), "caller");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        t.join();
    }
}
