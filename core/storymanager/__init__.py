"""Story manager: rank files (``all_rank.csv``, ``selected_rank.csv``) and their rendering."""
