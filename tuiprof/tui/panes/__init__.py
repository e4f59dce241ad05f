"""The four panes of the main screen: source, histogram, SM utilisation, MD decision."""
