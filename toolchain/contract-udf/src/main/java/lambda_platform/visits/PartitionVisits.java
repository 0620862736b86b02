package lambda_platform.visits;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import lambda_platform.dedup.RangeState;

/**
 * The visit state of one Kafka partition: per visitor-day (day, then site and visitor), the
 * summaries of the visits of every counted page view of the partition below {@link #position},
 * sorted by start, as long as a visit may still change (docs/visits.md, "The horizon").
 *
 * <p>{@link #merge} merges a page view into its visitor-day's visits; once the range is read,
 * {@link #changes} gives each generation's net change of every visitor-day the range touched: the
 * visits it held when the generation's first view of the range came (-1) against those it holds
 * now (+1), the visits in both cancelling out. Besides the visits, the state keeps how to put back
 * the state at the start of the range being (or last) applied, so that the same range evaluated
 * again (a second job over the micro-batch, a task retried) gives the same changes.
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
    /** Per generation of the range (VisitMarker's order): the visits held just before its first
     * view of the range counted for it; null while none did. */
    transient Visit[][] atCut;

    /** The site of {@link #key} (site, NUL, visitor). */
    String site() {
      return key.substring(0, key.indexOf('\u0000'));
    }

    /** The visitor of {@link #key}. */
    String visitor() {
      return key.substring(key.indexOf('\u0000') + 1);
    }

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
        e.atCut = null;
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

  /** Receives one change of {@link #changes}. */
  interface Changes {
    void change(int generation, Entry entry, Visit visit, int sign);
  }

  /**
   * Merges one page view into its visitor-day's visits.
   *
   * @param counts per generation of the range, whether the view counts for it (its offset is at or
   *     past the generation's cut): the first such view of a visitor-day keeps what it held then
   * @param others the partitions' states of the same query in this JVM, to tell a visitor-day seen
   *     on two partitions (its visits are then doubtful: p_lo != p_hi)
   */
  void merge(
      int day,
      String key,
      long ts,
      String id,
      String[] first,
      String[] last,
      boolean[] counts,
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
      e.atCut = new Visit[counts.length][];
      touched.add(e);
    }
    Visit[] vs = e.visits;
    for (int g = 0; g < counts.length; g++) {
      if (counts[g] && e.atCut[g] == null) {
        e.atCut[g] = vs;
      }
    }
    Visit merged =
        new Visit(ts, id, ts, id, first, last, 1, ts < lateBeforeUs, e.pLo, e.pHi);
    Visit[] kept = new Visit[vs.length + 1];
    int k = 0;
    for (Visit w : vs) {
      if (w.eTs < droppedBeforeUs) {
        continue; // let go of: ended before the horizon's cut-off
      }
      if (ts >= w.sTs - gapUs && ts <= w.eTs + gapUs) {
        merged = merged.with(w);
      } else {
        kept[k++] = w;
      }
    }
    kept[k++] = merged;
    Visit[] next = Arrays.copyOf(kept, k);
    Arrays.sort(next, Visit.BY_START);
    e.visits = next;
  }

  /**
   * The net changes of the range applied so far, per generation and touched visitor-day: -1 for
   * each visit held at the generation's first view that is gone (replaced by a merge; not one let
   * go of for ending before {@code droppedBeforeUs}, which no view could join), +1 for each visit
   * held now that was not then. Summed, they are what the per-view changes (-1 for each visit a
   * view joins, +1 for the visit they become) telescope to.
   */
  void changes(int generations, long droppedBeforeUs, Changes out) {
    for (Entry e : touched) {
      for (int g = 0; g < generations; g++) {
        Visit[] then = e.atCut[g];
        if (then == null || then == e.visits) {
          continue;
        }
        for (Visit w : then) {
          if (w.eTs >= droppedBeforeUs && !holds(e.visits, w)) {
            out.change(g, e, w, -1);
          }
        }
        for (Visit w : e.visits) {
          if (!holds(then, w)) {
            out.change(g, e, w, 1);
          }
        }
      }
    }
  }

  private static boolean holds(Visit[] visits, Visit v) {
    for (Visit w : visits) {
      if (w == v) {
        return true;
      }
    }
    return false;
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
