// Test fixture: a hot compiled method called from an interpreted one. Thread "caller" runs
// `drive`, which the test keeps interpreted (-XX:CompileCommand=exclude,InterpretedCaller::drive),
// in a loop that calls `hot`, which C2 compiles. Every sample of `hot` has `drive` as its
// caller; a walk that skips the interpreted frame would put `hot` under `run` instead.
//   java -XX:CompileCommand=exclude,InterpretedCaller::drive InterpretedCaller <seconds>
public final class InterpretedCaller {
    static volatile long sink;

    static long hot(long seed) {
        long acc = seed;
        for (int i = 0; i < 200_000; i++) acc = acc * 6364136223846793005L + (acc >>> 29) + i;
        return acc;
    }

    static long drive(long until) {
        long acc = 1;
        while (System.nanoTime() < until) acc = hot(acc);
        return acc;
    }

    static void run(long until) {
        sink = drive(until);
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> run(until), "caller");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        t.join();
    }
}
