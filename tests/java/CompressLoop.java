// Test fixture: one thread ("compressor") builds Strings from char arrays of Latin-1 text,
// so its CPU time is in C2's StringUTF16.compress intrinsic (MacroAssembler::
// char_array_compress), inlined into build(), which pushes a word in the middle of the
// compiled code it is inlined into and pops it before the end: a sample there has sp one
// word below the frame's base. Run with -XX:CompileCommand=dontinline,CompressLoop::* so
// build() and spin() stay frames of their own.
//   java CompressLoop <seconds>
public final class CompressLoop {
    static volatile long sink;

    static int build(char[] text) {
        return new String(text).hashCode() & 1;
    }

    static long spin(char[] text, long until) {
        long acc = 0;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 1000; i++) acc += build(text);
        }
        return acc;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        long until = System.nanoTime() + (long) (seconds * 1e9);
        char[] text = new char[4096];
        for (int i = 0; i < text.length; i++) text[i] = (char) ('a' + i % 26);
        Thread t = new Thread(() -> sink = spin(text, until), "compressor");
        t.start();
        System.out.println("ready " + ProcessHandle.current().pid());
        t.join();
    }
}
