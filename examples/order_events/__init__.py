"""A tiny order-events producer: the application this example project tests."""
