"""Loading NOVA from its upstream layouts into one normalized Parquet file."""
