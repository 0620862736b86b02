package lambda_platform.visits;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One task's visit changes summed as the views' aggregation reads them (views/sessions.py,
 * visit_entries): per (generation, dimension, key, day, level) the visits, bounces, duration in
 * milliseconds and page views of every change, times its sign. Each visit counts under its first
 * view's key of the dimensions {@code firstViews} and its last view's of {@code lastViews}, at its
 * first view's UTC hour and at the day level. A change that a view retracts and remakes under the
 * same keys mostly cancels out here, so the aggregation after reads a row per bucket and task.
 *
 * <p>The (generation, site, day) of every visit made that may not be exact (a view later than the
 * state's horizon, a visitor-day seen on two partitions) comes out as a row of its own: dimension
 * {@link #FLAG}, the site as its key.
 */
final class VisitEntries implements VisitMarker.Sink {
  /** The dimension of the rows that flag a (generation, site, day). */
  static final int FLAG = -1;

  private static final long HOUR_US = 3_600_000_000L;
  private static final int DAY_LEVEL = 24;

  /** A row: generation, dimension, key, day, level, then n (0: no page view), vi, bo, du, vv. */
  static final StructType ENTRY =
      new StructType(
          new StructField[] {
            DataTypes.createStructField("gen", DataTypes.IntegerType, false),
            DataTypes.createStructField("v", DataTypes.IntegerType, false),
            DataTypes.createStructField("key", DataTypes.StringType, true),
            DataTypes.createStructField("day", DataTypes.DateType, false),
            DataTypes.createStructField("level", DataTypes.IntegerType, false),
            DataTypes.createStructField("n", DataTypes.LongType, false),
            DataTypes.createStructField("vi", DataTypes.LongType, false),
            DataTypes.createStructField("bo", DataTypes.LongType, false),
            DataTypes.createStructField("du", DataTypes.LongType, false),
            DataTypes.createStructField("vv", DataTypes.LongType, false),
          });

  private static final class Bucket {
    final int gen;
    final int v;
    final String key;
    final int day;
    final int level;

    Bucket(int gen, int v, String key, int day, int level) {
      this.gen = gen;
      this.v = v;
      this.key = key;
      this.day = day;
      this.level = level;
    }

    @Override
    public int hashCode() {
      return (((gen * 31 + v) * 31 + Objects.hashCode(key)) * 31 + day) * 31 + level;
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof Bucket)) {
        return false;
      }
      Bucket b = (Bucket) o;
      return gen == b.gen
          && v == b.v
          && day == b.day
          && level == b.level
          && Objects.equals(key, b.key);
    }
  }

  private final int[] generations;
  private final int[] firstViews;
  private final int[] lastViews;
  private final Map<Bucket, long[]> sums = new HashMap<>();
  private final Set<Bucket> flags = new HashSet<>();

  VisitEntries(int[] generations, int[] firstViews, int[] lastViews) {
    this.generations = generations;
    this.firstViews = firstViews;
    this.lastViews = lastViews;
  }

  @Override
  public void change(int generation, PartitionVisits.Entry entry, Visit visit, int sign) {
    int gen = generations[generation];
    if (sign > 0 && (visit.tainted || visit.pLo != visit.pHi)) {
      flags.add(new Bucket(gen, FLAG, entry.site(), entry.day, 0));
    }
    long bounce = visit.n == 1 ? sign : 0;
    long duration = Math.floorDiv(visit.eTs - visit.sTs, 1000L) * sign;
    long views = visit.n * sign;
    int hour = (int) Math.floorMod(Math.floorDiv(visit.sTs, HOUR_US), 24L);
    for (int level : new int[] {hour, DAY_LEVEL}) {
      for (int k = 0; k < firstViews.length; k++) {
        add(new Bucket(gen, firstViews[k], visit.first[k], entry.day, level), sign, bounce, duration, views);
      }
      for (int k = 0; k < lastViews.length; k++) {
        add(new Bucket(gen, lastViews[k], visit.last[k], entry.day, level), sign, bounce, duration, views);
      }
    }
  }

  private void add(Bucket b, long visits, long bounces, long duration, long views) {
    long[] m = sums.get(b);
    if (m == null) {
      m = new long[4];
      sums.put(b, m);
    }
    m[0] += visits;
    m[1] += bounces;
    m[2] += duration;
    m[3] += views;
  }

  /** The rows: each bucket's sums (those that cancelled out to zero too: a day whose visits moved
   * between hours still needs its day's row), then the flags. */
  @Override
  public List<InternalRow> rows() {
    List<InternalRow> out = new ArrayList<>(sums.size() + flags.size());
    for (Map.Entry<Bucket, long[]> e : sums.entrySet()) {
      out.add(row(e.getKey(), e.getValue()));
    }
    for (Bucket b : flags) {
      out.add(row(b, new long[4]));
    }
    return out;
  }

  private static InternalRow row(Bucket b, long[] m) {
    return new GenericInternalRow(
        new Object[] {
          b.gen,
          b.v,
          b.key == null ? null : UTF8String.fromString(b.key),
          b.day,
          b.level,
          0L,
          m[0],
          m[1],
          m[2],
          m[3]
        });
  }
}
