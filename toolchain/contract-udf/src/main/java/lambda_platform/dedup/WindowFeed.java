package lambda_platform.dedup;

import java.util.Map;
import org.apache.spark.sql.api.java.UDF4;

/**
 * The rebuild of a partition's state: the accepted records of the window before a micro-batch's
 * start, read back from the log through the contract, fed in offset order into a new state that,
 * when the task ends successfully, replaces the partition's state at that start. Same arguments
 * as {@link DuplicateMarker}; returns true.
 */
public final class WindowFeed extends PartitionUdf implements UDF4<Integer, Long, Long, String, Boolean> {
  private static final long serialVersionUID = 1L;

  private final Map<Integer, long[]> starts;

  /**
   * @param starts "p:start:floor,..." per partition, the micro-batch's start offset and the log-
   *     append time from which the window read holds every record.
   */
  public WindowFeed(String namespace, long windowMs, long graceMs, String starts) {
    super(namespace, windowMs, graceMs);
    this.starts = DedupStates.parse(starts);
  }

  @Override
  public Boolean call(Integer partition, Long offset, Long time, String id) {
    PartitionState state = held(partition, attempt -> fresh(partition));
    if (id != null) {
      long[] fp = new long[2];
      Fingerprint.of(id, fp);
      state.record(time, fp[0], fp[1]);
    }
    return Boolean.TRUE;
  }

  /** A new state for {@code partition}, which replaces its state if the running task succeeds. */
  private PartitionState fresh(int partition) {
    long[] start = starts.get(partition);
    if (start == null) {
      throw new IllegalStateException("partition " + partition + " is not being rebuilt");
    }
    PartitionState fed = new PartitionState(windowMs, graceMs, start[1], -1);
    DedupStates.onSuccess(
        () -> {
          fed.position = start[0];
          DedupStates.put(namespace, partition, fed);
        });
    return fed;
  }
}
