"""The batch filter table on a filesystem, as Parquet: ``filter_table`` (its layout, the batch
layer's write and garbage collection, and the list of files a reader scans for a generation)."""
