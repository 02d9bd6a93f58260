// Test fixture: code that is always fresh. The busy thread ("churner") keeps loading new
// copies of a small class, each through its own class loader, and calls each copy until the
// JIT has compiled it (C1, then C2), then moves on to the next: new nmethods are installed
// all the time, and old ones are freed as their loaders are collected.
//   java ClassChurn <seconds> [warmup seconds=3]
// Prints "ready <pid>" once warmed up.
import java.io.InputStream;
import java.util.function.LongUnaryOperator;

public final class ClassChurn {
    static volatile long sink;
    /** Calls per copy: enough for C1 and usually C2 to compile it. */
    static final int CALLS_PER_CLASS = 3000;

    public static final class Template implements LongUnaryOperator {
        @Override
        public long applyAsLong(long x) {
            for (int i = 0; i < 2000; i++) x = x * 6364136223846793005L + (x >>> 29) + i;
            return x;
        }
    }

    /** Defines Template from its class file bytes, without asking the parent first. */
    static final class OneShotLoader extends ClassLoader {
        private final byte[] bytes;

        OneShotLoader(byte[] bytes) {
            super(ClassChurn.class.getClassLoader());
            this.bytes = bytes;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.equals(Template.class.getName())) {
                synchronized (getClassLoadingLock(name)) {
                    Class<?> c = findLoadedClass(name);
                    return c != null ? c : defineClass(name, bytes, 0, bytes.length);
                }
            }
            return super.loadClass(name, resolve);
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        double warmup = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        byte[] bytes;
        try (InputStream in = ClassChurn.class.getResourceAsStream("ClassChurn$Template.class")) {
            bytes = in.readAllBytes();
        }
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> {
            long acc = 1;
            try {
                while (System.nanoTime() < until) {
                    Class<?> c = new OneShotLoader(bytes).loadClass(Template.class.getName());
                    LongUnaryOperator op = (LongUnaryOperator) c.getDeclaredConstructor().newInstance();
                    for (int i = 0; i < CALLS_PER_CLASS; i++) acc = op.applyAsLong(acc);
                }
            } catch (ReflectiveOperationException e) {
                throw new RuntimeException(e);
            }
            sink = acc;
        }, "churner");
        t.start();
        Thread.sleep((long) (warmup * 1000));
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        t.join();
    }
}
