"""Stage 2, sessions and chunks: inactivity-gap sessions and overlapping message windows."""
