// Test fixture: Java methods whose time goes to native code without frame pointers.
//   java NativeUnwind <seconds> [JNI library path]
// Thread "jni" runs NativeUnwind.jniCaller, which calls a JNI library's spin (built by the
// test with gcc -O2 -fomit-frame-pointer: its leaf keeps no frame pointer). Thread "readlink"
// runs NativeUnwind.readLinks (Files.readSymbolicLink: glibc's readlink wrapper), "list" runs
// NativeUnwind.listDir (File.list: getdents64 through glibc), "millis" runs
// NativeUnwind.millis (System.currentTimeMillis: os::javaTimeMillis and the vDSO).
// Prints "ready <pid>" once every thread runs.
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;

public final class NativeUnwind {
    static volatile long sink;

    static native long spin(long iterations);

    static long jniCaller(long until) {
        long acc = 0;
        while (System.nanoTime() < until) acc += spin(2_000_000);
        return acc;
    }

    static long readLinks(Path link, long until) throws Exception {
        long acc = 0;
        while (System.nanoTime() < until) acc += Files.readSymbolicLink(link).toString().length();
        return acc;
    }

    static long listDir(File dir, long until) {
        long acc = 0;
        while (System.nanoTime() < until) acc += dir.list().length;
        return acc;
    }

    static long millis(long until) {
        long acc = 0;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 1000; i++) acc += System.currentTimeMillis();
        }
        return acc;
    }

    interface Work {
        long run() throws Exception;
    }

    static Thread worker(String name, Work work) {
        Thread t = new Thread(() -> {
            try {
                sink += work.run();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, name);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Path dir = Files.createTempDirectory("nativeunwind");
        for (int i = 0; i < 64; i++) Files.createFile(dir.resolve("f" + i));
        Path link = Files.createSymbolicLink(dir.resolve("link"), dir.resolve("f0"));
        Thread[] threads = {
            worker("readlink", () -> readLinks(link, until)),
            worker("list", () -> listDir(dir.toFile(), until)),
            worker("millis", () -> millis(until)),
            args.length > 1 ? loadAndSpin(args[1], until) : null,
        };
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        for (Thread t : threads) if (t != null) t.join();
    }

    static Thread loadAndSpin(String library, long until) {
        System.load(library);
        return worker("jni", () -> jniCaller(until));
    }
}
