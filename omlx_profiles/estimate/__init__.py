"""What a user or an engine asks: estimator, budget, weights, the estimate dict (layer 6)."""
