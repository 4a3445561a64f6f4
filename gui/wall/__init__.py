"""The video wall: many sources at once."""
