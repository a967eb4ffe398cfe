"""Model adapters: one small interface, one module per backend kind."""
