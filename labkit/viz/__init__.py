"""What the notebooks draw: plots, timing plots from GPU records, HTML renderings, the explorer widget, figures/."""
