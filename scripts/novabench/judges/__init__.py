"""Judges that turn free text into comparable labels for the text metrics."""
