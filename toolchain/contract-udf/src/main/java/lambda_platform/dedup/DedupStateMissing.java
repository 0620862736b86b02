package lambda_platform.dedup;

/**
 * A task reads a range of a partition whose state this JVM does not hold at the range's start (a
 * fresh JVM after a crash, a replayed micro-batch, a partition read by another executor than
 * before): the driver rebuilds the state from the log and runs the micro-batch again.
 */
public final class DedupStateMissing extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public DedupStateMissing(String namespace, int partition, long start) {
    super("DedupStateMissing: " + namespace + " partition " + partition + " at offset " + start);
  }
}
