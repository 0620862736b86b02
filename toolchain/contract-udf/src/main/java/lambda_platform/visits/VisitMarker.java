package lambda_platform.visits;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import lambda_platform.dedup.DedupStates;
import lambda_platform.dedup.RangeState;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.reflect.ClassTag;

/**
 * The speed layer's visits, in the scan (speed_layer/visits.py): {@link #signed} reads every record
 * of the micro-batch, in offset order per partition, as (whether the record is a counted page view,
 * partition, offset, day as days since the epoch, site, visitor id, time in microseconds, event id,
 * the first view's keys, the last view's keys), merges each counted page view into its
 * partition's visit state, and once its task has read them all gives the net changes of every
 * active generation, rows of {@link #SIGNED}: -1 for each visit a generation's views replaced, +1
 * for each they made (another record only tells the state its range was read). Per visitor-day
 * that is what each view's own change (-1 for each visit it joins, +1 for the visit they become)
 * sums to, as one or two rows instead of two a view. {@link #entries} gives the same changes summed
 * in the task as the views' aggregation reads them (VisitEntries).
 *
 * <p>One instance per micro-batch: it knows the batch's range of every partition, the horizon's
 * cut-offs and, after a rebuild, the seeds. A task's first record of a partition checks that the
 * partition's state stands at the range's start (or at this same range: then the range is applied
 * again from the state before it); a state found elsewhere throws {@link VisitStateMissing}. The
 * records are read straight from Spark's internal rows (a function over a task's rows, not a UDF
 * per row): no row object is made per record, only its strings are read out.
 */
public final class VisitMarker implements Serializable {
  private static final long serialVersionUID = 1L;

  /** A change: the generation, the visitor-day, a visit (views/sessions.py's summary) and its sign. */
  public static final StructType SIGNED =
      new StructType(
          new StructField[] {
            DataTypes.createStructField("gen", DataTypes.IntegerType, false),
            DataTypes.createStructField("site", DataTypes.StringType, false),
            DataTypes.createStructField("visitor_id", DataTypes.StringType, false),
            DataTypes.createStructField("day", DataTypes.DateType, false),
            DataTypes.createStructField("s_ts", DataTypes.LongType, false),
            DataTypes.createStructField("s_id", DataTypes.StringType, true),
            DataTypes.createStructField("e_ts", DataTypes.LongType, false),
            DataTypes.createStructField("e_id", DataTypes.StringType, true),
            DataTypes.createStructField(
                "first", DataTypes.createArrayType(DataTypes.StringType, true), false),
            DataTypes.createStructField(
                "last", DataTypes.createArrayType(DataTypes.StringType, true), false),
            DataTypes.createStructField("n", DataTypes.LongType, false),
            DataTypes.createStructField("tainted", DataTypes.BooleanType, false),
            DataTypes.createStructField("p_lo", DataTypes.IntegerType, false),
            DataTypes.createStructField("p_hi", DataTypes.IntegerType, false),
            DataTypes.createStructField("sign", DataTypes.IntegerType, false),
          });

  private final String namespace;
  private final Map<Integer, long[]> ranges;
  private final long droppedBeforeUs;
  private final long lateBeforeUs;
  private final long gapUs;
  private VisitSeed seed;

  /**
   * @param ranges "p:start:end,..." the micro-batch's offsets per partition
   * @param droppedBeforeUs every visit let go of ended before it: later ones leave on touch
   * @param lateBeforeUs a view before it may belong to a visit let go of (its visit is tainted)
   */
  public VisitMarker(
      String namespace, String ranges, long droppedBeforeUs, long lateBeforeUs, long gapS) {
    this.namespace = namespace;
    this.ranges = DedupStates.parse(ranges);
    this.droppedBeforeUs = droppedBeforeUs;
    this.lateBeforeUs = lateBeforeUs;
    this.gapUs = gapS * 1_000_000L;
  }

  /** After a rebuild: the states the partitions start from where they stand at the seed's offset. */
  public void seed(VisitSeed seed) {
    this.seed = seed;
  }

