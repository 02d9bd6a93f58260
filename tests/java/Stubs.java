// Test fixture: Java threads whose time goes through HotSpot's stubs.
//   java Stubs <seconds> [workload,...]   (all of them by default)
// "virtual" calls Shape.work on four classes in turn (a megamorphic call site: a vtable stub),
// "interface" calls Job.work the same way (an itable stub); each class does 1, 2, 3 and 4
// units of the same work, so its share of the samples in `work` is 10/20/30/40%. Between
// two, 32 megamorphic calls of `tiny` (next to no work) make the stubs often sampled.
// "arraycopy" copies arrays (System.arraycopy, Arrays.copyOf), "string" edits a
// StringBuilder (its arraycopy stubs), "sha256", "aesgcm" and "crc32" run the JDK's
// intrinsics (SHA-256's compression stub, AES/GCM's, CRC32's).
// Prints "ready <pid>" once every thread runs.
import java.util.ArrayList;
import java.util.List;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.zip.CRC32;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

public final class Stubs {
    static volatile long sink;
    /// Iterations of one unit of work. Not final: a trip count the JIT does not know keeps it
    /// from unrolling the small loops fully and folding them.
    static int unit = 256;

    abstract static class Shape {
        abstract long work(long x);

        /// Next to nothing: calls through the vtable stub, cheap enough that the stub is
        /// sampled often.
        abstract long tiny();
    }

    static final class One extends Shape {
        long tiny() {
            return 1;
        }

        long work(long x) {
            for (int i = 0; i < unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static final class Two extends Shape {
        long tiny() {
            return 2;
        }

        long work(long x) {
            for (int i = 0; i < 2 * unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static final class Three extends Shape {
        long tiny() {
            return 3;
        }

        long work(long x) {
            for (int i = 0; i < 3 * unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static final class Four extends Shape {
        long tiny() {
            return 4;
        }

        long work(long x) {
            for (int i = 0; i < 4 * unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    interface Job {
        long work(long x);

        long tiny();
    }

    static final class JobOne implements Job {
        public long tiny() {
            return 1;
        }

        public long work(long x) {
            for (int i = 0; i < unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static final class JobTwo implements Job {
        public long tiny() {
            return 2;
        }

        public long work(long x) {
            for (int i = 0; i < 2 * unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static final class JobThree implements Job {
        public long tiny() {
            return 3;
        }

        public long work(long x) {
            for (int i = 0; i < 3 * unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static final class JobFour implements Job {
        public long tiny() {
            return 4;
        }

        public long work(long x) {
            for (int i = 0; i < 4 * unit; i++) x = (x ^ (x >>> 29)) * 0x5DEECE66DL + i;
            return x;
        }
    }

    static long megaVirtual(Shape[] shapes, long until) {
        long x = 1;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 4096; i++) {
                Shape s = shapes[i & 3];
                x = s.work(x);
                for (int j = 0; j < 32; j++) x += shapes[(i + j) & 3].tiny();
            }
        }
        return x;
    }

    static long megaInterface(Job[] jobs, long until) {
        long x = 1;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 4096; i++) {
                x = jobs[i & 3].work(x);
                for (int j = 0; j < 32; j++) x += jobs[(i + j) & 3].tiny();
            }
        }
        return x;
    }

    static long copyArrays(long until) {
        byte[] from = new byte[1 << 16];
        byte[] to = new byte[1 << 16];
        long acc = 0;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 64; i++) {
                System.arraycopy(from, i, to, 0, from.length - i);
                acc += Arrays.copyOf(from, from.length - i).length;
            }
        }
        return acc + to[0];
    }

    static long editStrings(long until) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 1 << 15; i++) sb.append((char) ('a' + i % 26));
        long acc = 0;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 64; i++) {
                sb.delete(0, 16);
                sb.append("abcdefghijklmnop");
                sb.insert(0, 'x').deleteCharAt(0);
                acc += sb.length();
            }
        }
        return acc;
    }

    static long digest(long until) throws Exception {
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        byte[] data = new byte[1 << 16];
        long acc = 0;
        while (System.nanoTime() < until) acc += sha.digest(data)[0];
        return acc;
    }

    static long encrypt(long until) throws Exception {
        SecretKeySpec key = new SecretKeySpec(new byte[16], "AES");
        Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
        byte[] data = new byte[1 << 16];
        byte[] iv = new byte[12];
        long acc = 0;
        while (System.nanoTime() < until) {
            iv[0]++;
            iv[1] += iv[0] == 0 ? 1 : 0;
            cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, iv));
            acc += cipher.doFinal(data)[0];
        }
        return acc;
    }

    static long checksum(long until) {
        CRC32 crc = new CRC32();
        byte[] data = new byte[1 << 16];
        while (System.nanoTime() < until) crc.update(data, 0, data.length);
        return crc.getValue();
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
        Shape[] shapes = {new One(), new Two(), new Three(), new Four()};
        Job[] jobs = {new JobOne(), new JobTwo(), new JobThree(), new JobFour()};
        List<String> chosen = List.of(args.length > 1 ? args[1].split(",") : new String[] {
            "virtual", "interface", "arraycopy", "string", "sha256", "aesgcm", "crc32"});
        List<Thread> threads = new ArrayList<>();
        for (String name : chosen) {
            Work work;
            if (name.equals("virtual")) work = () -> megaVirtual(shapes, until);
            else if (name.equals("interface")) work = () -> megaInterface(jobs, until);
            else if (name.equals("arraycopy")) work = () -> copyArrays(until);
            else if (name.equals("string")) work = () -> editStrings(until);
            else if (name.equals("sha256")) work = () -> digest(until);
            else if (name.equals("aesgcm")) work = () -> encrypt(until);
            else if (name.equals("crc32")) work = () -> checksum(until);
            else throw new IllegalArgumentException("no workload " + name);
            threads.add(worker(name, work));
        }
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        for (Thread t : threads) t.join();
    }
}
