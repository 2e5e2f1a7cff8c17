"""The docs' measured numbers, rendered from the kit's records between markers."""
