package org.apache.spark.sql.lambda_platform.visits

import java.util.{Arrays, HashMap => JMap}

import org.apache.spark.TaskContext
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/** A visitor-day: the group (the pass's `by` values), the site and visitor, and the UTC day. */
private[visits] final class VisitorDay(val group: Int, val site: Int, val visitor: UTF8String, val day: Int) {
  override def hashCode: Int = ((group * 31 + site) * 31 + visitor.hashCode) * 31 + day
  override def equals(o: Any): Boolean = o match {
    case k: VisitorDay => day == k.day && site == k.site && group == k.group && visitor == k.visitor
    case _ => false
  }
}

/**
 * The page views one task has recorded (RecordView), held until the task emits their visits
 * (EmitVisits): per view its time, its event id and the codes of its keys, in primitive arrays (no
 * object per view), and per visitor-day the list of its views (linked through `next`). Keys are
 * held once each, in a dictionary.
 */
private[visits] final class TaskViews(val keys: Int, limit: Long) {
  var emitted = false
  var n = 0
  var ts = new Array[Long](1 << 12)
  var idAt = new Array[Int](1 << 12)
  var idLen = new Array[Int](1 << 12)
  var next = new Array[Int](1 << 12)
  var codes = new Array[Int]((1 << 12) * keys)
  var ids = new Array[Byte](1 << 16)
  var idsEnd = 0
  /** Per visitor-day: its latest view's index (the head of its list). */
  val heads = new JMap[VisitorDay, Array[Int]]()
  val dictionary = new JMap[UTF8String, Integer]()
  val words = new java.util.ArrayList[UTF8String]()

  /** What the record takes of the heap, estimated (docs/scaling.md): its arrays' capacities, and
   * per visitor-day and per distinct key their objects. */
  var bytes: Long = (1L << 12) * (20 + 4 * keys) + (1 << 16)

  /** Counts `more` bytes in the record; past `limit` fails the task, naming what to change. The
   * record lives in the heap Spark leaves to user code (outside its memory manager's pool), so it
   * is bounded here: by the shuffle's partitions sized from the events read, and by this check
   * when a task still reads more than expected. */
  private def charge(more: Long): Unit = {
    bytes += more
    if (bytes > limit) {
      throw new IllegalStateException(
        s"visits in the scan: this task's record of its $n page views passed its limit of ${limit >> 20} MiB " +
          "(LAMBDA_BATCH_RECORD_LIMIT_MIB); give each task fewer views (LAMBDA_BATCH_VIEWS_PER_TASK) " +
          "or the batch job more memory and a higher limit")
    }
  }

  /** Drops the record once its visits are emitted, so that its heap is free for what follows. */
  def release(): Unit = {
    ts = null; idAt = null; idLen = null; next = null; codes = null; ids = null
    heads.clear(); dictionary.clear(); words.clear()
  }

  /** The code of a key (a text: the dictionary's copy is made once); -1 for null. */
  def code(s: UTF8String): Int =
    if (s == null) -1
    else {
      val c = dictionary.get(s)
      if (c != null) c.intValue
      else {
        val copy = s.clone()
        charge(TaskViews.PerKey + copy.numBytes)
        val i = words.size
        words.add(copy)
        dictionary.put(copy, i)
        i
      }
    }

  def word(code: Int): UTF8String = if (code < 0) null else words.get(code)

  def add(group: UTF8String, site: UTF8String, visitor: UTF8String, day: Int, time: Long, id: UTF8String,
      values: Array[UTF8String]): Unit = {
    if (emitted) {
      throw new IllegalStateException("a page view was recorded after its task emitted the visits")
    }
    if (n == ts.length) grow()
    val i = n
    ts(i) = time
    val len = id.numBytes
    if (idsEnd + len > ids.length) {
      val size = math.max(ids.length * 2, idsEnd + len)
      charge(size - ids.length)
      ids = Arrays.copyOf(ids, size)
    }
    id.writeToMemory(ids, Platform.BYTE_ARRAY_OFFSET + idsEnd)
    idAt(i) = idsEnd
    idLen(i) = len
    idsEnd += len
    var k = 0
    while (k < keys) { codes(i * keys + k) = code(values(k)); k += 1 }
    val probe = new VisitorDay(code(group), code(site), visitor, day)
    val head = heads.get(probe)
    if (head == null) {
      next(i) = -1
      charge(TaskViews.PerVisitorDay + visitor.numBytes)
      heads.put(new VisitorDay(probe.group, probe.site, visitor.clone(), day), Array(i))
    } else {
      next(i) = head(0)
      head(0) = i
    }
    n += 1
  }

  private def grow(): Unit = {
    val size = ts.length * 2
    charge(ts.length.toLong * (20 + 4 * keys))
    ts = Arrays.copyOf(ts, size)
    idAt = Arrays.copyOf(idAt, size)
    idLen = Arrays.copyOf(idLen, size)
    next = Arrays.copyOf(next, size)
    codes = Arrays.copyOf(codes, size * keys)
  }

  /** Orders two views as the definition does: by time, ties by event id. */
  def compare(a: Int, b: Int): Int = {
    val c = java.lang.Long.compare(ts(a), ts(b))
    if (c != 0) c else UTF8String.fromBytes(ids, idAt(a), idLen(a)).compareTo(UTF8String.fromBytes(ids, idAt(b), idLen(b)))
  }
}

/** The views each running task has recorded, per scan (one RecordView and its EmitVisits). */
private[visits] object TaskViews {
  /** The heap a visitor-day takes besides its visitor id's bytes: its key object, the id's copy,
   * the map's entry and its slot, its list's head. */
  val PerVisitorDay: Long = 160
  /** The heap a distinct key takes besides its bytes: its copy, the dictionary's entry, its code. */
  val PerKey: Long = 120

  private val held = new ThreadLocal[JMap[String, TaskViews]]
  private val attempt = new ThreadLocal[java.lang.Long]

  /** This task's views of scan `scan`, of at most `limit` bytes: empty at a task's (or task
   * attempt's) first call. */
  def of(scan: String, keys: Int, limit: Long): TaskViews = {
    val tc = TaskContext.get()
    val id = if (tc == null) -1L else tc.taskAttemptId()
    var scans = held.get()
    if (scans == null || attempt.get() != id) {
      scans = new JMap[String, TaskViews]()
      held.set(scans)
      attempt.set(id)
      if (tc != null) {
        tc.addTaskCompletionListener[Unit] { _ =>
          held.remove()
          attempt.remove()
        }
      }
    }
    var views = scans.get(scan)
    if (views == null) {
      views = new TaskViews(keys, limit)
      scans.put(scan, views)
    }
    views
  }
}
