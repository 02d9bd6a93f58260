// Test fixture: two worker threads with known CPU duty cycles.
//   java DutyCycle <seconds> [busyDuty=1.0] [lightDuty=0.3]
// "busy" spins (duty 1.0 = never sleeps); "light" spins lightDuty of each period and sleeps
// the rest. Periods are drawn between 6 and 14 ms (10 ms on average, fixed seed): a fixed
// 10 ms period plus wake-up latency lands at ~97-99 Hz, in lockstep with a 97-100 Hz sampler,
// which then sees the thread a third more or less often than its CPU time for a whole run.
// The threads are named "busy" and "light", so tests match them by /proc comm.
public final class DutyCycle {
    static volatile long sink;

    static long spinFor(long nanos) {
        long end = System.nanoTime() + nanos;
        long acc = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) acc += i * 31L ^ (acc >>> 3);
        }
        return acc;
    }

    static Thread worker(String name, double duty, long untilNanos) {
        Thread t = new Thread(() -> {
            java.util.SplittableRandom periods = new java.util.SplittableRandom(name.hashCode());
            while (System.nanoTime() < untilNanos) {
                long period = periods.nextLong(6_000_000L, 14_000_001L);
                long busy = (long) (period * duty);
                sink += spinFor(busy);
                long rest = period - busy;
                if (rest > 0) {
                    try {
                        Thread.sleep(rest / 1_000_000L, (int) (rest % 1_000_000L));
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }, name);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        double busyDuty = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        double lightDuty = args.length > 2 ? Double.parseDouble(args[2]) : 0.3;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread a = worker("busy", busyDuty, until);
        Thread b = worker("light", lightDuty, until);
        System.out.println("ready " + ProcessHandle.current().pid());
        a.join();
        b.join();
        int code = Integer.getInteger("exitCode", 0);
        System.exit(code);
    }
}
