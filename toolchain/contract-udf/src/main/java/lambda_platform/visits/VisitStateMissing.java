package lambda_platform.visits;

/** A task found its partition's visit state elsewhere than at its range's start: rebuild it. */
public final class VisitStateMissing extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public VisitStateMissing(String namespace, int partition, long offset) {
    super("VisitStateMissing: " + namespace + " partition " + partition + " at offset " + offset);
  }
}
