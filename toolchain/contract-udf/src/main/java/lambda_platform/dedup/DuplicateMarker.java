package lambda_platform.dedup;

import java.util.Map;
import org.apache.spark.sql.api.java.UDF4;

/**
 * The speed layer's dedup, in the scan: (partition, offset, log-append time in ms, event id or
 * null for a record the contract rejects) -> whether the record is a duplicate by the rule of
 * contract/duplicates.py. Rows must reach it in offset order per partition, which they do in the
 * Kafka scan's task when nothing between the scan and this function reorders them; the layer
 * registers it nondeterministic so that the optimizer neither moves nor repeats it.
 *
 * <p>One instance per micro-batch: it knows the batch's range of every partition, and after a
 * rebuild the partitions whose window before the range held no record (they start empty). The
 * first row of a task checks that the state of its partition stands at the range's start, or
 * already holds this range's verdicts; otherwise it throws {@link DedupStateMissing}.
 */
public final class DuplicateMarker extends PartitionUdf
    implements UDF4<Integer, Long, Long, String, Boolean> {
  private static final long serialVersionUID = 1L;

  private final Map<Integer, long[]> ranges;
  private volatile Map<Integer, long[]> empty = Map.of();

  /**
   * @param ranges "p:start:end,..." the micro-batch's offsets per partition.
   */
  public DuplicateMarker(String namespace, long windowMs, long graceMs, String ranges) {
    super(namespace, windowMs, graceMs);
    this.ranges = DedupStates.parse(ranges);
  }

  /** After a rebuild: "p:start:floor,..." partitions whose window was empty start with no state. */
  public void startEmpty(String spec) {
    empty = DedupStates.parse(spec);
  }

  @Override
  public Boolean call(Integer partition, Long offset, Long time, String id) {
    PartitionState state = held(partition, attempt -> take(partition, attempt));
    synchronized (state) {
      if (id == null) {
        return state.skip(offset);
      }
      long[] fp = new long[2];
      Fingerprint.of(id, fp);
      return state.apply(offset, time, fp[0], fp[1]);
    }
  }

  private PartitionState take(int partition, long attempt) {
    long[] range = RangeState.rangeOf(ranges, partition);
    long start = range[0];
    long end = range[1];
    synchronized (DedupStates.class) {
      PartitionState state = DedupStates.get(namespace, partition);
      boolean again = state != null && state.holds(start, end);
      if (!again && (state == null || state.position != start)) {
        long[] fresh = empty.get(partition);
        if (fresh == null || fresh[0] != start) {
          throw new DedupStateMissing(namespace, partition, start);
        }
        state = new PartitionState(windowMs, graceMs, fresh[1], start);
        DedupStates.put(namespace, partition, state);
      }
      PartitionState s = state;
      synchronized (s) {
        if (again) {
          s.task = attempt; // the range's verdicts so far stand; the rest is applied
        } else {
          s.begin(start, end, attempt);
        }
      }
      s.advanceOnSuccess(attempt, end);
      return s;
    }
  }
}
