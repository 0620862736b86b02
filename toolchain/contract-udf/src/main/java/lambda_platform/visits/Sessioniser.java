package lambda_platform.visits;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The one sessionisation of both layers (views/sessions.py documents the definition and calls
 * this): the visit summaries of each group (the {@code by} columns plus the visitor-day: site,
 * visitor_id, day) ordered by first view (time, then event id) and merged wherever one starts at
 * most the gap after the latest end before it.
 *
 * <p>Without a sort or window operators: every row of a group must already be in one partition
 * (the caller's exchange), and each task keeps, per group, the few narrow summaries of its
 * partition in a hash map, then orders and merges each group when its input ends. A visitor-day
 * holds a handful of views, so ordering it is cheap; the rows themselves are never sorted.
 *
 * <p>The result has a {@code _visit} column: a visit (s_ts, s_id, e_ts, e_id, first, last, n,
 * tainted and, when the input has them, p_lo/p_hi) on one extra row per visit whose group columns
 * are set and every other column null; with {@code passThrough} every input row comes out too
 * (its {@code _visit} null), so the caller counts page views from the same scan.
 */
public final class Sessioniser implements MapPartitionsFunction<Row, Row> {
  private static final long serialVersionUID = 1L;

  /** The column the visits come in. */
  public static final String VISIT = "_visit";

  private final int[] group;
  private final int sTs, sId, eTs, eId, first, last, n, tainted, pLo, pHi;
  private final int width;
  private final long gapUs;
  private final boolean passThrough;

  private Sessioniser(StructType in, List<String> by, long gapUs, boolean passThrough) {
    List<String> keys = new ArrayList<>(by);
    keys.addAll(List.of("site", "visitor_id", "day"));
    this.group = keys.stream().mapToInt(in::fieldIndex).toArray();
    this.sTs = in.fieldIndex("s_ts");
    this.sId = in.fieldIndex("s_id");
    this.eTs = in.fieldIndex("e_ts");
    this.eId = in.fieldIndex("e_id");
    this.first = in.fieldIndex("first");
    this.last = in.fieldIndex("last");
    this.n = in.fieldIndex("n");
    this.tainted = in.fieldIndex("tainted");
    boolean partitions = Arrays.asList(in.fieldNames()).contains("p_lo");
    this.pLo = partitions ? in.fieldIndex("p_lo") : -1;
    this.pHi = partitions ? in.fieldIndex("p_hi") : -1;
    this.width = passThrough ? in.size() : group.length;
    this.gapUs = gapUs;
    this.passThrough = passThrough;
  }

  /**
   * {@code summaries} sessionised per ({@code by}..., site, visitor_id, day): the visit rows (the
   * group columns and {@code _visit}), after every input row unchanged with {@code _visit} null if
   * {@code passThrough}. The rows of a group must be in one partition.
   */
  public static Dataset<Row> sessionise(
      Dataset<Row> summaries, List<String> by, long gapUs, boolean passThrough) {
    StructType in = summaries.schema();
    Sessioniser f = new Sessioniser(in, by, gapUs, passThrough);
    StructType visit =
        new StructType()
            .add("s_ts", DataTypes.LongType)
            .add("s_id", DataTypes.StringType)
            .add("e_ts", DataTypes.LongType)
            .add("e_id", DataTypes.StringType)
            .add("first", in.fields()[f.first].dataType())
            .add("last", in.fields()[f.last].dataType())
            .add("n", DataTypes.LongType)
            .add("tainted", DataTypes.BooleanType);
    if (f.pLo >= 0) {
      visit = visit.add("p_lo", in.fields()[f.pLo].dataType()).add("p_hi", in.fields()[f.pHi].dataType());
    }
    StructField[] fields;
    if (passThrough) {
      fields = Arrays.copyOf(in.fields(), in.size());
      for (int i = 0; i < fields.length; i++) {
        fields[i] = fields[i].copy(fields[i].name(), fields[i].dataType(), true, fields[i].metadata());
      }
    } else {
      fields = Arrays.stream(f.group).mapToObj(i -> in.fields()[i]).toArray(StructField[]::new);
    }
    StructType out = new StructType(fields).add(VISIT, visit, true);
    return summaries.mapPartitions(f, Encoders.row(out));
  }

  @Override
  public Iterator<Row> call(Iterator<Row> input) {
    return new Rows(input);
  }

  /** The input rows (with passThrough), then the visits of every group the input held. */
  private final class Rows implements Iterator<Row> {
    private final Iterator<Row> input;
    private final Map<List<Object>, List<Summary>> groups = new HashMap<>();
    private Iterator<Map.Entry<List<Object>, List<Summary>>> pending;
    private final List<Row> ready = new ArrayList<>();
    private int readyAt;

    Rows(Iterator<Row> input) {
      this.input = input;
    }

    @Override
    public boolean hasNext() {
      while (true) {
        if (readyAt < ready.size()) {
          return true;
        }
        if (pending == null) {
          if (input.hasNext()) {
            if (passThrough) {
              return true;
            }
            take(input.next());
            continue;
          }
          pending = groups.entrySet().iterator();
        }
        if (!pending.hasNext()) {
          return false;
        }
        ready.clear();
        readyAt = 0;
        Map.Entry<List<Object>, List<Summary>> g = pending.next();
        pending.remove(); // let go of each group's summaries once its visits are out
        for (Summary v : merge(g.getValue(), gapUs)) {
          ready.add(visitRow(g.getKey(), v));
        }
      }
    }

    @Override
    public Row next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      if (readyAt < ready.size()) {
        Row r = ready.get(readyAt);
        ready.set(readyAt++, null);
        return r;
      }
      Row row = input.next();
      take(row);
      Object[] values = new Object[width + 1];
      for (int i = 0; i < width; i++) {
        values[i] = row.get(i);
      }
      return RowFactory.create(values);
    }

    private void take(Row row) {
      Object[] key = new Object[group.length];
      for (int i = 0; i < group.length; i++) {
        key[i] = row.get(group[i]);
      }
      groups.computeIfAbsent(Arrays.asList(key), k -> new ArrayList<>(4)).add(summary(row));
    }
  }

  private Summary summary(Row row) {
    if (row.isNullAt(sTs) || row.isNullAt(eTs)) {
      throw new IllegalArgumentException("a visit summary without its first or last view's time: " + row);
    }
    return new Summary(
        row.getLong(sTs),
        row.getString(sId),
        row.getLong(eTs),
        row.getString(eId),
        row.getStruct(first),
        row.getStruct(last),
        row.isNullAt(n) ? 0L : row.getLong(n),
        !row.isNullAt(tainted) && row.getBoolean(tainted),
        pLo >= 0 ? (Integer) row.get(pLo) : null,
        pHi >= 0 ? (Integer) row.get(pHi) : null);
  }

  private Row visitRow(List<Object> key, Summary v) {
    Object[] visit =
        pLo >= 0
            ? new Object[] {v.sTs, v.sId, v.eTs, v.eId, v.first, v.last, v.n, v.tainted, v.pLo, v.pHi}
            : new Object[] {v.sTs, v.sId, v.eTs, v.eId, v.first, v.last, v.n, v.tainted};
    Object[] values = new Object[width + 1];
    for (int i = 0; i < group.length; i++) {
      values[passThrough ? group[i] : i] = key.get(i);
    }
    values[width] = RowFactory.create(visit);
    return RowFactory.create(values);
  }

  /**
   * The visits of one group's summaries (which it reorders): by first view (time, then id), a new
   * visit wherever a summary starts more than {@code gapUs} after the latest end before it. A
   * visit's end (time, id, last keys) is the greatest of its summaries'; its views and taint add
   * up; its p_lo/p_hi are the lowest and highest partition of the group's summaries up to its
   * own last in that order (the group's so far: a group with views from two partitions is
   * doubtful as a whole).
   */
  public static List<Summary> merge(List<Summary> summaries, long gapUs) {
    summaries.sort(Summary.BY_START);
    List<Summary> visits = new ArrayList<>();
    Summary open = null;
    long latestEnd = Long.MIN_VALUE;
    Integer lo = null;
    Integer hi = null;
    for (Summary s : summaries) {
      boolean starts = open == null || s.sTs - latestEnd > gapUs;
      if (starts) {
        if (open != null) {
          visits.add(open.withPartitions(lo, hi));
        }
        open = new Summary(s.sTs, s.sId, s.eTs, s.eId, s.first, s.last, s.n, s.tainted, null, null);
      } else {
        open.extend(s);
      }
      latestEnd = Math.max(latestEnd, s.eTs);
      if (s.pLo != null && (lo == null || s.pLo < lo)) {
        lo = s.pLo;
      }
      if (s.pHi != null && (hi == null || s.pHi > hi)) {
        hi = s.pHi;
      }
    }
    if (open != null) {
      visits.add(open.withPartitions(lo, hi));
    }
    return visits;
  }
}
