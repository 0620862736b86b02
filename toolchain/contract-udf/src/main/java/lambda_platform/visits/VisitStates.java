package lambda_platform.visits;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** The visit states of this JVM (an executor's, or the driver's in local mode), one per (query,
 * Kafka partition). */
public final class VisitStates {
  private static final Map<String, PartitionVisits> STATES = new ConcurrentHashMap<>();

  private VisitStates() {}

  private static String key(String namespace, int partition) {
    return namespace + "#" + partition;
  }

  static PartitionVisits get(String namespace, int partition) {
    return STATES.get(key(namespace, partition));
  }

  static void put(String namespace, PartitionVisits state) {
    STATES.put(key(namespace, state.partition), state);
  }

  /** The states of {@code namespace} in this JVM. */
  static List<PartitionVisits> of(String namespace) {
    List<PartitionVisits> out = new ArrayList<>();
    for (Map.Entry<String, PartitionVisits> e : STATES.entrySet()) {
      if (e.getKey().startsWith(namespace + "#")) {
        out.add(e.getValue());
      }
    }
    return out;
  }

  /** Visitor-days held by the states of {@code namespace}, this JVM (bench and tests). */
  public static long visitorDays(String namespace) {
    long n = 0;
    for (PartitionVisits s : of(namespace)) {
      synchronized (s) {
        n += s.visitorDays();
      }
    }
    return n;
  }

  /** Drops the states of {@code namespace} (a new query must not trust an old one's). */
  public static void forget(String namespace) {
    STATES.keySet().removeIf(k -> k.startsWith(namespace + "#"));
  }
}
