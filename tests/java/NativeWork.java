// Test fixture: Java methods whose time goes to code below them that is not Java.
//   java NativeWork <seconds> [warmup seconds=3]
// Thread "modpow" runs NativeWork.crypto, which spends its time in BigInteger.modPow: JDK Java
// code and the intrinsic stubs and native multiply loops C2 calls from it. Thread "writer"
// runs NativeWork.persist, which spends its time in FileChannel.write: JDK Java code, then
// libc and the kernel (a write syscall per call). Prints "ready <pid>" once warmed up.
import java.io.File;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.Random;

public final class NativeWork {
    static volatile long sink;

    static long crypto(BigInteger base, BigInteger exponent, BigInteger modulus, int rounds) {
        long acc = 0;
        for (int i = 0; i < rounds; i++) acc += base.modPow(exponent, modulus).bitLength();
        return acc;
    }

    static long persist(FileChannel channel, ByteBuffer buffer, int rounds) throws Exception {
        long written = 0;
        for (int i = 0; i < rounds; i++) {
            buffer.rewind();
            written += channel.write(buffer, 0);
        }
        return written;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        double warmup = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Random random = new Random(42);
        BigInteger modulus = new BigInteger(2048, random).setBit(0);
        BigInteger base = new BigInteger(2040, random);
        BigInteger exponent = new BigInteger(256, random);
        Thread modpow = new Thread(() -> {
            long acc = 0;
            while (System.nanoTime() < until) acc += crypto(base, exponent, modulus, 4);
            sink += acc;
        }, "modpow");
        File file = File.createTempFile("nativework", ".bin");
        file.deleteOnExit();
        Thread writer = new Thread(() -> {
            try (FileChannel channel = FileChannel.open(file.toPath(), StandardOpenOption.WRITE)) {
                ByteBuffer buffer = ByteBuffer.allocateDirect(64);
                long acc = 0;
                while (System.nanoTime() < until) acc += persist(channel, buffer, 256);
                sink += acc;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "writer");
        modpow.start();
        writer.start();
        Thread.sleep((long) (warmup * 1000));
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        modpow.join();
        writer.join();
    }
}
