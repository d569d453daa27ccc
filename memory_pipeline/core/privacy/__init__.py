"""Privacy: forgetting a contact everywhere the pipeline wrote their words (runs last)."""