  static String visitorKey(String site, String visitor) {
    return site + '\u0000' + visitor;
  }

  static Map<Integer, Long> parseOffsets(String spec) {
    Map<Integer, Long> out = new HashMap<>();
    for (String part : spec == null || spec.isEmpty() ? new String[0] : spec.split(",")) {
      String[] f = part.split(":");
      out.put(Integer.parseInt(f[0]), Long.parseLong(f[1]));
    }
    return out;
  }

  /**
   * The net changes (rows of {@link #SIGNED}) of {@code records}' counted page views for the
   * generations {@code cuts}: "gen=p:offset;p:offset|gen=..." (a partition absent from a cut starts
   * at 0; none: the changes are only applied, as a rebuild's replay does). {@code records}' columns
   * are the ten {@link VisitMarker} reads, in its order.
   */
  public Dataset<Row> signed(Dataset<Row> records, String cuts) {
    return run(records, cuts, SIGNED, SignedRows::new);
  }

  /**
   * The same changes summed per task as the views' aggregation reads them (rows of {@link
   * VisitEntries#ENTRY}): each visit under its first view's key of the dimensions {@code
   * firstViews} and its last view's of {@code lastViews} (indices of the declared dimensions, in
   * the order of the records' key arrays), with the flag rows.
   */
  public Dataset<Row> entries(Dataset<Row> records, String cuts, int[] firstViews, int[] lastViews) {
    return run(records, cuts, VisitEntries.ENTRY, g -> new VisitEntries(g, firstViews, lastViews));
  }

  /** What a task's changes become: its rows, once the task has read its records. */
  interface Sink extends PartitionVisits.Changes {
    List<InternalRow> rows();
  }

  /** A sink per task, for the generations (in the order of the changes' generation index). */
  interface Sinks extends Serializable {
    Sink of(int[] generations);
  }

