package lambda_platform.visits;

import java.io.Serializable;
import java.util.Comparator;
import org.apache.spark.sql.Row;

/**
 * A visit summary (views/sessions.py): first view's time (epoch microseconds), event id and keys,
 * last view's likewise, the number of views, whether a view of it came later than the speed
 * layer's horizon, and the lowest and highest Kafka partition of its visitor-day (null in the
 * batch layer). A page view is the summary of a visit of one view.
 */
public final class Summary implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Spark's order of the summaries of a visitor-day: first view's time, then its id. */
  static final Comparator<Summary> BY_START =
      Comparator.<Summary>comparingLong(s -> s.sTs).thenComparing(s -> s.sId, Summary::compareText);

  final long sTs;
  final String sId;
  long eTs;
  String eId;
  final Row first;
  Row last;
  long n;
  boolean tainted;
  final Integer pLo;
  final Integer pHi;

  Summary(
      long sTs,
      String sId,
      long eTs,
      String eId,
      Row first,
      Row last,
      long n,
      boolean tainted,
      Integer pLo,
      Integer pHi) {
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

  /** Merge {@code s} (which starts within the gap of this visit) into this visit. */
  void extend(Summary s) {
    if (compareEnds(s, this) > 0) {
      eTs = s.eTs;
      eId = s.eId;
      last = s.last;
    }
    n += s.n;
    tainted |= s.tainted;
  }

  Summary withPartitions(Integer lo, Integer hi) {
    return new Summary(sTs, sId, eTs, eId, first, last, n, tainted, lo, hi);
  }

  /** Spark's order of struct(e_ts, e_id, last), whose greatest is a visit's end. */
  private static int compareEnds(Summary a, Summary b) {
    int c = Long.compare(a.eTs, b.eTs);
    if (c == 0) {
      c = compareText(a.eId, b.eId);
    }
    for (int i = 0; c == 0 && i < a.last.size(); i++) {
      c = compareText((String) a.last.get(i), (String) b.last.get(i));
    }
    return c;
  }

  /** Spark's order of strings: nulls first, then by UTF-8 bytes, which is code point order. */
  public static int compareText(String a, String b) {
    if (a == null || b == null) {
      return a == null ? (b == null ? 0 : -1) : 1;
    }
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int x = a.codePointAt(i);
      int y = b.codePointAt(j);
      if (x != y) {
        return Integer.compare(x, y);
      }
      i += Character.charCount(x);
      j += Character.charCount(y);
    }
    return Integer.compare(a.length() - i, b.length() - j);
  }
}
