// The disk root test's Towers of Hanoi (tests/tests/devices.rs; docs/experiments.md has the
// recursive one of the E-Surgeon papers, Hanoi.java): "mover" solves
// DISKS disks ROUNDS times, writing every move as a line through a BufferedWriter to PATH,
// while "computer" only computes; creates PATH.done once PATH is closed; prints "ready" first
// and "wrote <bytes>" at the end.
//   java HanoiDisk PATH DISKS ROUNDS
// The moves start after a pause (the profiler then walks the JVM) and the JVM stays alive a
// while after the last write (writeback and the cycle naming its bytes come after it).
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicBoolean;

public final class HanoiDisk {
    static final AtomicBoolean done = new AtomicBoolean();
    static volatile long sink;
    static long wrote;
    static final char[] PEGS = {'A', 'B', 'C'};

    /// Writes move `i` (1-based) of the 2^disks - 1 that solve the puzzle: disk number
    /// trailing-zeros(i) + 1, from peg (i & (i - 1)) % 3 to peg ((i | (i - 1)) + 1) % 3.
    static void move(BufferedWriter out, long i) throws IOException {
        int disk = Long.numberOfTrailingZeros(i) + 1;
        long from = (i & (i - 1)) % 3;
        long to = ((i | (i - 1)) + 1) % 3;
        String line = "move disk " + disk + " from " + PEGS[(int) from] + " to " + PEGS[(int) to] + "\n";
        out.write(line);
        wrote += line.length();
    }

    /// Iterative, not recursive: a recursive solver reaches each write through a different
    /// chain of calls (one per move), and every one would be a call path of its own.
    static void solve(String path, int disks, int rounds) throws IOException {
        long moves = (1L << disks) - 1;
        try (BufferedWriter out = new BufferedWriter(new FileWriter(path))) {
            for (int r = 0; r < rounds; r++) {
                for (long i = 1; i <= moves; i++) {
                    move(out, i);
                }
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
        String path = args[0];
        int disks = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        Thread computer = new Thread(HanoiDisk::compute, "computer");
        Thread mover = new Thread(() -> {
            try {
                Thread.sleep(2500);
                solve(path, disks, rounds);
                new FileWriter(path + ".done").close();
                Thread.sleep(4000);
            } catch (Exception e) {
                throw new RuntimeException(e);
            } finally {
                done.set(true);
            }
        }, "mover");
        System.out.println("ready");
        System.out.flush();
        computer.start();
        mover.start();
        mover.join();
        computer.join();
        System.out.println("wrote " + wrote);
    }
}
