"""A home per tile op (tilec/ops/<op>.py); tilec/ops/registry.py maps Tile IR statements to them."""
