package lambda_platform.dedup;

import java.io.Serializable;
import java.util.function.LongFunction;

/**
 * What the dedup's two functions share: the query they work for, the rule's window and grace, and
 * the state each task thread is working on (looked up once per task and partition, not per row).
 */
abstract class PartitionUdf implements Serializable {
  private static final long serialVersionUID = 1L;

  final String namespace;
  final long windowMs;
  final long graceMs;
  private transient ThreadLocal<Object[]> current;

  PartitionUdf(String namespace, long windowMs, long graceMs) {
    this.namespace = namespace;
    this.windowMs = windowMs;
    this.graceMs = graceMs;
  }

  /** The state the running task works on for {@code partition}: {@code take} on its first row. */
  final PartitionState held(int partition, LongFunction<PartitionState> take) {
    if (current == null) {
      current = new ThreadLocal<>();
    }
    long attempt = DedupStates.attempt();
    Object[] held = current.get();
    if (held != null && (long) held[0] == attempt && (int) held[1] == partition) {
      return (PartitionState) held[2];
    }
    PartitionState state = take.apply(attempt);
    current.set(new Object[] {attempt, partition, state});
    return state;
  }
}
