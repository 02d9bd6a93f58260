// Test fixture: threads whose names change under the profiler.
//   java ThreadNames <trigger file>
// Prints "ready <pid>", then waits for <trigger file> to exist. Then starts "renamer-a", which
// burns CPU for 2.5 s, renames itself "renamer-b" (Thread.setName on the current thread also
// renames the native thread) and burns 2.5 s more; 1.5 s in, starts "shortburn", which burns
// 250 ms and exits. Both are new threads: the JVM names a native thread only once it runs, so
// each first runs under the process's name ("java"). Each prints "<name> <tid>" when it starts.
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

public final class ThreadNames {
    static volatile long sink;

    static void burn(long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long acc = 0;
        while (System.nanoTime() < end) {
            for (int k = 0; k < 100; k++) acc += k * 31L ^ (acc >>> 3);
        }
        sink += acc;
    }

    /// The native thread id, from /proc/thread-self (a link to "<pid>/task/<tid>").
    static String tid() throws Exception {
        return Files.readSymbolicLink(Paths.get("/proc/thread-self")).getFileName().toString();
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Path trigger = Paths.get(args[0]);
        say("ready " + ProcessHandle.current().pid());
        while (!Files.exists(trigger)) Thread.sleep(10);
        Thread renamer = new Thread(() -> {
            try {
                say("renamer-a " + tid());
                burn(2500);
                Thread.currentThread().setName("renamer-b");
                say("renamed");
                burn(2500);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "renamer-a");
        renamer.start();
        Thread.sleep(1500);
        Thread shortburn = new Thread(() -> {
            try {
                say("shortburn " + tid());
                burn(250);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "shortburn");
        shortburn.start();
        shortburn.join();
        renamer.join();
        say("done");
    }
}
