"""Contact of every kind: colliders' distance queries, the cloth's own, penalty and friction."""
