package lambda_platform.contract;

import dk.brics.automaton.RegExp;
import dk.brics.automaton.RunAutomaton;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.api.java.UDF1;

/**
 * Whether a Kafka record's bytes are in the canonical form ingest writes, and if so the event time
 * they spell: the layers' fast path (contract/canonical.py builds the pattern from the contract's
 * own constants and documents why a match can only ever be a record the contract accepts as it
 * is). The result is null for a record not in the form, else its event time in epoch
 * microseconds, which the layers hold against the window around the record's log-append time
 * (contract/spark_schema.py) without parsing the record: in the stream, whatever the parse adds
 * to a row is copied twice more where the row crosses to Python (docs/contract.md).
 *
 * <p>The pattern is compiled by dk.brics.automaton into a minimal DFA, once per JVM, and run over
 * the record's bytes with one table lookup per byte. A backtracking regular expression engine
 * (java.util.regex, what rlike uses) walked each record through nested groups at about 15 ns a
 * character; the DFA costs about 3 (docs/contract.md). The canonical form is printable ASCII, so
 * any byte outside 0-127 rejects the record at once.
 */
public final class CanonicalRecogniser implements UDF1<byte[], Long> {
  private static final long serialVersionUID = 1L;
  private static final Map<String, Table> TABLES = new ConcurrentHashMap<>();

  /**
   * The result for a record in the canonical form whose timestamp is not a calendar date (the
   * pattern allows a 31st in every month): below every window, so the contract's own check judges
   * it, as it does every record not taken as it is.
   */
  public static final long NOT_A_DATE = Long.MIN_VALUE;


  private final String pattern;
  private final byte[] timeField;
  private transient Table table;

  /**
   * @param pattern the canonical form in dk.brics.automaton's syntax (contract/canonical.py).
   * @param timeField what precedes the timestamp in that form, once per record (TS_FIELD there).
   */
  public CanonicalRecogniser(String pattern, String timeField) {
    this.pattern = pattern;
    this.timeField = timeField.getBytes(StandardCharsets.US_ASCII);
    table(); // a pattern that does not compile fails here, on the driver, not in a task
  }

  @Override
  public Long call(byte[] value) {
    if (value == null || !table().matches(value)) {
      return null;
    }
    return spelledTime(value, indexOf(value, timeField) + timeField.length);
  }

  /**
   * Epoch microseconds of the timestamp at {@code at} of a record the DFA matched: there it is
   * {@code YYYY-MM-DDTHH:MM:SS}, then {@code Z} or six fraction digits and {@code Z}, so the fields
   * are at fixed places and are digits. {@link #NOT_A_DATE} if the date does not exist.
   */
  static long spelledTime(byte[] v, int at) {
    int year = digits(v, at, 4);
    int month = digits(v, at + 5, 2);
    int day = digits(v, at + 8, 2);
    long epochDay;
    try {
      epochDay = LocalDate.of(year, month, day).toEpochDay();
    } catch (DateTimeException e) {
      return NOT_A_DATE;
    }
    long seconds = epochDay * 86_400L + digits(v, at + 11, 2) * 3_600L + digits(v, at + 14, 2) * 60L
        + digits(v, at + 17, 2);
    int micros = v[at + 19] == '.' ? digits(v, at + 20, 6) : 0;
    return seconds * 1_000_000L + micros;
  }

  private static int digits(byte[] v, int from, int count) {
    int n = 0;
    for (int i = from; i < from + count; i++) {
      n = n * 10 + (v[i] - '0');
    }
    return n;
  }

  /** Where {@code part} first occurs in {@code v} (the DFA guarantees it does, once). */
  private static int indexOf(byte[] v, byte[] part) {
    outer:
    for (int i = 0; i <= v.length - part.length; i++) {
      for (int k = 0; k < part.length; k++) {
        if (v[i + k] != part[k]) {
          continue outer;
        }
      }
      return i;
    }
    throw new IllegalStateException("a canonical record without its timestamp field");
  }

  /** The number of states of the compiled DFA (a test pins that the pattern stays small). */
  public int states() {
    return table().accepting.length;
  }

  private Table table() {
    Table t = table;
    if (t == null) {
      t = TABLES.computeIfAbsent(pattern, Table::compile);
      table = t;
    }
    return t;
  }

  /**
   * The DFA as one flat transition table: a state's row holds its successor for each class of
   * ASCII characters the pattern tells apart (characters every state treats alike share a column),
   * -1 for no successor. Rows of a few dozen 16-bit entries keep the whole table in the cache.
   */
  static final class Table {
    final short[] next;
    final byte[] classOf = new byte[128];
    final int classes;
    final boolean[] accepting;
    final int initial;

    private Table(short[] next, int classes, boolean[] accepting, int initial) {
      this.next = next;
      this.classes = classes;
      this.accepting = accepting;
      this.initial = initial;
    }

    static Table compile(String pattern) {
      RunAutomaton dfa = new RunAutomaton(new RegExp(pattern).toAutomaton(), false);
      int states = dfa.getSize();
      if (states > Short.MAX_VALUE) {
        throw new IllegalArgumentException("the canonical pattern compiles to " + states + " states");
      }
      Map<List<Integer>, Integer> columns = new HashMap<>();
      List<Integer> representatives = new ArrayList<>();
      byte[] classOf = new byte[128];
      for (int c = 0; c < 128; c++) {
        List<Integer> column = new ArrayList<>(states);
        for (int s = 0; s < states; s++) {
          column.add(dfa.step(s, (char) c));
        }
        Integer id = columns.get(column);
        if (id == null) {
          id = representatives.size();
          columns.put(column, id);
          representatives.add(c);
        }
        classOf[c] = (byte) (int) id;
      }
      int classes = representatives.size();
      short[] next = new short[states * classes];
      boolean[] accepting = new boolean[states];
      for (int s = 0; s < states; s++) {
        accepting[s] = dfa.isAccept(s);
        for (int k = 0; k < classes; k++) {
          next[s * classes + k] = (short) dfa.step(s, (char) (int) representatives.get(k));
        }
      }
      Table table = new Table(next, classes, accepting, dfa.getInitialState());
      System.arraycopy(classOf, 0, table.classOf, 0, 128);
      return table;
    }

    boolean matches(byte[] value) {
      short[] next = this.next;
      byte[] classOf = this.classOf;
      int classes = this.classes;
      int state = initial;
      for (byte b : value) {
        if (b < 0) {
          return false;
        }
        state = next[state * classes + classOf[b]];
        if (state < 0) {
          return false;
        }
      }
      return accepting[state];
    }
  }

  @Override
  public String toString() {
    return "CanonicalRecogniser(" + pattern.length() + " characters of pattern)";
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof CanonicalRecogniser
        && ((CanonicalRecogniser) other).pattern.equals(pattern)
        && Arrays.equals(((CanonicalRecogniser) other).timeField, timeField);
  }

  @Override
  public int hashCode() {
    return 31 * pattern.hashCode() + Arrays.hashCode(timeField);
  }
}
