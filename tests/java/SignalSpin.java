// Test fixture: a Java thread interrupted by a signal whose handler spins.
//   java SignalSpin <seconds> <JNI library path> [java]
// Thread "signal" runs SignalSpin.caller, which calls the JNI library's spin (signal_spin.c):
// it spins in spin_inner until SIGALRM arrives, and the handler spins until the deadline.
// With `java`, it runs SignalSpin.javaCaller instead: Java code spins (compiled by then) when
// the signal arrives, so the handler runs above an interrupted Java frame.
// Prints "ready <pid>" once the thread runs.
public final class SignalSpin {
    static native void spin(long seconds);

    static native void arm(long seconds);

    static volatile long sink;

    static void caller(long seconds) {
        spin(seconds);
    }

    static long work(long acc) {
        for (int i = 0; i < 1000; i++) {
            acc = acc * 6364136223846793005L + 1442695040888963407L;
        }
        return acc;
    }

    /** Some milliseconds of Java code between two reads of the clock (native code). */
    static long spinJava(long acc) {
        for (int k = 0; k < 1000; k++) {
            acc = work(acc);
        }
        return acc;
    }

    static void javaCaller(long seconds) {
        long acc = 1;
        long warm = System.nanoTime() + 1_500_000_000L;
        while (System.nanoTime() < warm) {
            acc = spinJava(acc);
        }
        arm(seconds);
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end) {
            acc = spinJava(acc);
        }
        sink = acc;
    }

    public static void main(String[] args) throws Exception {
        long seconds = Long.parseLong(args[0]);
        System.load(args[1]);
        boolean java = args.length > 2 && args[2].equals("java");
        Thread t = new Thread(() -> {
            if (java) {
                javaCaller(seconds);
            } else {
                caller(seconds);
            }
        }, "signal");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        t.join();
    }
}
