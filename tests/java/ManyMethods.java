// Benchmark fixture: a JVM with thousands of hot Java methods. It loads COPIES copies of a
// small class, each through its own class loader (so every copy's methods are distinct
// Method*s with their own constant pool and compiled code), and calls them in rotation on
// two threads, each copy's chain a -> b -> c -> d.
//   java ManyMethods <seconds> [copies=2000]
// Prints "ready <pid> <methods>" once every copy has run enough to be compiled.
import java.io.InputStream;
import java.util.function.LongUnaryOperator;

public final class ManyMethods {
    static volatile long sink;

    public static final class Copy implements LongUnaryOperator {
        static long d(long x) {
            for (int i = 0; i < 200; i++) x = x * 6364136223846793005L + (x >>> 29) + i;
            return x;
        }

        static long c(long x) {
            return d(x) ^ d(x + 1);
        }

        static long b(long x) {
            return c(x) + c(x ^ 0x5bd1e995L);
        }

        @Override
        public long applyAsLong(long x) {
            return b(x) * 31 + b(x >>> 7);
        }
    }

    static final class OwnLoader extends ClassLoader {
        private final byte[] bytes;

        OwnLoader(byte[] bytes) {
            super(ManyMethods.class.getClassLoader());
            this.bytes = bytes;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.equals(Copy.class.getName())) {
                synchronized (getClassLoadingLock(name)) {
                    Class<?> c = findLoadedClass(name);
                    return c != null ? c : defineClass(name, bytes, 0, bytes.length);
                }
            }
            return super.loadClass(name, resolve);
        }
    }

    static long rotate(LongUnaryOperator[] ops, int from, long acc, int rounds) {
        for (int r = 0; r < rounds; r++) {
            for (int i = from; i < ops.length; i += 2) acc = ops[i].applyAsLong(acc);
        }
        return acc;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 60;
        int copies = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        byte[] bytes;
        try (InputStream in = ManyMethods.class.getResourceAsStream("ManyMethods$Copy.class")) {
            bytes = in.readAllBytes();
        }
        LongUnaryOperator[] ops = new LongUnaryOperator[copies];
        for (int i = 0; i < copies; i++) {
            ops[i] = (LongUnaryOperator) new OwnLoader(bytes).loadClass(Copy.class.getName()).getDeclaredConstructor().newInstance();
        }
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread[] threads = new Thread[2];
        for (int t = 0; t < 2; t++) {
            int from = t;
            threads[t] = new Thread(() -> {
                long acc = from;
                while (System.nanoTime() < until) acc = rotate(ops, from, acc, 1);
                sink = acc;
            }, "rotor-" + t);
        }
        // Warm up on this thread first: every copy's methods get hot enough to compile.
        long acc = 0;
        for (int r = 0; r < 40; r++) acc = rotate(ops, 0, acc, 1) + rotate(ops, 1, acc, 1);
        sink = acc;
        for (Thread t : threads) t.start();
        System.out.println("ready " + ProcessHandle.current().pid() + " " + copies * 4);
        System.out.flush();
        for (Thread t : threads) t.join();
    }
}
