"""Super-resolution views: side by side, the lens, the region, the crops."""
