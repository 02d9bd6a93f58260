// Test fixture: a JVM that starts many threads at once, as a server does on a burst of work.
//   java ThreadStorm <threads> <seconds> [workMicros=1000]
// Prints "ready <pid>", starts <threads> threads as fast as it can, each spinning <workMicros>
// then sleeping 100 ms, over and over, until <seconds> have passed since the start. With the
// defaults a few thousand threads want far more CPU than the machine has.
public final class ThreadStorm {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        double seconds = Double.parseDouble(args[1]);
        long workNanos = (args.length > 2 ? Long.parseLong(args[2]) : 1000) * 1000;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        Thread[] all = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            all[i] = new Thread(() -> {
                long acc = 0;
                while (System.nanoTime() < until) {
                    long end = System.nanoTime() + workNanos;
                    while (System.nanoTime() < end) {
                        for (int k = 0; k < 100; k++) acc += k * 31L ^ (acc >>> 3);
                    }
                    sink += acc;
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "storm-" + i);
            all[i].start();
        }
        System.out.println("started " + threads);
        for (Thread t : all) t.join();
    }
}
