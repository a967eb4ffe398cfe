"""The benchmark's scorers: plain functions over plain data."""
