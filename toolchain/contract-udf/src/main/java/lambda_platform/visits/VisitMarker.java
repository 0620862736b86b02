package lambda_platform.visits;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import lambda_platform.dedup.DedupStates;
import lambda_platform.dedup.RangeState;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF9;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.Seq;

/**
 * The speed layer's visits, in the scan (speed_layer/visits.py): (whether the record is a counted
 * page view, partition, day as days since the epoch, site, visitor id, time in microseconds, event
 * id, the first view's keys, the last view's keys) of every record of the micro-batch, in offset
 * order per partition, -> the changes a counted page view makes to its visitor-day's visits, rows
 * of {@link #CHANGE} (none for another record: it only tells the state its range was read). The layer registers it nondeterministic, so the
 * optimizer neither moves nor repeats it.
 *
 * <p>One instance per micro-batch: it knows the batch's range of every partition, the horizon's
 * cut-offs and, after a rebuild, the seeds. The first row of a task checks that its partition's
 * state stands at the range's start (or at this same range: then the range is applied again from
 * the state before it); a state found elsewhere throws {@link VisitStateMissing}.
 */
public final class VisitMarker
    implements UDF9<
        Boolean, Integer, Integer, String, String, Long, String, Seq<String>, Seq<String>, Row[]> {
  private static final long serialVersionUID = 1L;
  private static final Row[] NO_CHANGE = new Row[0];

  /** A change: a visit (views/sessions.py's summary) with its sign. */
  public static final StructType CHANGE =
      new StructType(
          new StructField[] {
            DataTypes.createStructField("sign", DataTypes.IntegerType, false),
            DataTypes.createStructField("s_ts", DataTypes.LongType, false),
            DataTypes.createStructField("s_id", DataTypes.StringType, true),
            DataTypes.createStructField("e_ts", DataTypes.LongType, false),
            DataTypes.createStructField("e_id", DataTypes.StringType, true),
            DataTypes.createStructField(
                "first", DataTypes.createArrayType(DataTypes.StringType, true), true),
            DataTypes.createStructField(
                "last", DataTypes.createArrayType(DataTypes.StringType, true), true),
            DataTypes.createStructField("n", DataTypes.LongType, false),
            DataTypes.createStructField("tainted", DataTypes.BooleanType, false),
            DataTypes.createStructField("p_lo", DataTypes.IntegerType, false),
            DataTypes.createStructField("p_hi", DataTypes.IntegerType, false),
          });

  /** What {@link #call} returns. */
  public static DataType changes() {
    return DataTypes.createArrayType(CHANGE, false);
  }

  private final String namespace;
  private final Map<Integer, long[]> ranges;
  private final long droppedBeforeUs;
  private final long lateBeforeUs;
  private final long gapUs;
  private VisitSeed seed;
  private transient ThreadLocal<Object[]> current;

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

  @Override
  public Row[] call(
      Boolean counted,
      Integer partition,
      Integer day,
      String site,
      String visitor,
      Long ts,
      String id,
      Seq<String> first,
      Seq<String> last) {
    Object[] held = held(partition);
    if (counted == null || !counted) {
      return NO_CHANGE;
    }
    PartitionVisits state = (PartitionVisits) held[2];
    @SuppressWarnings("unchecked")
    List<PartitionVisits> others = (List<PartitionVisits>) held[3];
    synchronized (state) {
      List<Row> out =
          state.merge(
              day,
              visitorKey(site, visitor),
              ts,
              id,
              strings(first),
              strings(last),
              droppedBeforeUs,
              lateBeforeUs,
              gapUs,
              others);
      return out.toArray(new Row[0]);
    }
  }

  private static String[] strings(Seq<String> values) {
    String[] out = new String[values.length()];
    for (int i = 0; i < out.length; i++) {
      out[i] = values.apply(i);
    }
    return out;
  }

  private Object[] held(int partition) {
    if (current == null) {
      current = new ThreadLocal<>();
    }
    long attempt = DedupStates.attempt();
    Object[] held = current.get();
    if (held != null && (long) held[0] == attempt && (int) held[1] == partition) {
      return held;
    }
    PartitionVisits state = take(partition, attempt);
    held = new Object[] {attempt, partition, state, VisitStates.of(namespace)};
    current.set(held);
    return held;
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
