package lambda_platform.visits;

import java.io.Serializable;
import java.util.Comparator;

/**
 * One visit's summary (views/sessions.py has the definition): its first and last view's time in
 * microseconds and event id, the keys its first and last view give the dimensions that count it,
 * its number of views, whether it holds a view later than the state's horizon (tainted), and the
 * lowest and highest Kafka partition its visitor-day was seen on. Immutable: a merge makes a new
 * one, so the state before a micro-batch's range can be put back by reference.
 */
final class Visit implements Serializable {
  private static final long serialVersionUID = 1L;

  final long sTs;
  final String sId;
  final long eTs;
  final String eId;
  final String[] first;
  final String[] last;
  final long n;
  final boolean tainted;
  final int pLo;
  final int pHi;

  Visit(
      long sTs,
      String sId,
      long eTs,
      String eId,
      String[] first,
      String[] last,
      long n,
      boolean tainted,
      int pLo,
      int pHi) {
    this.sTs = sTs;
    this.sId = sId;
    this.eTs = eTs;
    this.eId = eId;
    this.first = first;
    this.last = last;
    this.n = n;
    this.tainted = tainted;
    this.pLo = pLo;
    this.pHi = pHi;
  }

  /** Visits by their first view (time, then event id). */
  static final Comparator<Visit> BY_START =
      Comparator.<Visit>comparingLong(v -> v.sTs).thenComparing(v -> v.sId);

  /** Whether (ts, id) comes before (ts2, id2) in the definition's order (time, then event id). */
  static boolean before(long ts, String id, long ts2, String id2) {
    return ts < ts2 || (ts == ts2 && id.compareTo(id2) < 0);
  }

  /** This visit and {@code other} as one (their views are within a gap of each other). */
  Visit with(Visit other) {
    boolean starts = before(sTs, sId, other.sTs, other.sId);
    boolean ends = before(other.eTs, other.eId, eTs, eId);
    Visit s = starts ? this : other;
    Visit e = ends ? this : other;
    return new Visit(
        s.sTs,
        s.sId,
        e.eTs,
        e.eId,
        s.first,
        e.last,
        n + other.n,
        tainted || other.tainted,
        Math.min(pLo, other.pLo),
        Math.max(pHi, other.pHi));
  }
}
