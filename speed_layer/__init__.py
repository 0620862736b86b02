"""The speed layer: Spark Structured Streaming from Kafka into per-generation realtime views in Redis."""
