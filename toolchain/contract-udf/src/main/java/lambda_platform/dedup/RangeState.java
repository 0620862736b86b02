package lambda_platform.dedup;

import java.io.Serializable;
import java.util.Map;

/**
 * What the speed layer's states in the scan (the dedup's, the visits') share: which part of its
 * Kafka partition a state reflects, and how a Spark task applying a range of it moves it on.
 * Offsets below {@link #position} are applied (-1 while a range is being applied); the range being
 * (or last) applied is [{@link #rangeStart}, {@link #rangeEnd}), by task attempt {@link #task}.
 */
public abstract class RangeState implements Serializable {
  private static final long serialVersionUID = 1L;

  public long position;
  public long rangeStart = -1;
  public long rangeEnd = -1;
  public transient long task = Long.MIN_VALUE;

  protected RangeState(long position) {
    this.position = position;
  }

  /** Whether [start, end) is the range being (or last) applied: it is evaluated again. */
  public final boolean holds(long start, long end) {
    return rangeStart == start && rangeEnd == end;
  }

  /** When the running task {@code attempt} ends without failing, the position moves to {@code end}. */
  public final void advanceOnSuccess(long attempt, long end) {
    DedupStates.onSuccess(
        () -> {
          synchronized (this) {
            if (task == attempt) {
              position = end;
            }
          }
        });
  }

  /** The range of {@code partition} among a micro-batch's {@code ranges}. */
  public static long[] rangeOf(Map<Integer, long[]> ranges, int partition) {
    long[] range = ranges.get(partition);
    if (range == null) {
      throw new IllegalStateException("partition " + partition + " is not in the micro-batch");
    }
    return range;
  }
}
