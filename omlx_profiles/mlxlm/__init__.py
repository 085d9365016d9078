"""What mlx-lm does with a config, as data and pure functions; never imports mlx (layer 3)."""