  private Dataset<Row> run(Dataset<Row> records, String cuts, StructType schema, Sinks sinks) {
    int[] generations = parseGenerations(cuts);
    Map<Integer, Map<Integer, Long>> cutOffsets = parseCuts(cuts);
    ClassTag<InternalRow> tag = scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class);
    JavaRDD<InternalRow> rows = new JavaRDD<>(records.queryExecution().toRdd(), tag);
    JavaRDD<InternalRow> changes =
        rows.mapPartitions(
            it -> apply(it, generations, cutOffsets, sinks.of(generations)).iterator());
    SparkSession session = records.sparkSession();
    return session.internalCreateDataFrame(changes.rdd(), schema, false);
  }

  /** One task's records: merged into their partitions' states, then the states' net changes. */
  private List<InternalRow> apply(
      Iterator<InternalRow> records,
      int[] generations,
      Map<Integer, Map<Integer, Long>> cuts,
      Sink sink) {
    long attempt = DedupStates.attempt();
    Map<Integer, PartitionVisits> read = new HashMap<>();
    int partition = Integer.MIN_VALUE;
    PartitionVisits state = null;
    List<PartitionVisits> others = null;
    long[] from = null;
    boolean[] counts = new boolean[generations.length];
    while (records.hasNext()) {
      InternalRow r = records.next();
      int p = r.getInt(1);
      if (p != partition || state == null) {
        partition = p;
        state = read.get(p);
        if (state == null) {
          state = take(p, attempt);
          read.put(p, state);
        }
        others = VisitStates.of(namespace);
        from = new long[generations.length];
        for (int g = 0; g < generations.length; g++) {
          from[g] = cuts.get(generations[g]).getOrDefault(p, 0L);
        }
      }
      if (r.isNullAt(0) || !r.getBoolean(0)) {
        continue;
      }
      long offset = r.getLong(2);
      for (int g = 0; g < generations.length; g++) {
        counts[g] = offset >= from[g];
      }
      String key = visitorKey(r.getUTF8String(4).toString(), r.getUTF8String(5).toString());
      synchronized (state) {
        state.merge(
            r.getInt(3),
            key,
            r.getLong(6),
            r.getUTF8String(7).toString(),
            strings(r.getArray(8)),
            strings(r.getArray(9)),
            counts,
            droppedBeforeUs,
            lateBeforeUs,
            gapUs,
            others);
      }
    }
    for (PartitionVisits s : read.values()) {
      synchronized (s) {
        s.changes(generations.length, droppedBeforeUs, sink);
      }
    }
    return sink.rows();
  }

  /** The changes as they are: rows of {@link #SIGNED}. */
  private static final class SignedRows implements Sink {
    private final int[] generations;
    private final List<InternalRow> out = new ArrayList<>();

    SignedRows(int[] generations) {
      this.generations = generations;
    }

    @Override
    public void change(int generation, PartitionVisits.Entry e, Visit v, int sign) {
      out.add(row(generations[generation], e, v, sign));
    }

    @Override
    public List<InternalRow> rows() {
      return out;
    }
  }

  private static InternalRow row(int generation, PartitionVisits.Entry e, Visit v, int sign) {
    return new GenericInternalRow(
        new Object[] {
          generation,
          UTF8String.fromString(e.site()),
          UTF8String.fromString(e.visitor()),
          e.day,
          v.sTs,
          UTF8String.fromString(v.sId),
          v.eTs,
          UTF8String.fromString(v.eId),
          array(v.first),
          array(v.last),
          v.n,
          v.tainted,
          v.pLo,
          v.pHi,
          sign
        });
  }

  private static ArrayData array(String[] values) {
    Object[] out = new Object[values.length];
    for (int i = 0; i < out.length; i++) {
      out[i] = values[i] == null ? null : UTF8String.fromString(values[i]);
    }
    return new GenericArrayData(out);
  }

  private static String[] strings(ArrayData values) {
    String[] out = new String[values.numElements()];
    for (int i = 0; i < out.length; i++) {
      out[i] = values.isNullAt(i) ? null : values.getUTF8String(i).toString();
    }
    return out;
  }

  static int[] parseGenerations(String cuts) {
    return parseCuts(cuts).keySet().stream().mapToInt(Integer::intValue).sorted().toArray();
  }

  static Map<Integer, Map<Integer, Long>> parseCuts(String cuts) {
    Map<Integer, Map<Integer, Long>> out = new HashMap<>();
    for (String part : cuts == null || cuts.isEmpty() ? new String[0] : cuts.split("\\|")) {
      String[] f = part.split("=", 2);
      Map<Integer, Long> offsets = new HashMap<>();
      for (String po : f.length < 2 || f[1].isEmpty() ? new String[0] : f[1].split(";")) {
        String[] x = po.split(":");
        offsets.put(Integer.parseInt(x[0]), Long.parseLong(x[1]));
      }
      out.put(Integer.parseInt(f[0]), offsets);
    }
    return out;
  }

  private PartitionVisits take(int partition, long attempt) {
    long[] range = RangeState.rangeOf(ranges, partition);
    long start = range[0];
    long end = range[1];
    synchronized (VisitStates.class) {
      PartitionVisits state = VisitStates.get(namespace, partition);
      boolean again = state != null && state.holds(start, end);
      if (!again && (state == null || state.position != start)) {
        PartitionVisits seeded = seed == null ? null : seed.states.get(partition);
        if (seeded == null || seeded.position != start) {
          throw new VisitStateMissing(namespace, partition, start);
        }
        state = seeded;
        VisitStates.put(namespace, state);
        // The seed's other partitions too, where this JVM has no state of theirs: a partition
        // with no record in this range would otherwise find its state missing at the next one.
        for (PartitionVisits other : seed.states.values()) {
          if (VisitStates.get(namespace, other.partition) == null) {
            VisitStates.put(namespace, other);
          }
        }
      }
      PartitionVisits s = state;
      synchronized (s) {
        if (again) {
          s.undo();
        }
        s.begin(start, end, attempt, droppedBeforeUs);
      }
      s.advanceOnSuccess(attempt, end);
      return s;
    }
  }
}
