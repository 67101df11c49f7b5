"""HTTP routes, one module per resource; each stays thin and calls the shared operations."""
