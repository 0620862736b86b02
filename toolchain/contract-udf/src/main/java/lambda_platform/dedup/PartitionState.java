package lambda_platform.dedup;

import java.util.ArrayDeque;
import java.util.BitSet;
import java.util.Iterator;

/**
 * The dedup state of one Kafka partition (docs/contract.md, "Duplicates"): for every event id
 * accepted in the partition within the window, the log-append time of its last record, in tables
 * per time bucket (a quarter of the window wide) that leave a whole bucket at a time once the
 * newest log-append time is a window and a grace past them. A record's cost is a probe of each
 * bucket (at most six) and an insert, whatever the state holds.
 *
 * <p>Besides the fingerprints, the state says which part of the log it reflects: every accepted
 * record below {@link #position} whose log-append time is at or past {@link #floor}. It also keeps
 * the verdicts of the micro-batch range being (or last) applied, so that the same range evaluated
 * again (a second job over the micro-batch, a task retried in this JVM) gets the same verdicts
 * without touching the fingerprints twice.
 */
final class PartitionState extends RangeState {
  final long windowMs;
  final long graceMs;
  final long bucketMs;
  private final ArrayDeque<Bucket> buckets = new ArrayDeque<>();
  private long floor;
  private long maxTime = Long.MIN_VALUE;

  long lastOffset = -1;
  BitSet verdicts = new BitSet();

  private static final class Bucket {
    final long index;
    final FingerprintTable table;

    Bucket(long index, FingerprintTable table) {
      this.index = index;
      this.table = table;
    }
  }

  PartitionState(long windowMs, long graceMs, long floor, long position) {
    super(position);
    this.windowMs = windowMs;
    this.graceMs = graceMs;
    this.bucketMs = Math.max(1, windowMs / 4);
    this.floor = floor;
  }

  /** Starts applying [start, end) in task attempt {@code attempt}. */
  void begin(long start, long end, long attempt) {
    rangeStart = start;
    rangeEnd = end;
    lastOffset = start - 1;
    verdicts = new BitSet();
    position = -1;
    task = attempt;
  }

  /** The verdict of the accepted record at {@code offset}: a duplicate or not (the rule). */
  boolean apply(long offset, long time, long h1, long h2) {
    if (offset <= lastOffset) {
      return verdicts.get((int) (offset - rangeStart));
    }
    if (offset >= rangeEnd || offset < rangeStart) {
      throw new IllegalStateException(
          "offset " + offset + " outside the range [" + rangeStart + ", " + rangeEnd + ")");
    }
    boolean duplicate = decide(time, h1, h2);
    if (duplicate) {
      verdicts.set((int) (offset - rangeStart));
    }
    lastOffset = offset;
    return duplicate;
  }

  /** A record that takes no part (not accepted by the contract): only its place in the range. */
  boolean skip(long offset) {
    if (offset <= lastOffset) {
      return false;
    }
    lastOffset = offset;
    return false;
  }

  boolean decide(long time, long h1, long h2) {
    if (time - windowMs < floor) {
      throw new IllegalStateException(
          "log-append time "
              + time
              + " went back more than the grace ("
              + graceMs
              + " ms) behind the newest one: the state no longer holds its window (from "
              + floor
              + ")");
    }
    long previous = Long.MIN_VALUE;
    Iterator<Bucket> newestFirst = buckets.descendingIterator();
    while (newestFirst.hasNext()) {
      long t = newestFirst.next().table.get(h1, h2);
      if (t != Long.MIN_VALUE) {
        previous = t;
        break;
      }
    }
    record(time, h1, h2);
    return previous != Long.MIN_VALUE && time - previous <= windowMs;
  }

  /**
   * Makes {@code time} the last log-append time of (h1, h2): in the newest bucket, or a new one.
   * An older time than the newest bucket's goes there too: kept longer, and found before any
   * earlier entry of the same id in an older bucket.
   */
  void record(long time, long h1, long h2) {
    long index = Math.floorDiv(time, bucketMs);
    Bucket newest = buckets.peekLast();
    if (newest == null || index > newest.index) {
      // Sized for as many entries as the previous bucket ended with: a steady rate never grows it.
      int expected = newest == null ? 1024 : newest.table.size();
      newest = new Bucket(index, new FingerprintTable(index * bucketMs, expected));
      buckets.addLast(newest);
    }
    newest.table.put(h1, h2, time);
    if (time > maxTime) {
      maxTime = time;
      long limit = maxTime - graceMs - windowMs;
      Bucket oldest = buckets.peekFirst();
      while (oldest != null && (oldest.index + 1) * bucketMs <= limit) {
        buckets.removeFirst();
        floor = Math.max(floor, (oldest.index + 1) * bucketMs);
        oldest = buckets.peekFirst();
      }
    }
  }

  long entries() {
    long n = 0;
    for (Bucket b : buckets) {
      n += b.table.size();
    }
    return n;
  }

  long bytes() {
    long n = verdicts.size() / 8;
    for (Bucket b : buckets) {
      n += b.table.bytes();
    }
    return n;
  }
}
