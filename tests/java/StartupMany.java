// Test fixture: a JVM whose first seconds load and run many classes. The main thread walks
// through 120 small classes (each loaded, initialized and run until C1 compiles it), 80
// lambdas (a hidden class each), a class hierarchy that grows while its call sites are compiled
// (each new subclass deoptimizes the nmethods that inlined the old single implementation), and,
// with "unload", copies of a class through their own loaders, collected with their code by a
// full GC every half second. Nothing warms up first: this is what a profiler attached at launch
// must name.
//   java StartupMany [seconds=3] [unload]
import java.io.InputStream;
import java.util.function.IntUnaryOperator;

public final class StartupMany {
    static volatile long sink;

    static final class Step0 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 0 + (x >>> 7); return x; } }
    static final class Step1 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 1 + (x >>> 7); return x; } }
    static final class Step2 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 2 + (x >>> 7); return x; } }
    static final class Step3 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 3 + (x >>> 7); return x; } }
    static final class Step4 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 4 + (x >>> 7); return x; } }
    static final class Step5 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 5 + (x >>> 7); return x; } }
    static final class Step6 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 6 + (x >>> 7); return x; } }
    static final class Step7 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 7 + (x >>> 7); return x; } }
    static final class Step8 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 8 + (x >>> 7); return x; } }
    static final class Step9 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 9 + (x >>> 7); return x; } }
    static final class Step10 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 10 + (x >>> 7); return x; } }
    static final class Step11 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 11 + (x >>> 7); return x; } }
    static final class Step12 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 12 + (x >>> 7); return x; } }
    static final class Step13 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 13 + (x >>> 7); return x; } }
    static final class Step14 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 14 + (x >>> 7); return x; } }
    static final class Step15 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 15 + (x >>> 7); return x; } }
    static final class Step16 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 16 + (x >>> 7); return x; } }
    static final class Step17 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 17 + (x >>> 7); return x; } }
    static final class Step18 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 18 + (x >>> 7); return x; } }
    static final class Step19 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 19 + (x >>> 7); return x; } }
    static final class Step20 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 20 + (x >>> 7); return x; } }
    static final class Step21 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 21 + (x >>> 7); return x; } }
    static final class Step22 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 22 + (x >>> 7); return x; } }
    static final class Step23 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 23 + (x >>> 7); return x; } }
    static final class Step24 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 24 + (x >>> 7); return x; } }
    static final class Step25 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 25 + (x >>> 7); return x; } }
    static final class Step26 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 26 + (x >>> 7); return x; } }
    static final class Step27 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 27 + (x >>> 7); return x; } }
    static final class Step28 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 28 + (x >>> 7); return x; } }
    static final class Step29 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 29 + (x >>> 7); return x; } }
    static final class Step30 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 30 + (x >>> 7); return x; } }
    static final class Step31 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 31 + (x >>> 7); return x; } }
    static final class Step32 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 32 + (x >>> 7); return x; } }
    static final class Step33 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 33 + (x >>> 7); return x; } }
    static final class Step34 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 34 + (x >>> 7); return x; } }
    static final class Step35 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 35 + (x >>> 7); return x; } }
    static final class Step36 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 36 + (x >>> 7); return x; } }
    static final class Step37 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 37 + (x >>> 7); return x; } }
    static final class Step38 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 38 + (x >>> 7); return x; } }
    static final class Step39 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 39 + (x >>> 7); return x; } }
    static final class Step40 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 40 + (x >>> 7); return x; } }
    static final class Step41 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 41 + (x >>> 7); return x; } }
    static final class Step42 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 42 + (x >>> 7); return x; } }
    static final class Step43 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 43 + (x >>> 7); return x; } }
    static final class Step44 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 44 + (x >>> 7); return x; } }
    static final class Step45 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 45 + (x >>> 7); return x; } }
    static final class Step46 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 46 + (x >>> 7); return x; } }
    static final class Step47 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 47 + (x >>> 7); return x; } }
    static final class Step48 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 48 + (x >>> 7); return x; } }
    static final class Step49 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 49 + (x >>> 7); return x; } }
    static final class Step50 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 50 + (x >>> 7); return x; } }
    static final class Step51 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 51 + (x >>> 7); return x; } }
    static final class Step52 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 52 + (x >>> 7); return x; } }
    static final class Step53 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 53 + (x >>> 7); return x; } }
    static final class Step54 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 54 + (x >>> 7); return x; } }
    static final class Step55 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 55 + (x >>> 7); return x; } }
    static final class Step56 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 56 + (x >>> 7); return x; } }
    static final class Step57 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 57 + (x >>> 7); return x; } }
    static final class Step58 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 58 + (x >>> 7); return x; } }
    static final class Step59 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 59 + (x >>> 7); return x; } }
    static final class Step60 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 60 + (x >>> 7); return x; } }
    static final class Step61 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 61 + (x >>> 7); return x; } }
    static final class Step62 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 62 + (x >>> 7); return x; } }
    static final class Step63 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 63 + (x >>> 7); return x; } }
    static final class Step64 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 64 + (x >>> 7); return x; } }
    static final class Step65 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 65 + (x >>> 7); return x; } }
    static final class Step66 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 66 + (x >>> 7); return x; } }
    static final class Step67 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 67 + (x >>> 7); return x; } }
    static final class Step68 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 68 + (x >>> 7); return x; } }
    static final class Step69 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 69 + (x >>> 7); return x; } }
    static final class Step70 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 70 + (x >>> 7); return x; } }
    static final class Step71 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 71 + (x >>> 7); return x; } }
    static final class Step72 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 72 + (x >>> 7); return x; } }
    static final class Step73 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 73 + (x >>> 7); return x; } }
    static final class Step74 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 74 + (x >>> 7); return x; } }
    static final class Step75 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 75 + (x >>> 7); return x; } }
    static final class Step76 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 76 + (x >>> 7); return x; } }
    static final class Step77 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 77 + (x >>> 7); return x; } }
    static final class Step78 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 78 + (x >>> 7); return x; } }
    static final class Step79 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 79 + (x >>> 7); return x; } }
    static final class Step80 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 80 + (x >>> 7); return x; } }
    static final class Step81 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 81 + (x >>> 7); return x; } }
    static final class Step82 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 82 + (x >>> 7); return x; } }
    static final class Step83 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 83 + (x >>> 7); return x; } }
    static final class Step84 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 84 + (x >>> 7); return x; } }
    static final class Step85 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 85 + (x >>> 7); return x; } }
    static final class Step86 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 86 + (x >>> 7); return x; } }
    static final class Step87 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 87 + (x >>> 7); return x; } }
    static final class Step88 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 88 + (x >>> 7); return x; } }
    static final class Step89 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 89 + (x >>> 7); return x; } }
    static final class Step90 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 90 + (x >>> 7); return x; } }
    static final class Step91 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 91 + (x >>> 7); return x; } }
    static final class Step92 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 92 + (x >>> 7); return x; } }
    static final class Step93 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 93 + (x >>> 7); return x; } }
    static final class Step94 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 94 + (x >>> 7); return x; } }
    static final class Step95 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 95 + (x >>> 7); return x; } }
    static final class Step96 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 96 + (x >>> 7); return x; } }
    static final class Step97 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 97 + (x >>> 7); return x; } }
    static final class Step98 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 98 + (x >>> 7); return x; } }
    static final class Step99 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 99 + (x >>> 7); return x; } }
    static final class Step100 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 100 + (x >>> 7); return x; } }
    static final class Step101 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 101 + (x >>> 7); return x; } }
    static final class Step102 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 102 + (x >>> 7); return x; } }
    static final class Step103 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 103 + (x >>> 7); return x; } }
    static final class Step104 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 104 + (x >>> 7); return x; } }
    static final class Step105 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 105 + (x >>> 7); return x; } }
    static final class Step106 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 106 + (x >>> 7); return x; } }
    static final class Step107 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 107 + (x >>> 7); return x; } }
    static final class Step108 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 108 + (x >>> 7); return x; } }
    static final class Step109 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 109 + (x >>> 7); return x; } }
    static final class Step110 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 110 + (x >>> 7); return x; } }
    static final class Step111 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 111 + (x >>> 7); return x; } }
    static final class Step112 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 112 + (x >>> 7); return x; } }
    static final class Step113 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 113 + (x >>> 7); return x; } }
    static final class Step114 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 114 + (x >>> 7); return x; } }
    static final class Step115 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 115 + (x >>> 7); return x; } }
    static final class Step116 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 116 + (x >>> 7); return x; } }
    static final class Step117 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 117 + (x >>> 7); return x; } }
    static final class Step118 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 118 + (x >>> 7); return x; } }
    static final class Step119 implements IntUnaryOperator { public int applyAsInt(int x) { for (int i = 0; i < 40; i++) x = x * 31 + 119 + (x >>> 7); return x; } }

    static IntUnaryOperator[] steps() {
        return new IntUnaryOperator[] {
            new Step0(),
            new Step1(),
            new Step2(),
            new Step3(),
            new Step4(),
            new Step5(),
            new Step6(),
            new Step7(),
            new Step8(),
            new Step9(),
            new Step10(),
            new Step11(),
            new Step12(),
            new Step13(),
            new Step14(),
            new Step15(),
            new Step16(),
            new Step17(),
            new Step18(),
            new Step19(),
            new Step20(),
            new Step21(),
            new Step22(),
            new Step23(),
            new Step24(),
            new Step25(),
            new Step26(),
            new Step27(),
            new Step28(),
            new Step29(),
            new Step30(),
            new Step31(),
            new Step32(),
            new Step33(),
            new Step34(),
            new Step35(),
            new Step36(),
            new Step37(),
            new Step38(),
            new Step39(),
            new Step40(),
            new Step41(),
            new Step42(),
            new Step43(),
            new Step44(),
            new Step45(),
            new Step46(),
            new Step47(),
            new Step48(),
            new Step49(),
            new Step50(),
            new Step51(),
            new Step52(),
            new Step53(),
            new Step54(),
            new Step55(),
            new Step56(),
            new Step57(),
            new Step58(),
            new Step59(),
            new Step60(),
            new Step61(),
            new Step62(),
            new Step63(),
            new Step64(),
            new Step65(),
            new Step66(),
            new Step67(),
            new Step68(),
            new Step69(),
            new Step70(),
            new Step71(),
            new Step72(),
            new Step73(),
            new Step74(),
            new Step75(),
            new Step76(),
            new Step77(),
            new Step78(),
            new Step79(),
            new Step80(),
            new Step81(),
            new Step82(),
            new Step83(),
            new Step84(),
            new Step85(),
            new Step86(),
            new Step87(),
            new Step88(),
            new Step89(),
            new Step90(),
            new Step91(),
            new Step92(),
            new Step93(),
            new Step94(),
            new Step95(),
            new Step96(),
            new Step97(),
            new Step98(),
            new Step99(),
            new Step100(),
            new Step101(),
            new Step102(),
            new Step103(),
            new Step104(),
            new Step105(),
            new Step106(),
            new Step107(),
            new Step108(),
            new Step109(),
            new Step110(),
            new Step111(),
            new Step112(),
            new Step113(),
            new Step114(),
            new Step115(),
            new Step116(),
            new Step117(),
            new Step118(),
            new Step119(),
        };
    }

    static IntUnaryOperator[] lambdas() {
        return new IntUnaryOperator[] {
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 0 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 1 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 2 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 3 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 4 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 5 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 6 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 7 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 8 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 9 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 10 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 11 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 12 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 13 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 14 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 15 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 16 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 17 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 18 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 19 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 20 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 21 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 22 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 23 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 24 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 25 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 26 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 27 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 28 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 29 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 30 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 31 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 32 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 33 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 34 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 35 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 36 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 37 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 38 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 39 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 40 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 41 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 42 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 43 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 44 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 45 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 46 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 47 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 48 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 49 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 50 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 51 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 52 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 53 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 54 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 55 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 56 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 57 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 58 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 59 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 60 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 61 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 62 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 63 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 64 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 65 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 66 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 67 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 68 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 69 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 70 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 71 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 72 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 73 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 74 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 75 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 76 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 77 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 78 ^ (x >>> 5); return x; },
            x -> { for (int i = 0; i < 40; i++) x = x * 17 + 79 ^ (x >>> 5); return x; },
        };
    }

    /** A hierarchy that grows: each new subclass invalidates what C1/C2 compiled assuming fewer. */
    abstract static class Shape { abstract int area(int x); }
    static final class Square extends Shape { int area(int x) { return x * x; } }
    static final class Circle extends Shape { int area(int x) { return 3 * x * x; } }
    static final class Triangle extends Shape { int area(int x) { return x * x / 2; } }
    static final class Hexagon extends Shape { int area(int x) { return 6 * x * x / 4; } }

    static long sumAreas(Shape s, int n) {
        long total = 0;
        for (int i = 0; i < n; i++) total += s.area(i);
        return total;
    }

    public static final class Template implements IntUnaryOperator {
        @Override
        public int applyAsInt(int x) {
            for (int i = 0; i < 400; i++) x = x * 1103515245 + 12345 + (x >>> 11);
            return x;
        }
    }

    /** Defines Template from its class file bytes, without asking the parent first. */
    static final class OneShotLoader extends ClassLoader {
        private final byte[] bytes;

        OneShotLoader(byte[] bytes) {
            super(StartupMany.class.getClassLoader());
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

    static long run(IntUnaryOperator op, int calls) {
        long acc = 0;
        for (int i = 0; i < calls; i++) acc += op.applyAsInt(i);
        return acc;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        boolean unload = args.length > 1 && args[1].equals("unload");
        long end = System.nanoTime() + (long) (seconds * 1e9);
        byte[] bytes;
        try (InputStream in = StartupMany.class.getResourceAsStream("StartupMany$Template.class")) {
            bytes = in.readAllBytes();
        }
        Shape[] shapes = {new Square(), new Circle(), new Triangle(), new Hexagon()};
        IntUnaryOperator[] steps = steps();
        IntUnaryOperator[] lambdas = lambdas();
        int round = 0;
        long nextGc = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() < end) {
            // Each class and lambda once the first round (loaded, run, compiled), then again.
            for (IntUnaryOperator op : steps) sink += run(op, 300);
            for (IntUnaryOperator op : lambdas) sink += run(op, 300);
            // Square alone at first; the others join one by one, deoptimizing sumAreas.
            for (int k = 0; k <= Math.min(round, shapes.length - 1); k++) sink += sumAreas(shapes[k], 20_000);
            if (!unload) {
                round++;
                continue;
            }
            // A copy of Template in its own loader, run until compiled, then left to the GC.
            ClassLoader loader = new OneShotLoader(bytes);
            IntUnaryOperator t = (IntUnaryOperator) loader.loadClass(Template.class.getName())
                .getDeclaredConstructor().newInstance();
            sink += run(t, 2000);
            if (System.nanoTime() >= nextGc) {
                System.gc();
                nextGc += 500_000_000L;
            }
            round++;
        }
        System.out.println("rounds " + round);
    }
}
