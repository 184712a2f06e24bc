"""Reading results: statistics (CIs, paired tests, IQM), per-variant tables, the
seed-variance decomposition, figures, and text and JSON made safe to show."""
