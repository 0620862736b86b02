package org.apache.spark.sql.lambda_platform.visits

import org.apache.spark.sql.Column
import org.apache.spark.sql.classic.ExpressionUtils

/**
 * The columns the batch layer's shared pass builds from Python (views/visit_scan.py). In a package
 * under org.apache.spark.sql because a column is made from a Catalyst expression there only.
 */
object VisitScan {
  def record(scan: String, limit: Long, columns: Array[Column]): Column =
    ExpressionUtils.column(RecordView(scan, limit, columns.toIndexedSeq.map(ExpressionUtils.expression)))

  def emit(scan: String, firstViews: Array[Int], lastViews: Array[Int], gapUs: Long): Column =
    ExpressionUtils.column(EmitVisits(scan, firstViews.toIndexedSeq, lastViews.toIndexedSeq, gapUs))
}
