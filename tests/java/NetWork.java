// Network and disk byte counters (--devices): known bytes from one thread, none from another.
//   java NetWork net HOST PORT BYTES [CHUNK]   "sender" streams BYTES over TCP to HOST:PORT in
//                                      writes of CHUNK bytes (8192) while "computer" only
//                                      computes; prints "sent <n>"
//   java NetWork sendfile HOST PORT BYTES FILE   as net, but "sender" sends FILE (made first,
//                                      BYTES long) with FileChannel.transferTo: the kernel's
//                                      sendfile, no read or write call; prints "sent <n>"
//   java NetWork file PATH BYTES       "writer" writes BYTES of text to PATH through a
//                                      BufferedWriter (after as many to /dev/null, which is no
//                                      regular file, so the JIT has compiled the writing code
//                                      by then); prints "wrote <n>"
// Prints "ready" first; the bytes move after a pause (the profiler then walks the JVM, and the
// socket library this run loads at once is in its native unwind tables), in paced bursts, so
// most of them move through code the JIT has settled, as in a long-running service.
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicBoolean;

public final class NetWork {
    static final AtomicBoolean done = new AtomicBoolean();
    /// Bytes per burst, and the pause after each: about 3 s for 64 MiB.
    static final long BURST_BYTES = 1 << 20;
    static final long PAUSE_MS = 40;
    static volatile long sink;

    static long sendChunks(String host, int port, long bytes, int chunkBytes) throws IOException {
        byte[] chunk = new byte[chunkBytes];
        long sent = 0;
        try (Socket s = new Socket(host, port)) {
            OutputStream out = s.getOutputStream();
            while (sent < bytes) {
                int n = (int) Math.min(chunk.length, bytes - sent);
                out.write(chunk, 0, n);
                sent += n;
                pace(sent, n);
            }
        }
        return sent;
    }

    static long sendFile(String host, int port, long bytes, String path) throws IOException {
        long sent = 0;
        try (FileChannel in = FileChannel.open(Path.of(path), StandardOpenOption.READ);
                SocketChannel out = SocketChannel.open(new InetSocketAddress(host, port))) {
            while (sent < bytes) {
                long n = in.transferTo(sent, Math.min(BURST_BYTES, bytes - sent), out);
                sent += n;
                pace(sent, (int) n);
            }
        }
        return sent;
    }

    static long writeLines(String path, long bytes) throws IOException {
        String line = "a line of text for the disk byte counter, 64 bytes long........\n";
        long wrote = 0;
        try (BufferedWriter out = new BufferedWriter(new FileWriter(path))) {
            while (wrote < bytes) {
                int n = (int) Math.min(line.length(), bytes - wrote);
                out.write(line, 0, n);
                wrote += n;
                pace(wrote, n);
            }
        }
        return wrote;
    }

    static long warmThenWrite(String path, long bytes) throws Exception {
        writeLines("/dev/null", bytes);
        Thread.sleep(1000);
        return writeLines(path, bytes);
    }

    /// Pauses after each `BURST_BYTES` moved (`n` the bytes just moved, `total` so far).
    static void pace(long total, int n) {
        if (total / BURST_BYTES != (total - n) / BURST_BYTES) {
            try {
                Thread.sleep(PAUSE_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static void compute() {
        long x = 1;
        while (!done.get()) {
            for (int i = 0; i < 1_000_000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
            sink = x;
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        boolean sendfile = mode.equals("sendfile");
        boolean net = mode.equals("net") || sendfile;
        long bytes = Long.parseLong(args[net ? 3 : 2]);
        int chunkBytes = mode.equals("net") && args.length > 4 ? Integer.parseInt(args[4]) : 8192;
        long[] moved = new long[1];
        if (net) {
            // Loads the socket implementation and its native library now, not mid-run.
            new Socket().close();
            SocketChannel.open().close();
        }
        if (sendfile) {
            Files.write(Path.of(args[4]), new byte[(int) bytes]);
        }
        Thread computer = new Thread(NetWork::compute, "computer");
        Thread worker = new Thread(() -> {
            try {
                Thread.sleep(2500);
                moved[0] = sendfile
                        ? sendFile(args[1], Integer.parseInt(args[2]), bytes, args[4])
                        : net
                        ? sendChunks(args[1], Integer.parseInt(args[2]), bytes, chunkBytes)
                        : warmThenWrite(args[1], bytes);
                // Alive past the next cycle's end: the cycle the last bytes moved in is named
                // while the JVM still has its compiled code.
                Thread.sleep(2500);
            } catch (Exception e) {
                throw new RuntimeException(e);
            } finally {
                done.set(true);
            }
        }, net ? "sender" : "writer");
        System.out.println("ready");
        System.out.flush();
        computer.start();
        worker.start();
        worker.join();
        computer.join();
        System.out.println((net ? "sent " : "wrote ") + moved[0]);
    }
}
