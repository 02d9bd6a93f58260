// Test fixture: one thread ("returner") calls a small method that is kept out of line
// (-XX:CompileCommand=dontinline,ReturnPoll::*) in a tight loop, so a good share of its
// samples land in that method's epilogue: after `pop %rbp`, at the return's safepoint poll
// (`cmp <polling word>(%r15),%rsp; ja <stub>` on JDK 17+, `mov <polling page>(%r15),%r10;
// test %eax,(%r10)` on JDK 11), before the `ret`. The frame is gone there and the return
// address is at sp. Others land in its prologue, which with -XX:+PreserveFramePointer ends
// with C2's `mov %rsp,%rbp; add $F-16,%rbp`. tests/tests/frame_edges.rs runs it.
//   java ReturnPoll <seconds>
public final class ReturnPoll {
    static volatile long sink;

    static long mix(long x, long y) {
        return (x ^ (y >>> 7)) * 0x9E3779B97F4A7C15L + y;
    }

    static long spin(long until) {
        long acc = 1;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 10_000; i++) acc = mix(acc, i);
        }
        return acc;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        Thread t = new Thread(() -> sink = spin(until), "returner");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        t.join();
    }
}
