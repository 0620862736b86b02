package lambda_platform.visits;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import lambda_platform.dedup.RangeState;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The visit state of one Kafka partition: per visitor-day (day, then site and visitor), the
 * summaries of the visits of every counted page view of the partition below {@link #position},
 * sorted by start, as long as a visit may still change (docs/visits.md, "The horizon").
 *
 * <p>{@link #merge} merges a page view into its visitor-day's visits and returns what changed: the
 * visits it replaced (sign -1) and the one they became (sign +1). Besides the visits, the state keeps
 * how to put back the state at the start of the range being (or last) applied, so that the same
 * range evaluated again (a second job over the micro-batch, a task retried) gives the same changes.
 *
 * <p>A visit leaves the state when its visitor-day is touched after it ended before the cut-off the
 * driver passes (the largest applied so far), and a whole day leaves once the cut-off is past its
 * end: what a task holds is the visitor-days of the days the horizon still covers.
 */
final class PartitionVisits extends RangeState implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Visit[] NONE = new Visit[0];
  private static final long DAY_US = 86_400_000_000L;

  /** A visitor-day's visits, and what they were at the start of the range being applied. */
  static final class Entry implements Serializable {
    private static final long serialVersionUID = 1L;
    final int day;
    final String key;
    final int pLo;
    final int pHi;
    Visit[] visits = NONE;
    transient long stamp;
    transient Visit[] before;
    transient boolean created;

    Entry(int day, String key, int pLo, int pHi) {
      this.day = day;
      this.key = key;
      this.pLo = pLo;
      this.pHi = pHi;
    }
  }

  final int partition;
  final Map<Integer, Map<String, Entry>> days = new ConcurrentHashMap<>();

  private transient long stamp;
  private transient List<Entry> touched;
  private transient Map<Integer, Map<String, Entry>> droppedDays;

  PartitionVisits(int partition, long position) {
    super(position);
    this.partition = partition;
  }

  /** Starts applying [start, end) in task attempt {@code attempt}, after letting go of the days
   * wholly before {@code droppedBeforeUs}. */
  void begin(long start, long end, long attempt, long droppedBeforeUs) {
    rangeStart = start;
    rangeEnd = end;
    task = attempt;
    position = -1;
    stamp++;
    touched = new ArrayList<>();
    droppedDays = new java.util.HashMap<>();
    for (Integer day : new ArrayList<>(days.keySet())) {
      if ((day + 1L) * DAY_US <= droppedBeforeUs) {
        droppedDays.put(day, days.remove(day));
      }
    }
  }

  /** Puts back the state at the start of the range being (or last) applied. */
  void undo() {
    if (touched != null) {
      for (Entry e : touched) {
        if (e.created) {
          Map<String, Entry> m = days.get(e.day);
          if (m != null) {
            m.remove(e.key);
          }
        } else {
          e.visits = e.before;
        }
        e.before = null;
        e.stamp = 0;
      }
      days.putAll(droppedDays);
    }
    touched = null;
    droppedDays = null;
  }

  /** Whether this state holds visitor-day {@code key} of {@code day}. */
  boolean holds(int day, String key) {
    Map<String, Entry> m = days.get(day);
    return m != null && m.containsKey(key);
  }

  /** A visit of the seed (a rebuild): added as is, in start order per visitor-day. */
  void seed(int day, String key, Visit v) {
    Entry e = days.computeIfAbsent(day, d -> new ConcurrentHashMap<>())
        .computeIfAbsent(key, k -> new Entry(day, k, v.pLo, v.pHi));
    Visit[] vs = Arrays.copyOf(e.visits, e.visits.length + 1);
    vs[vs.length - 1] = v;
    Arrays.sort(vs, Visit.BY_START);
    e.visits = vs;
  }

  /**
   * Merges one page view into its visitor-day and returns the changes, each a row of
   * {@link VisitMarker#CHANGE}: the visits it joined (-1) and the visit they became (+1).
   *
   * @param others the partitions' states of the same query in this JVM, to tell a visitor-day seen
   *     on two partitions (its visits are then doubtful: p_lo != p_hi)
   */
  List<Row> merge(
      int day,
      String key,
      long ts,
      String id,
      String[] first,
      String[] last,
      long droppedBeforeUs,
      long lateBeforeUs,
      long gapUs,
      Iterable<PartitionVisits> others) {
    Map<String, Entry> m = days.computeIfAbsent(day, d -> new ConcurrentHashMap<>());
    Entry e = m.get(key);
    boolean created = false;
    if (e == null) {
      int lo = partition;
      int hi = partition;
      for (PartitionVisits o : others) {
        if (o != this && o.holds(day, key)) {
          lo = Math.min(lo, o.partition);
          hi = Math.max(hi, o.partition);
        }
      }
      e = new Entry(day, key, lo, hi);
      m.put(key, e);
      created = true;
    }
    if (e.stamp != stamp) {
      e.stamp = stamp;
      e.before = e.visits;
      e.created = created;
      touched.add(e);
    }
    Visit[] vs = e.visits;
    Visit merged =
        new Visit(ts, id, ts, id, first, last, 1, ts < lateBeforeUs, e.pLo, e.pHi);
    List<Row> out = new ArrayList<>(3);
    Visit[] kept = new Visit[vs.length + 1];
    int k = 0;
    for (Visit w : vs) {
      if (w.eTs < droppedBeforeUs) {
        continue; // let go of: ended before the horizon's cut-off
      }
      if (ts >= w.sTs - gapUs && ts <= w.eTs + gapUs) {
        out.add(row(-1, w));
        merged = merged.with(w);
      } else {
        kept[k++] = w;
      }
    }
    out.add(row(1, merged));
    kept[k++] = merged;
    Visit[] next = Arrays.copyOf(kept, k);
    Arrays.sort(next, Visit.BY_START);
    e.visits = next;
    return out;
  }

  private static Row row(int sign, Visit v) {
    return RowFactory.create(
        sign, v.sTs, v.sId, v.eTs, v.eId, v.first, v.last, v.n, v.tainted, v.pLo, v.pHi);
  }

  /** Visitor-days held (bench and tests). */
  long visitorDays() {
    long n = 0;
    for (Map<String, Entry> m : days.values()) {
      n += m.size();
    }
    return n;
  }
}
