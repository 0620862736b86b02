package org.apache.spark.sql.lambda_platform.visits

import java.util.{Arrays, HashMap => JMap}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, LeafExpression, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.sql.types._

/** An emitted row's grouping: group, view, key (codes), day and level. */
private final class Bucket(val group: Int, val v: Int, val key: Int, val day: Int, val level: Int) {
  override def hashCode: Int = (((group * 31 + v) * 31 + key) * 31 + day) * 31 + level
  override def equals(o: Any): Boolean = o match {
    case b: Bucket => v == b.v && key == b.key && day == b.day && level == b.level && group == b.group
    case _ => false
  }
}

/**
 * The visits of every page view its task recorded for scan `scan` (RecordView), once per task: the
 * first evaluation in the task sessionises each visitor-day's views (by time, ties by event id; a
 * new visit after more than `gapUs`) and returns their metrics summed per (group, view, key, day,
 * level); every later one returns null. Each visit counts under its first view's key of the views
 * `firstViews` and its last view's of `lastViews` (the recorded keys, in that order), at its first
 * view's UTC hour and at level 24 (the day). A row has the shape of the pass's per-visitor rows
 * (views.shared_pass.count_per_visitor): no visitor, no page view (`n` 0), so that one generator
 * of generated code makes both. Evaluated after an aggregation that has consumed
 * every recorded row of the task, so the views are all there; a view recorded after it fails the
 * task (TaskViews.add).
 */
case class EmitVisits(scan: String, firstViews: Seq[Int], lastViews: Seq[Int], gapUs: Long)
    extends LeafExpression with Nondeterministic {
  override def nullable: Boolean = true
  override def dataType: DataType = EmitVisits.Type
  override protected def initializeInternal(partitionIndex: Int): Unit = {}
  override protected def evalInternal(input: InternalRow): Any =
    EmitVisits.emit(scan, firstViews.toArray, lastViews.toArray, gapUs)

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val scanRef = ctx.addReferenceObj("scan", scan, "java.lang.String")
    val first = ctx.addReferenceObj("firstViews", firstViews.toArray, "int[]")
    val last = ctx.addReferenceObj("lastViews", lastViews.toArray, "int[]")
    ev.copy(code = code"""
      ArrayData ${ev.value} = ${classOf[EmitVisits].getName}.emit($scanRef, $first, $last, ${gapUs}L);
      boolean ${ev.isNull} = ${ev.value} == null;
      """)
  }
}

object EmitVisits {
  val Type: DataType = ArrayType(
    StructType(Seq(
      StructField("_group", StringType),
      StructField("v", IntegerType, nullable = false),
      StructField("key", StringType),
      StructField("day", DateType, nullable = false),
      StructField("level", IntegerType, nullable = false),
      StructField("visitor_id", StringType),
      StructField("n", LongType, nullable = false),
      StructField("vi", LongType, nullable = false),
      StructField("bo", LongType, nullable = false),
      StructField("du", LongType, nullable = false),
      StructField("vv", LongType, nullable = false))),
    containsNull = false)

  private val HourUs = 3600L * 1000 * 1000
  private val DayLevel = 24

  def emit(scan: String, firstViews: Array[Int], lastViews: Array[Int], gapUs: Long): ArrayData = {
    val keys = firstViews.length + lastViews.length
    val views = TaskViews.of(scan, keys, Long.MaxValue)
    if (views.emitted) return null
    views.emitted = true
    val sums = new JMap[Bucket, Array[Long]]()
    def add(group: Int, v: Int, key: Int, day: Int, level: Int, bounce: Long, duration: Long, n: Long): Unit = {
      val bucket = new Bucket(group, v, key, day, level)
      var m = sums.get(bucket)
      if (m == null) { m = new Array[Long](4); sums.put(bucket, m) }
      m(0) += 1; m(1) += bounce; m(2) += duration; m(3) += n
    }
    val order: java.util.Comparator[Integer] = (a: Integer, b: Integer) => views.compare(a, b)
    var day = new Array[Integer](16)
    val it = views.heads.entrySet().iterator()
    while (it.hasNext) {
      val e = it.next()
      val vd = e.getKey
      var m = 0
      var i = e.getValue()(0)
      while (i >= 0) {
        if (m == day.length) day = Arrays.copyOf(day, m * 2)
        day(m) = i
        m += 1
        i = views.next(i)
      }
      Arrays.sort(day, 0, m, order)
      var a = 0
      while (a < m) {
        var b = a
        while (b + 1 < m && views.ts(day(b + 1)) - views.ts(day(b)) <= gapUs) b += 1
        val first: Int = day(a)
        val last: Int = day(b)
        val n = (b - a + 1).toLong
        val duration = Math.floorDiv(views.ts(last) - views.ts(first), 1000L)
        val bounce = if (n == 1) 1L else 0L
        val hour = Math.floorMod(Math.floorDiv(views.ts(first), HourUs), 24L).toInt
        for (level <- Array(hour, DayLevel)) {
          var k = 0
          while (k < firstViews.length) {
            add(vd.group, firstViews(k), views.codes(first * keys + k), vd.day, level, bounce, duration, n)
            k += 1
          }
          k = 0
          while (k < lastViews.length) {
            val at = firstViews.length + k
            add(vd.group, lastViews(k), views.codes(last * keys + at), vd.day, level, bounce, duration, n)
            k += 1
          }
        }
        a = b + 1
      }
    }
    val out = new Array[Any](sums.size)
    var k = 0
    val rows = sums.entrySet().iterator()
    while (rows.hasNext) {
      val e = rows.next()
      val b = e.getKey
      val m = e.getValue
      out(k) = new GenericInternalRow(
        Array[Any](views.word(b.group), b.v, views.word(b.key), b.day, b.level, null, 0L, m(0), m(1), m(2), m(3)))
      k += 1
    }
    views.release()
    new GenericArrayData(out)
  }
}
