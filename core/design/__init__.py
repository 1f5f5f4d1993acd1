"""What an optimization changes and measures: parameters, losses, optimizers, proxies."""
