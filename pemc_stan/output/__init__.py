"""What a fit shows: its verdict, InferenceData, summaries, plots and run folders."""
