package lambda_platform.dedup;

/**
 * An open-addressing map from a 128-bit fingerprint to a log-append time, in primitive arrays (no
 * object per entry): 20 bytes a slot, at most 0.7 full. Entries are never removed one by one; the
 * whole table goes when its time bucket leaves the window ({@link PartitionState}). A table is
 * sized for the entries expected (the previous bucket's count), not to a power of two: a slot is
 * picked by multiplying the hash into the table's size.
 */
final class FingerprintTable {
  static final int NOT_FOUND = Integer.MIN_VALUE;

  private long[] keys; // h1, h2 of slot i at 2i, 2i+1; {0, 0} is an empty slot
  private int[] times; // milliseconds since base
  private final long base;
  private int size;
  private int slots;

  FingerprintTable(long base, int expected) {
    this.base = base;
    slots = (int) Math.min(Integer.MAX_VALUE / 2, Math.max(16L, (long) Math.ceil(expected / 0.7) + 1));
    keys = new long[slots * 2];
    times = new int[slots];
  }

  int size() {
    return size;
  }

  long bytes() {
    return keys.length * 8L + times.length * 4L;
  }

  /** The time stored for (h1, h2), or {@link Long#MIN_VALUE} if none. */
  long get(long h1, long h2) {
    int i = slot(h1, h2);
    return keys[2 * i] == 0 && keys[2 * i + 1] == 0 ? Long.MIN_VALUE : base + times[i];
  }

  void put(long h1, long h2, long time) {
    long offset = time - base;
    if (offset > Integer.MAX_VALUE || offset < Integer.MIN_VALUE + 1) {
      throw new IllegalStateException("a log-append time 24 days away from its bucket: " + time);
    }
    int i = slot(h1, h2);
    if (keys[2 * i] == 0 && keys[2 * i + 1] == 0) {
      keys[2 * i] = h1;
      keys[2 * i + 1] = h2;
      if (++size > slots * 0.7) {
        times[i] = (int) offset;
        grow();
        return;
      }
    }
    times[i] = (int) offset;
  }

  private int slot(long h1, long h2) {
    int i = (int) (((h1 >>> 32) * slots) >>> 32);
    while (true) {
      long a = keys[2 * i];
      long b = keys[2 * i + 1];
      if ((a == h1 && b == h2) || (a == 0 && b == 0)) {
        return i;
      }
      i = i + 1 == slots ? 0 : i + 1;
    }
  }

  private void grow() {
    long[] oldKeys = keys;
    int[] oldTimes = times;
    slots = oldTimes.length * 2;
    keys = new long[slots * 2];
    times = new int[slots];
    for (int j = 0; j < oldTimes.length; j++) {
      long a = oldKeys[2 * j];
      long b = oldKeys[2 * j + 1];
      if (a != 0 || b != 0) {
        int i = slot(a, b);
        keys[2 * i] = a;
        keys[2 * i + 1] = b;
        times[i] = oldTimes[j];
      }
    }
  }
}
