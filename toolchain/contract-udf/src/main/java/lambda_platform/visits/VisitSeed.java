package lambda_platform.visits;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;

/**
 * The visit states a rebuild starts from, made in the driver and shipped inside the micro-batch's
 * (or the replay's) {@link VisitMarker}: per partition, the visits of the counted page views below
 * an offset. The task that first reads a partition at that offset takes its state from here.
 */
public final class VisitSeed implements Serializable {
  private static final long serialVersionUID = 1L;

  final Map<Integer, PartitionVisits> states = new HashMap<>();

  /**
   * @param positions "p:offset,..." each partition's offset the seed stands at (all of them, those
   *     with no visits too)
   */
  public VisitSeed(String positions) {
    for (Map.Entry<Integer, Long> e : VisitMarker.parseOffsets(positions).entrySet()) {
      states.put(e.getKey(), new PartitionVisits(e.getKey(), e.getValue()));
    }
  }

  /**
   * Adds the visits of {@code visits}: rows of (kafka_partition int, day int, site, visitor_id, s_ts,
   * s_id, e_ts, e_id, first array&lt;string&gt;, last array&lt;string&gt;, n, p_lo int, p_hi int),
   * read through the driver (a Dataset's {@code toLocalIterator()}); returns how many.
   */
  public long add(Iterator<Row> rows) {
    long n = 0;
    while (rows.hasNext()) {
      Row r = rows.next();
      PartitionVisits state = states.get(r.getInt(0));
      if (state == null) {
        throw new IllegalStateException("partition " + r.getInt(0) + " is not being seeded");
      }
      Visit v =
          new Visit(
              r.getLong(4),
              r.getString(5),
              r.getLong(6),
              r.getString(7),
              strings(r.getList(8)),
              strings(r.getList(9)),
              r.getLong(10),
              false,
              r.getInt(11),
              r.getInt(12));
      state.seed(r.getInt(1), VisitMarker.visitorKey(r.getString(2), r.getString(3)), v);
      n++;
    }
    return n;
  }

  private static String[] strings(List<Object> values) {
    String[] out = new String[values.size()];
    for (int i = 0; i < out.length; i++) {
      Object v = values.get(i);
      out[i] = v == null ? null : v.toString();
    }
    return out;
  }
}
