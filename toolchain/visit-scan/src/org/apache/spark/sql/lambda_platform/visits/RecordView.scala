package org.apache.spark.sql.lambda_platform.visits

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, FalseLiteral}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.types.{BooleanType, DataType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Records one page view in its task's views of scan `scan` (TaskViews) and is true: a filter that
 * keeps every row. Children: group (text), site, visitor id, day (days since the epoch), time
 * (microseconds), event id, then the keys (first view's, then last view's) the visits are counted
 * under. A task's record past `limit` bytes fails the task (TaskViews). Nondeterministic, so Spark
 * neither moves it across the shuffle nor evaluates it twice.
 */
case class RecordView(scan: String, limit: Long, children: Seq[Expression]) extends Expression with Nondeterministic {
  private def keys: Int = children.length - 6

  override def nullable: Boolean = false
  override def dataType: DataType = BooleanType
  override protected def initializeInternal(partitionIndex: Int): Unit = {}

  override protected def evalInternal(input: InternalRow): Any = {
    val v = children.map(_.eval(input))
    RecordView.record(scan, limit, v(0).asInstanceOf[UTF8String], v(1).asInstanceOf[UTF8String],
      v(2).asInstanceOf[UTF8String], v(3).asInstanceOf[Int], v(4).asInstanceOf[Long],
      v(5).asInstanceOf[UTF8String], v.drop(6).map(_.asInstanceOf[UTF8String]).toArray)
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val gens = children.map(_.genCode(ctx))
    val values = ctx.addMutableState("UTF8String[]", "keys", v => s"$v = new UTF8String[$keys];")
    val fill = gens.drop(6).zipWithIndex
      .map { case (g, i) => s"$values[$i] = ${g.isNull} ? null : ${g.value};" }
      .mkString("\n")
    val scanRef = ctx.addReferenceObj("scan", scan, "java.lang.String")
    val args = gens.take(6).map(_.value).mkString(", ")
    ev.copy(
      code = code"""
        ${gens.map(_.code).mkString("\n")}
        $fill
        boolean ${ev.value} = ${classOf[RecordView].getName}.record($scanRef, ${limit}L, $args, $values);
        """,
      isNull = FalseLiteral)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): Expression =
    copy(children = newChildren)
}

object RecordView {
  def record(scan: String, limit: Long, group: UTF8String, site: UTF8String, visitor: UTF8String, day: Int, time: Long,
      id: UTF8String, keys: Array[UTF8String]): Boolean = {
    TaskViews.of(scan, keys.length, limit).add(group, site, visitor, day, time, id, keys)
    true
  }
}
