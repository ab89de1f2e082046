package io.spillway.sparktest;

import io.trino.tpcds.Session;
import io.trino.tpcds.TableGenerator;
import io.trino.tpcds.column.ColumnType;
import io.trino.tpch.TpchColumn;
import io.trino.tpch.TpchEntity;
import io.trino.tpch.TpchTable;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

/**
 * Writes a TPC suite's tables as pipe-separated text with the generators from Maven Central
 * ({@code io.trino.tpch:tpch}, {@code io.trino.tpcds:tpcds}), in parallel chunks, plus
 * {@code schema.ddl}: one line per table, {@code name TAB spark-ddl}, with the column types the
 * generator declares. {@link TpcQueries} turns the text into Parquet.
 *
 * <p>Runs in its own JVM, on {@code tpcgen/} only: the generators need a newer Guava than the
 * one Spark puts on its class path.
 *
 * <pre>
 *   TpcGen tpch|tpcds SCALE DIR [THREADS]
 * </pre>
 *
 * <p>TPC-H: DIR/table/part-N.tbl. TPC-DS: DIR/parent/table[_chunk_chunks].dat (a returns table is
 * written with its sales table, as dsdgen does).
 */
public final class TpcGen {

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: TpcGen tpch|tpcds SCALE DIR [THREADS]");
      System.exit(2);
    }
    String suite = args[0];
    double scale = Double.parseDouble(args[1]);
    Path dir = Paths.get(args[2]);
    int threads = args.length > 3 ? Integer.parseInt(args[3]) : 2;
    long t0 = System.nanoTime();
    Files.createDirectories(dir);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<?>> work = new ArrayList<>();
    List<String> ddl = new ArrayList<>();
    // Chunks of about 100 MB of text, so every thread stays busy on the large tables.
    int chunks = Math.max(1, (int) Math.ceil(scale * 8));
    if (suite.equals("tpch")) {
      for (TpchTable<?> t : TpchTable.getTables()) {
        ddl.add(t.getTableName() + "\t" + t.getColumns().stream().map(c -> c.getColumnName() + " " + tpchType(c)).collect(Collectors.joining(", ")));
        boolean tiny = t.getTableName().equals("nation") || t.getTableName().equals("region");
        int parts = tiny ? 1 : chunks;
        for (int p = 1; p <= parts; p++) {
          final int part = p;
          work.add(pool.submit(() -> writeTpch(t, scale, part, parts, dir)));
        }
      }
    } else if (suite.equals("tpcds")) {
      for (io.trino.tpcds.Table t : io.trino.tpcds.Table.getBaseTables()) {
        if (t.getName().equals("dbgen_version")) {
          continue;
        }
        String parent = (t.isChild() ? t.getParent() : t).getName();
        ddl.add(t.getName() + "\t" + parent + "\t" + java.util.Arrays.stream(t.getColumns()).map(c -> sparkName(c.getName()) + " " + tpcdsType(c.getType())).collect(Collectors.joining(", ")));
        if (t.isChild()) {
          continue;
        }
        int parts = t.isSmall() ? 1 : chunks;
        for (int p = 1; p <= parts; p++) {
          final int chunk = p;
          work.add(
              pool.submit(
                  () -> {
                    Path out = dir.resolve(t.getName());
                    Files.createDirectories(out);
                    // scale, target, suffix, only-table, null string, separator,
                    // do-not-terminate, no-sexism, parallelism, chunk, overwrite
                    Session s = new Session(scale, out.toString(), ".dat", Optional.empty(), "", '|', true, false, parts, chunk, true);
                    new TableGenerator(s).generateTable(t);
                    return null;
                  }));
        }
      }
    } else {
      System.err.println("TpcGen: unknown suite " + suite);
      System.exit(2);
    }
    pool.shutdown();
    for (Future<?> f : work) {
      f.get();
    }
    Files.write(dir.resolve("schema.ddl"), ddl, StandardCharsets.UTF_8);
    System.out.printf(Locale.ROOT, "TEXT %s sf%s in %.1f s%n", suite, scale, (System.nanoTime() - t0) / 1e9);
  }

  /**
   * The column names of Spark's TPC-DS texts (the v1.4 queries and Spark's schema), where the
   * generator follows the later specification.
   */
  static String sparkName(String column) {
    return column.equals("c_last_review_date_sk") ? "c_last_review_date" : column;
  }

  /** Money and quantities are exact decimals, as the TPC-H specification asks ("decimal"). */
  static String tpchType(TpchColumn<?> c) {
    switch (c.getType().getBase()) {
      case INTEGER:
        return "INT";
      case IDENTIFIER:
        return "BIGINT";
      case DATE:
        return "DATE";
      case DOUBLE:
        return "DECIMAL(15,2)";
      default:
        return "STRING";
    }
  }

  /** CHAR and VARCHAR become STRING: both runs read the same data, so the choice is theirs. */
  static String tpcdsType(ColumnType t) {
    switch (t.getBase()) {
      case INTEGER:
        return "INT";
      case IDENTIFIER:
        return "BIGINT";
      case DATE:
        return "DATE";
      case DECIMAL:
        return "DECIMAL(" + t.getPrecision().orElse(7) + "," + t.getScale().orElse(2) + ")";
      default:
        return "STRING";
    }
  }

  static Void writeTpch(TpchTable<?> t, double scale, int part, int parts, Path dir) throws IOException {
    Path out = dir.resolve(t.getTableName());
    Files.createDirectories(out);
    try (BufferedWriter w = Files.newBufferedWriter(out.resolve("part-" + part + ".tbl"), StandardCharsets.UTF_8)) {
      for (TpchEntity e : t.createGenerator(scale, part, parts)) {
        String line = e.toLine();
        // dbgen's lines end in the separator; Spark would read it as one more column.
        w.write(line, 0, line.endsWith("|") ? line.length() - 1 : line.length());
        w.write('\n');
      }
    }
    return null;
  }
}
