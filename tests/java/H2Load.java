import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;

/**
 * H2 (Debian's libh2-java, on the classpath at run time only: JDBC needs no compile-time
 * dependency) under two JDBC threads for SECONDS: an in-memory table that both threads insert
 * into, query by range and update. Prints "ready" once the table exists.
 */
public class H2Load {
    static final String URL = "jdbc:h2:mem:load;DB_CLOSE_DELAY=-1";

    public static void main(String[] args) throws Exception {
        long seconds = Long.parseLong(args[0]);
        try (Connection c = DriverManager.getConnection(URL); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE item(id INT PRIMARY KEY, owner INT, name VARCHAR(64), price DOUBLE)");
            s.execute("CREATE INDEX item_owner ON item(owner)");
        }
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        Thread[] workers = new Thread[2];
        for (int w = 0; w < workers.length; w++) {
            int base = w * 1_000_000;
            workers[w] = new Thread(() -> work(base, end), "jdbc-" + w);
            workers[w].start();
        }
        System.out.println("ready");
        for (Thread t : workers) {
            t.join();
        }
    }

    static void work(int base, long endNs) {
        try (Connection c = DriverManager.getConnection(URL);
                PreparedStatement insert = c.prepareStatement("INSERT INTO item VALUES(?, ?, ?, ?)");
                PreparedStatement query = c.prepareStatement(
                        "SELECT owner, COUNT(*), SUM(price) FROM item WHERE id BETWEEN ? AND ? GROUP BY owner");
                PreparedStatement update = c.prepareStatement("UPDATE item SET price = price * 1.01 WHERE id = ?");
                PreparedStatement delete = c.prepareStatement("DELETE FROM item WHERE id BETWEEN ? AND ?")) {
            long sink = 0;
            for (int i = 0; System.nanoTime() < endNs; i++) {
                int id = base + i;
                insert.setInt(1, id);
                insert.setInt(2, i % 97);
                insert.setString(3, "item-" + i);
                insert.setDouble(4, i * 0.5);
                insert.executeUpdate();
                query.setInt(1, Math.max(base, id - 200));
                query.setInt(2, id);
                try (ResultSet rs = query.executeQuery()) {
                    while (rs.next()) {
                        sink += rs.getLong(2);
                    }
                }
                update.setInt(1, base + (i * 7) % (i + 1));
                update.executeUpdate();
                // Keeps the table bounded: the oldest rows of this thread go.
                if (i % 5_000 == 4_999) {
                    delete.setInt(1, base);
                    delete.setInt(2, id - 2_000);
                    delete.executeUpdate();
                }
            }
            if (sink == 42) {
                System.out.println(sink);
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
