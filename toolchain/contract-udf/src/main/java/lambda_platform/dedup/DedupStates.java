package lambda_platform.dedup;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.ToLongFunction;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.TaskFailureListener;

/**
 * The dedup states of this JVM (an executor's, or the driver's in local mode), one per (query,
 * Kafka partition), and what ties a state to the Spark task applying a range of its partition: a
 * task that ends successfully has applied its whole range (the position moves to the range's end);
 * one that fails leaves the range unfinished, to be taken up by the next attempt.
 */
public final class DedupStates {
  private static final Map<String, PartitionState> STATES = new ConcurrentHashMap<>();

  private DedupStates() {}

  static String key(String namespace, int partition) {
    return namespace + "#" + partition;
  }

  static PartitionState get(String namespace, int partition) {
    return STATES.get(key(namespace, partition));
  }

  static void put(String namespace, int partition, PartitionState state) {
    STATES.put(key(namespace, partition), state);
  }

  /** The running task's attempt id (a constant outside a task: tests driving the UDF directly). */
  public static long attempt() {
    TaskContext ctx = TaskContext.get();
    return ctx == null ? -1 : ctx.taskAttemptId();
  }

  /** Calls {@code onSuccess} when the running task ends without failing (now, outside a task). */
  public static void onSuccess(Runnable onSuccess) {
    TaskContext ctx = TaskContext.get();
    if (ctx == null) {
      onSuccess.run();
      return;
    }
    boolean[] failed = {false};
    // Spark calls the failure listeners of a failed task before its completion listeners.
    ctx.addTaskFailureListener((TaskFailureListener) (context, error) -> failed[0] = true);
    ctx.addTaskCompletionListener(
        (TaskCompletionListener) context -> {
          if (!failed[0] && !context.isInterrupted()) {
            onSuccess.run();
          }
        });
  }

  /** Fingerprints held by the states of {@code namespace}, this JVM (bench and tests). */
  public static long entries(String namespace) {
    return sum(namespace, PartitionState::entries);
  }

  /** Bytes of heap the states of {@code namespace} hold in their tables, this JVM. */
  public static long bytes(String namespace) {
    return sum(namespace, PartitionState::bytes);
  }

  private static long sum(String namespace, ToLongFunction<PartitionState> of) {
    long n = 0;
    for (Map.Entry<String, PartitionState> e : STATES.entrySet()) {
      if (e.getKey().startsWith(namespace + "#")) {
        n += of.applyAsLong(e.getValue());
      }
    }
    return n;
  }

  /** Drops the states of {@code namespace} (a test starting a query over, a rebuild of all). */
  public static void forget(String namespace) {
    STATES.keySet().removeIf(k -> k.startsWith(namespace + "#"));
  }

  /** "p:a:b,p:a:b" (what the driver passes) as partition -> {a, b}. */
  public static Map<Integer, long[]> parse(String spec) {
    Map<Integer, long[]> out = new HashMap<>();
    if (spec == null || spec.isEmpty()) {
      return out;
    }
    for (String part : spec.split(",")) {
      String[] f = part.split(":");
      out.put(Integer.parseInt(f[0]), new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])});
    }
    return out;
  }
}
