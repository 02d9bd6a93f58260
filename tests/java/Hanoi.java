// Experiment workload (docs/experiments.md): the Towers of Hanoi of the E-Surgeon papers,
// recursive, each move written to a file through a BufferedWriter.
//   java Hanoi <disks> [file] [repeats]
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;

public final class Hanoi {
    static long moves;

    static void moveDisk(BufferedWriter out, int disk, char from, char to) throws IOException {
        moves++;
        out.write("move disk " + disk + " from " + from + " to " + to);
        out.newLine();
    }

    static void solveHanoi(BufferedWriter out, int disks, char from, char to, char via) throws IOException {
        if (disks == 0) return;
        solveHanoi(out, disks - 1, from, via, to);
        moveDisk(out, disks, from, to);
        solveHanoi(out, disks - 1, via, to, from);
    }

    public static void main(String[] args) throws IOException {
        int disks = Integer.parseInt(args[0]);
        String file = args.length > 1 ? args[1] : "hanoi-moves.txt";
        int repeats = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        for (int r = 0; r < repeats; r++) {
            try (BufferedWriter out = new BufferedWriter(new FileWriter(file))) {
                solveHanoi(out, disks, 'A', 'C', 'B');
            }
        }
        System.out.println(moves + " moves");
    }
}
